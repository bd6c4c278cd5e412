// The policy file's JSON pieces that other cuxfer formats share: the strict
// syntax pass (line and column, repeated keys), the "site" object
// (docs/policy.md) and the one-line form of an error. The budget file of
// `cuxfer check` (docs/check.md) names its sites with the same object, so a
// site reads, matches and is refused the same way in both files.
//
// Unlike policy.h this header exposes nlohmann::json: it is for the
// analyzer, which builds with it; the shim uses policy.h only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/policy.h"

namespace cuxfer::policy {

// JSON syntax ("line 3, column 15: syntax error ...") and repeated keys (the
// field path: "entries[2].site: duplicate key 'kind'"), which a DOM would
// silently collapse. False with the one error.
bool check_json_structure(std::string_view text, std::string& error);

// A value as an error line quotes it: scalars as JSON, containers by kind
// ("an array"), never dumped (a deep nesting would exhaust the stack).
std::string shown(const nlohmann::json& v);

// Field checks of the policy and budget readers, so that both files refuse a
// wrong field in the same words. Each check returns false after setting the
// one error line "<where>[.key]: what is wrong"; an absent optional field
// leaves `out` as it was.
struct FieldChecker {
  std::string& error;

  bool fail(const std::string& where, const std::string& what);
  // Any key of `obj` not in `allowed` ("unknown field 'x' (fields: a, b)").
  bool only_keys(const nlohmann::json& obj, const std::string& where, std::initializer_list<const char*> allowed);
  bool opt_string(const nlohmann::json& obj, const char* key, const std::string& where, std::string& out);
  bool req_string(const nlohmann::json& obj, const char* key, const std::string& where, std::string& out);
  bool opt_unsigned(const nlohmann::json& obj, const char* key, const std::string& where,
                    std::optional<uint64_t>& out);
  // An array of strings, appended to `out`.
  bool strings(const nlohmann::json& v, const std::string& where, std::vector<std::string>& out);
};

// A "site" object at `where` (the field path used in errors). False with
// "<where>[.field]: what is wrong".
bool parse_site_object(const nlohmann::json& j, const std::string& where, Site& out, std::string& error);

// The site object as write_policy writes it (fixed key order).
nlohmann::ordered_json site_object(const Site& site);

// Control characters escaped, so that an error quoting the file stays one line.
std::string one_line(const std::string& s);

}  // namespace cuxfer::policy
