// The budget file's strict reader and its writer. The reader shares the
// policy file's syntax pass (line and column, repeated keys) and its "site"
// object (policy/site_json.h); nlohmann is called only through non-throwing
// entry points, with a type check before every get.
#include "analyzer/check/budget.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "policy/site_json.h"
#include "trace/event.h"

namespace cuxfer::check {

namespace {

using nlohmann::json;
using policy::shown;

constexpr double kMaxTolerancePercent = 100000;  // 1000x the baseline: beyond that a time limit means nothing

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::vector<std::string> finding_names() {
  std::vector<std::string> out;
  for (analyses::FindingKind k : analyses::kAllFindingKinds) out.push_back(analyses::finding_kind_name(k));
  return out;
}

bool parse_time_limit(policy::FieldChecker& f, const json& j, const std::string& where, TimeLimit& out) {
  if (!j.is_object()) return f.fail(where, "must be an object {baseline_ns, tolerance_percent}, got " + shown(j));
  if (!f.only_keys(j, where, {"baseline_ns", "tolerance_percent"})) return false;
  std::optional<uint64_t> baseline;
  if (!j.contains("baseline_ns")) return f.fail(where, "missing field 'baseline_ns'");
  if (!f.opt_unsigned(j, "baseline_ns", where, baseline)) return false;
  auto tol = j.find("tolerance_percent");
  if (tol == j.end()) return f.fail(where, "missing field 'tolerance_percent' (timings are noisy: say how much above the baseline passes)");
  if (!tol->is_number() || tol->get<double>() < 0 || tol->get<double>() > kMaxTolerancePercent ||
      !std::isfinite(tol->get<double>()))
    return f.fail(where + ".tolerance_percent", "must be a number from 0 to 100000, got " + shown(*tol));
  out.baseline_ns = *baseline;
  out.tolerance_percent = tol->get<double>();
  return true;
}

bool parse_entry(policy::FieldChecker& f, const json& j, const std::string& where, BudgetEntry& e) {
  if (!j.is_object()) return f.fail(where, "must be an object, got " + shown(j));
  if (!f.only_keys(j, where,
                   {"name", "class", "site", "nvtx_range", "max_bytes", "max_copies", "max_pageable_bytes",
                    "cpu_blocked", "forbid_findings", "comment"}))
    return false;
  if (int(j.contains("class")) + int(j.contains("site")) + int(j.contains("nvtx_range")) > 1)
    return f.fail(where, "an entry limits the run, one class, one site or one NVTX range: give at most one of "
                         "'class', 'site' and 'nvtx_range'");
  if (!f.opt_string(j, "name", where, e.name)) return false;
  std::string comment;
  if (!f.opt_string(j, "comment", where, comment)) return false;
  if (j.contains("class")) {
    e.scope = Scope::Class;
    if (!f.opt_string(j, "class", where, e.class_name)) return false;
    const auto& names = class_names();
    if (std::find(names.begin(), names.end(), e.class_name) == names.end())
      return f.fail(where + ".class", "unknown class '" + e.class_name +
                                          "' (a direction H2D, D2H, D2D, H2H or peer, a space and a memory kind "
                                          "pageable, pinned, registered, managed, device, array or mapped, as the "
                                          "report names them: \"H2D pageable\")");
  } else if (j.contains("nvtx_range")) {
    e.scope = Scope::Range;
    if (!f.opt_string(j, "nvtx_range", where, e.range)) return false;
    if (e.range.empty())
      return f.fail(where + ".nvtx_range", "must name a range as the report does (\"train / forward\"), got \"\"");
  } else if (auto s = j.find("site"); s != j.end()) {
    e.scope = Scope::Site;
    if (!policy::parse_site_object(*s, where + ".site", e.site, f.error)) return false;
    if (e.site.kind != policy::SiteKind::Call)
      return f.fail(where + ".site.kind", "budget sites are call sites (copies), not 'allocation'");
  }
  if (!f.opt_unsigned(j, "max_bytes", where, e.max_bytes) || !f.opt_unsigned(j, "max_copies", where, e.max_copies) ||
      !f.opt_unsigned(j, "max_pageable_bytes", where, e.max_pageable_bytes))
    return false;
  if (e.max_pageable_bytes && e.scope != Scope::Run && e.scope != Scope::Range)
    return f.fail(where + ".max_pageable_bytes", "applies to the whole run or an NVTX range (not a class or site)");
  if (auto t = j.find("cpu_blocked"); t != j.end()) {
    TimeLimit limit;
    if (!parse_time_limit(f, *t, where + ".cpu_blocked", limit)) return false;
    e.cpu_blocked = limit;
  }
  if (auto fs = j.find("forbid_findings"); fs != j.end()) {
    const std::string fw = where + ".forbid_findings";
    if (e.scope == Scope::Class) return f.fail(fw, "findings are forbidden for the run or a site, not a class");
    std::vector<std::string> names;
    if (!f.strings(*fs, fw, names)) return false;
    for (size_t i = 0; i < names.size(); ++i) {
      analyses::FindingKind k;
      if (!analyses::parse_finding_kind(names[i], k))
        return f.fail(fw + "[" + std::to_string(i) + "]",
                      "unknown finding '" + names[i] + "' (" + joined(finding_names()) + ")");
      if (std::find(e.forbid_findings.begin(), e.forbid_findings.end(), k) != e.forbid_findings.end())
        return f.fail(fw + "[" + std::to_string(i) + "]", "'" + names[i] + "' is listed twice");
      e.forbid_findings.push_back(k);
    }
  }
  if (!e.max_bytes && !e.max_copies && !e.max_pageable_bytes && !e.cpu_blocked && e.forbid_findings.empty())
    return f.fail(where, "no limit (max_bytes, max_copies, max_pageable_bytes, cpu_blocked or forbid_findings)");
  return true;
}

bool parse_document(std::string_view text, Budget& out, std::string& error) {
  if (!policy::check_json_structure(text, error)) return false;
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) {  // the syntax pass accepted it: should not happen
    error = "not valid JSON";
    return false;
  }
  policy::FieldChecker f{error};
  if (!doc.is_object()) return f.fail("top level", "a budget is a JSON object with \"schema\" and \"entries\"");
  if (!f.only_keys(doc, "top level", {"schema", "generator", "comment", "program", "command", "entries"}))
    return false;
  std::string schema;
  if (!doc.contains("schema")) return f.fail("top level", "missing field 'schema'");
  if (!f.opt_string(doc, "schema", "top level", schema)) return false;
  if (schema != kBudgetSchema) {
    if (schema.rfind(std::string(kBudgetSchemaName) + "/", 0) == 0)
      return f.fail("schema", "budget format '" + schema + "' is not supported by this cuxfer (it reads '" +
                                  std::string(kBudgetSchema) + "')");
    return f.fail("schema",
                  "not a cuxfer budget: schema '" + schema + "' (expected '" + std::string(kBudgetSchema) + "')");
  }
  Budget b;
  if (!f.opt_string(doc, "generator", "top level", b.generator) || !f.opt_string(doc, "comment", "top level", b.comment) ||
      !f.opt_string(doc, "program", "top level", b.program))
    return false;
  if (b.program.find('/') != std::string::npos)
    return f.fail("program", "an executable's base name, without '/', got '" + b.program + "'");
  if (auto c = doc.find("command"); c != doc.end() && !f.strings(*c, "command", b.command)) return false;
  if (!doc.contains("entries")) return f.fail("top level", "missing field 'entries'");
  const json& entries = doc["entries"];
  if (!entries.is_array()) return f.fail("entries", "must be an array, got " + shown(entries));
  std::map<std::string, size_t> seen;  // scope -> first entry
  for (size_t i = 0; i < entries.size(); ++i) {
    BudgetEntry e;
    const std::string where = "entries[" + std::to_string(i) + "]";
    if (!parse_entry(f, entries[i], where, e)) return false;
    const std::string key = e.scope == Scope::Site ? "site " + policy::site_identity(e.site) : scope_label(e);
    auto [it, fresh] = seen.try_emplace(key, i);
    if (!fresh) return f.fail(where, "a second entry for " + scope_label(e) + " (entries[" + std::to_string(it->second) + "])");
    b.entries.push_back(std::move(e));
  }
  out = std::move(b);
  return true;
}

}  // namespace

uint64_t TimeLimit::limit_ns() const {
  const double limit = std::ceil(static_cast<double>(baseline_ns) * (1.0 + tolerance_percent / 100.0));
  return limit >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(limit);
}

const std::vector<std::string>& class_names() {
  static const std::vector<std::string> names = [] {
    using trace::Direction;
    using trace::MemKind;
    std::vector<std::string> out;
    for (Direction d : {Direction::HtoD, Direction::DtoH, Direction::DtoD, Direction::HtoH, Direction::Peer,
                        Direction::Unknown})
      for (MemKind m : {MemKind::Pageable, MemKind::Pinned, MemKind::Registered, MemKind::Managed, MemKind::Device,
                        MemKind::Array, MemKind::Mapped, MemKind::Unknown})
        out.push_back(analyses::class_name({d, m}));
    return out;
  }();
  return names;
}

bool parse_budget(std::string_view text, Budget& out, std::string& error) {
  if (parse_document(text, out, error)) return true;
  error = policy::one_line(error);
  return false;
}

bool read_budget_file(const std::string& path, Budget& out, std::string& error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) {
    text.append(buf, n);
    if (text.size() > (64u << 20)) {
      std::fclose(file);
      error = path + ": larger than 64 MiB: not a budget file";
      return false;
    }
  }
  const bool read_error = std::ferror(file);
  std::fclose(file);
  if (read_error) {
    error = path + ": cannot read";
    return false;
  }
  if (!parse_budget(text, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

std::string write_budget(const Budget& b) {
  nlohmann::ordered_json doc;
  doc["schema"] = std::string(kBudgetSchema);
  if (!b.generator.empty()) doc["generator"] = b.generator;
  if (!b.comment.empty()) doc["comment"] = b.comment;
  if (!b.program.empty()) doc["program"] = b.program;
  if (!b.command.empty()) doc["command"] = b.command;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const BudgetEntry& e : b.entries) {
    nlohmann::ordered_json j;
    if (!e.name.empty()) j["name"] = e.name;
    if (e.scope == Scope::Class) j["class"] = e.class_name;
    if (e.scope == Scope::Site) j["site"] = policy::site_object(e.site);
    if (e.scope == Scope::Range) j["nvtx_range"] = e.range;
    if (e.max_bytes) j["max_bytes"] = *e.max_bytes;
    if (e.max_copies) j["max_copies"] = *e.max_copies;
    if (e.max_pageable_bytes) j["max_pageable_bytes"] = *e.max_pageable_bytes;
    if (e.cpu_blocked) {
      nlohmann::ordered_json t;
      t["baseline_ns"] = e.cpu_blocked->baseline_ns;
      t["tolerance_percent"] = e.cpu_blocked->tolerance_percent;
      j["cpu_blocked"] = std::move(t);
    }
    if (!e.forbid_findings.empty()) {
      std::vector<std::string> names;
      for (analyses::FindingKind k : e.forbid_findings) names.push_back(analyses::finding_kind_name(k));
      j["forbid_findings"] = names;
    }
    entries.push_back(std::move(j));
  }
  doc["entries"] = std::move(entries);
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string site_label(const policy::Site& s) {
  if (s.python()) {
    std::string out = s.python_file;
    if (s.python_line) out += ":" + std::to_string(s.python_line);
    if (!s.python_function.empty()) out += " in " + s.python_function;
    return out;
  }
  if (!s.symbol.empty()) return s.source.empty() ? s.symbol : s.symbol + " (" + s.source + ")";
  return policy::site_identity(s);
}

std::string scope_label(const BudgetEntry& e) {
  switch (e.scope) {
    case Scope::Run: return "run";
    case Scope::Class: return e.class_name;
    case Scope::Site: return "site " + site_label(e.site);
    case Scope::Range: return "NVTX range " + e.range;
  }
  return "?";
}

}  // namespace cuxfer::check
