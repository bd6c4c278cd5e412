// The writer: nlohmann's ordered_json keeps the key order fixed, so the same
// policy always gives the same bytes (diffable, reviewable).
#include <cinttypes>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "policy/policy.h"
#include "policy/site_json.h"

namespace cuxfer::policy {

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

}  // namespace

nlohmann::ordered_json site_object(const Site& s) {
  nlohmann::ordered_json site;
  site["kind"] = site_kind_name(s.kind);
  if (s.python()) {
    nlohmann::ordered_json py;
    py["file"] = s.python_file;
    if (!s.python_function.empty()) py["function"] = s.python_function;
    if (s.python_line) py["line"] = s.python_line;
    site["python"] = std::move(py);
  } else {
    site["build_id"] = s.build_id;
    site["offset"] = hex(s.offset);
  }
  if (!s.module.empty()) site["module"] = s.module;
  if (!s.symbol.empty()) site["symbol"] = s.symbol;
  if (!s.source.empty()) site["source"] = s.source;
  return site;
}

std::string write_policy(const Policy& policy) {
  nlohmann::ordered_json doc;
  doc["schema"] = std::string(kSchema);
  if (!policy.generator.empty()) doc["generator"] = policy.generator;
  if (!policy.comment.empty()) doc["comment"] = policy.comment;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const Entry& e : policy.entries) {
    nlohmann::ordered_json j;
    j["site"] = site_object(e.site);
    j["path"] = path_name(e.path);
    // Beside the path it qualifies: "speculative: measure it first" is read before the numbers.
    if (!e.comment.empty()) j["comment"] = e.comment;
    if (e.min_bytes) j["min_bytes"] = e.min_bytes;
    if (e.estimated_gain_ns) j["estimated_gain_ns"] = *e.estimated_gain_ns;
    if (!e.findings.empty()) j["findings"] = e.findings;
    if (!e.reason.empty()) j["reason"] = e.reason;
    entries.push_back(std::move(j));
  }
  doc["entries"] = std::move(entries);
  // replace: a symbol name that is not UTF-8 must not make dump() throw.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace cuxfer::policy
