// The writer: nlohmann's ordered_json keeps the key order fixed, so the same
// policy always gives the same bytes (diffable, reviewable).
#include <cinttypes>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "policy/policy.h"

namespace cuxfer::policy {

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

}  // namespace

std::string write_policy(const Policy& policy) {
  nlohmann::ordered_json doc;
  doc["schema"] = std::string(kSchema);
  if (!policy.generator.empty()) doc["generator"] = policy.generator;
  if (!policy.comment.empty()) doc["comment"] = policy.comment;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const Entry& e : policy.entries) {
    nlohmann::ordered_json site;
    site["kind"] = site_kind_name(e.site.kind);
    if (e.site.python()) {
      nlohmann::ordered_json py;
      py["file"] = e.site.python_file;
      if (!e.site.python_function.empty()) py["function"] = e.site.python_function;
      if (e.site.python_line) py["line"] = e.site.python_line;
      site["python"] = std::move(py);
    } else {
      site["build_id"] = e.site.build_id;
      site["offset"] = hex(e.site.offset);
    }
    if (!e.site.module.empty()) site["module"] = e.site.module;
    if (!e.site.symbol.empty()) site["symbol"] = e.site.symbol;
    if (!e.site.source.empty()) site["source"] = e.site.source;
    nlohmann::ordered_json j;
    j["site"] = std::move(site);
    j["path"] = path_name(e.path);
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
