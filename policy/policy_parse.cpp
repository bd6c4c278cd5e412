// The strict reader of policy files. Two passes over the text: a SAX pass
// that finds syntax errors (with line and column) and duplicate keys (which a
// DOM silently collapses to the last one), then a DOM pass that checks every
// field. Nothing throws: nlohmann is called only through its non-throwing
// entry points (parse with allow_exceptions=false, sax_parse with a handler
// that never throws, type checks before every get).
#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "policy/policy.h"
#include "policy/site_json.h"

namespace cuxfer::policy {
namespace {

using nlohmann::json;

// Syntax and duplicate keys, with the path of where the problem is.
class StructureCheck final : public nlohmann::json_sax<json> {
 public:
  std::string error;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override {
    stack_.push_back({false, 0, {}, {}});
    return true;
  }
  bool key(string_t& k) override {
    Level& l = stack_.back();
    l.key = k;
    if (!l.keys.insert(k).second) {
      error = where() + ": duplicate key '" + k + "'";
      return false;
    }
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    stack_.push_back({true, 0, {}, {}});
    return true;
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    std::string what = ex.what();
    if (auto p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
    if (what.rfind("parse error at ", 0) == 0) what.erase(0, 15);
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    error = what;
    return false;
  }

 private:
  struct Level {
    bool array;
    size_t index;
    std::string key;
    std::set<std::string> keys;
  };
  std::vector<Level> stack_;

  bool scalar() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    return true;
  }
  bool close() {
    stack_.pop_back();
    return scalar();
  }
  std::string where() const {
    std::string w;
    for (const Level& l : stack_) {
      if (l.array) {
        w += "[" + std::to_string(l.index) + "]";
      } else if (&l != &stack_.back()) {
        w += (w.empty() ? "" : ".") + l.key;
      }
    }
    return w.empty() ? "top level" : w;
  }
};

bool parse_offset(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  auto [p, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_site(FieldChecker& c, const json& j, const std::string& where, Site& site) {
  if (!j.is_object()) return c.fail(where, "must be an object");
  if (!c.only_keys(j, where, {"kind", "build_id", "offset", "python", "module", "symbol", "source"})) return false;
  std::string kind, build_id;
  if (!c.req_string(j, "kind", where, kind)) return false;
  if (!parse_site_kind(kind, site.kind))
    return c.fail(where + ".kind", "unknown site kind '" + kind + "' (call or allocation)");
  if (auto py = j.find("python"); py != j.end()) {
    const std::string pw = where + ".python";
    if (j.contains("build_id") || j.contains("offset"))
      return c.fail(where, "a site is either python or build_id + offset, not both");
    if (!py->is_object()) return c.fail(pw, "must be an object {file, function, line}");
    if (!c.only_keys(*py, pw, {"file", "function", "line"})) return false;
    if (!c.req_string(*py, "file", pw, site.python_file)) return false;
    if (site.python_file.empty()) return c.fail(pw + ".file", "must not be empty");
    if (!c.opt_string(*py, "function", pw, site.python_function)) return false;
    std::optional<uint64_t> line;
    if (!c.opt_unsigned(*py, "line", pw, line)) return false;
    if (line && *line > 100000000) return c.fail(pw + ".line", "is not a line number");
    site.python_line = static_cast<int>(line.value_or(0));
    if (site.python_function.empty() && site.python_line == 0)
      return c.fail(pw, "needs a function, a line, or both");
    return c.opt_string(j, "module", where, site.module) && c.opt_string(j, "symbol", where, site.symbol) &&
           c.opt_string(j, "source", where, site.source);
  }
  if (!c.req_string(j, "build_id", where, build_id)) return false;
  if (!normalize_build_id(build_id, site.build_id))
    return c.fail(where + ".build_id", "not a build id: '" + build_id + "' (an even number of hex digits, 2-128)");
  auto off = j.find("offset");
  if (off == j.end()) return c.fail(where, "missing field 'offset'");
  if (!parse_offset(*off, site.offset))
    return c.fail(where + ".offset", "must be a hex string like \"0x1a2b\" (or a non-negative integer), got " +
                                         shown(*off));
  return c.opt_string(j, "module", where, site.module) && c.opt_string(j, "symbol", where, site.symbol) &&
         c.opt_string(j, "source", where, site.source);
}

bool parse_entry(FieldChecker& c, const json& j, const std::string& where, Entry& e) {
  if (!j.is_object()) return c.fail(where, "must be an object");
  if (!c.only_keys(j, where, {"site", "path", "min_bytes", "estimated_gain_ns", "findings", "reason", "comment"}))
    return false;
  if (!j.contains("site")) return c.fail(where, "missing field 'site'");
  if (!parse_site(c, j["site"], where + ".site", e.site)) return false;
  std::string path;
  if (!c.req_string(j, "path", where, path)) return false;
  if (!parse_path(path, e.path))
    return c.fail(where + ".path",
                  "unknown path '" + path + "' (passthrough, stage, register, zero_copy or exclude)");
  if (e.site.kind == SiteKind::Call && e.path == Path::ZeroCopy)
    return c.fail(where + ".path", "zero_copy applies to allocation sites, not call sites");
  if (e.site.kind == SiteKind::Allocation && (e.path == Path::Stage || e.path == Path::Register))
    return c.fail(where + ".path", std::string(path_name(e.path)) + " applies to call sites, not allocation sites");
  std::optional<uint64_t> min_bytes;
  if (!c.opt_unsigned(j, "min_bytes", where, min_bytes)) return false;
  e.min_bytes = min_bytes.value_or(0);
  if (!c.opt_unsigned(j, "estimated_gain_ns", where, e.estimated_gain_ns)) return false;
  if (auto f = j.find("findings"); f != j.end() && !c.strings(*f, where + ".findings", e.findings)) return false;
  return c.opt_string(j, "reason", where, e.reason) && c.opt_string(j, "comment", where, e.comment);
}

std::string describe(const Site& s) { return std::string(site_kind_name(s.kind)) + " site " + site_identity(s); }

bool parse_document(std::string_view text, Policy& out, std::string& error) {
  StructureCheck structure;
  if (!json::sax_parse(text, &structure, json::input_format_t::json, true, false)) {
    error = structure.error.empty() ? "not valid JSON" : structure.error;
    return false;
  }
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) {  // the SAX pass accepted it: should not happen
    error = "not valid JSON";
    return false;
  }
  FieldChecker c{error};
  if (!doc.is_object()) return c.fail("top level", "a policy is a JSON object with \"schema\" and \"entries\"");
  if (!c.only_keys(doc, "top level", {"schema", "generator", "comment", "entries"})) return false;
  std::string schema;
  if (!c.req_string(doc, "schema", "top level", schema)) return false;
  if (schema != kSchema) {
    const std::string prefix = std::string(kSchemaName) + "/";
    if (schema.rfind(prefix, 0) == 0)
      return c.fail("schema", "policy format '" + schema + "' is not supported by this cuxfer (it reads '" +
                                  std::string(kSchema) + "')");
    return c.fail("schema", "not a cuxfer policy: schema '" + schema + "' (expected '" + std::string(kSchema) + "')");
  }
  Policy p;
  if (!c.opt_string(doc, "generator", "top level", p.generator) ||
      !c.opt_string(doc, "comment", "top level", p.comment))
    return false;
  if (!doc.contains("entries")) return c.fail("top level", "missing field 'entries'");
  const json& entries = doc["entries"];
  if (!entries.is_array()) return c.fail("entries", "must be an array");
  p.entries.reserve(entries.size());
  std::map<std::pair<SiteKind, std::string>, size_t> seen;  // site -> first entry
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry e;
    const std::string where = "entries[" + std::to_string(i) + "]";
    if (!parse_entry(c, entries[i], where, e)) return false;
    auto [it, fresh] = seen.try_emplace({e.site.kind, site_identity(e.site)}, i);
    if (!fresh)
      return c.fail(where + ".site", "duplicate site: " + describe(e.site) + " is also entries[" +
                                         std::to_string(it->second) + "]");
    p.entries.push_back(std::move(e));
  }
  out = std::move(p);
  return true;
}

}  // namespace

// Keys and values from the file are quoted in error messages, and a JSON
// string may hold any control character ("\n" is two bytes of valid JSON):
// escape them so that the error stays the one line the contract promises
// (found by fuzz/fuzz_policy_parser: a key "\ntries" split the message).
// A wrong value as the error quotes it. Containers are named, not dumped:
// dump() recurses once per nesting level, and an offset of 200000 nested '['
// overflowed the stack of the process reading the policy, which for the shim
// is the app (found with fuzz/fuzz_policy_parser).
std::string shown(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool FieldChecker::fail(const std::string& where, const std::string& what) {
  error = where + ": " + what;
  return false;
}

bool FieldChecker::only_keys(const json& obj, const std::string& where, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* a : allowed) known |= it.key() == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return fail(where, "unknown field '" + it.key() + "' (fields: " + list + ")");
    }
  }
  return true;
}

bool FieldChecker::opt_string(const json& obj, const char* key, const std::string& where, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  if (!it->is_string()) return fail(where + "." + key, "must be a string, got " + shown(*it));
  out = it->get<std::string>();
  return true;
}

bool FieldChecker::req_string(const json& obj, const char* key, const std::string& where, std::string& out) {
  if (!obj.contains(key)) return fail(where, std::string("missing field '") + key + "'");
  return opt_string(obj, key, where, out);
}

bool FieldChecker::opt_unsigned(const json& obj, const char* key, const std::string& where,
                                std::optional<uint64_t>& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  if (!it->is_number_unsigned()) return fail(where + "." + key, "must be a non-negative integer, got " + shown(*it));
  out = it->get<uint64_t>();
  return true;
}

bool FieldChecker::strings(const json& v, const std::string& where, std::vector<std::string>& out) {
  if (!v.is_array()) return fail(where, "must be an array of strings, got " + shown(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return fail(where + "[" + std::to_string(i) + "]", "must be a string, got " + shown(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return true;
}

std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    }
  }
  return out;
}

bool check_json_structure(std::string_view text, std::string& error) {
  StructureCheck structure;
  if (json::sax_parse(text, &structure, json::input_format_t::json, true, false)) return true;
  error = one_line(structure.error.empty() ? "not valid JSON" : structure.error);
  return false;
}

bool parse_site_object(const json& j, const std::string& where, Site& out, std::string& error) {
  FieldChecker c{error};
  Site site;
  if (!parse_site(c, j, where, site)) {
    error = one_line(error);
    return false;
  }
  out = std::move(site);
  return true;
}

bool parse_policy(std::string_view text, Policy& out, std::string& error) {
  if (parse_document(text, out, error)) return true;
  error = one_line(error);
  return false;
}

}  // namespace cuxfer::policy
