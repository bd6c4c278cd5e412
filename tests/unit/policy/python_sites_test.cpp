// Python sites in the policy file: parsed, written back, refused when
// malformed, and matched by file, function and line (docs/policy.md).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "policy/policy.h"
#include "policy/site_matcher.h"
#include "trace/python_frame.h"

namespace cuxfer::policy {
namespace {

constexpr const char* kDoc = R"({"schema": "cuxfer.policy/1", "entries": [
  {"site": {"kind": "call", "python": {"file": "train.py", "function": "load_batch", "line": 42}}, "path": "stage"},
  {"site": {"kind": "call", "python": {"file": "scripts/train.py", "function": "load_batch", "line": 50}},
   "path": "register"},
  {"site": {"kind": "call", "python": {"file": "/abs/eval.py", "line": 7}}, "path": "exclude"}
]})";

TEST(PythonSites, ParseAndWriteBack) {
  Policy p;
  std::string error;
  ASSERT_TRUE(parse_policy(kDoc, p, error)) << error;
  ASSERT_EQ(p.entries.size(), 3u);
  EXPECT_TRUE(p.entries[0].site.python());
  EXPECT_EQ(p.entries[0].site.python_file, "train.py");
  EXPECT_EQ(p.entries[0].site.python_function, "load_batch");
  EXPECT_EQ(p.entries[0].site.python_line, 42);
  EXPECT_EQ(p.entries[2].site.python_function, "");
  EXPECT_EQ(site_identity(p.entries[0].site), "py:train.py:load_batch:42");
  Policy again;
  ASSERT_TRUE(parse_policy(write_policy(p), again, error)) << error;
  ASSERT_EQ(again.entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_site(p.entries[i].site, again.entries[i].site)) << i;
  EXPECT_EQ(write_policy(again), write_policy(p));
}

TEST(PythonSites, Refused) {
  const std::map<std::string, std::string> bad = {
      {R"({"kind": "call", "python": {"file": "a.py", "line": 1}, "build_id": "ab", "offset": "0x1"})",
       "either python or build_id"},
      {R"({"kind": "call", "python": {"file": "a.py"}})", "needs a function, a line, or both"},
      {R"({"kind": "call", "python": {"file": "", "line": 3}})", "must not be empty"},
      {R"({"kind": "call", "python": {"file": "a.py", "line": -3}})", "line"},
      {R"({"kind": "call", "python": {"file": "a.py", "col": 3}})", "unknown field 'col'"},
      {R"({"kind": "call", "python": "a.py:3"})", "must be an object"},
  };
  for (const auto& [site, why] : bad) {
    Policy p;
    std::string error;
    const std::string doc = R"({"schema": "cuxfer.policy/1", "entries": [{"site": )" + site + R"(, "path": "stage"}]})";
    EXPECT_FALSE(parse_policy(doc, p, error)) << site;
    EXPECT_NE(error.find(why), std::string::npos) << site << " -> " << error;
  }
  // The same Python site twice.
  Policy p;
  std::string error;
  const std::string dup = R"({"schema": "cuxfer.policy/1", "entries": [
    {"site": {"kind": "call", "python": {"file": "a.py", "line": 3}}, "path": "stage"},
    {"site": {"kind": "call", "python": {"file": "a.py", "line": 3}}, "path": "register"}]})";
  EXPECT_FALSE(parse_policy(dup, p, error));
  EXPECT_NE(error.find("duplicate site"), std::string::npos) << error;
}

TEST(PythonSites, FileMatching) {
  EXPECT_TRUE(python_file_matches("train.py", "/home/me/train.py"));
  EXPECT_TRUE(python_file_matches("me/train.py", "/home/me/train.py"));
  EXPECT_TRUE(python_file_matches("/home/me/train.py", "/home/me/train.py"));
  EXPECT_FALSE(python_file_matches("rain.py", "/home/me/train.py"));
  EXPECT_FALSE(python_file_matches("train.py", "/home/me/train.pyc"));
  EXPECT_FALSE(python_file_matches("", "/home/me/train.py"));
  EXPECT_TRUE(python_file_matches("train.py", "train.py"));
}

// Frames named from a table: code id -> (file, function), line = offset.
class Names : public PythonNames {
 public:
  std::map<uint32_t, std::pair<std::string, std::string>> codes;
  bool name(uint64_t frame, PythonFrameName& out) const noexcept override {
    const auto p = trace::decode_python_frame(frame);
    auto it = codes.find(p.code_id);
    if (it == codes.end()) return false;
    out.file = it->second.first;
    out.function = it->second.second;
    out.line = static_cast<int>(p.offset);
    return true;
  }
};

TEST(PythonSites, MatchByFunctionWithTheLineAsAHint) {
  Policy p;
  std::string error;
  ASSERT_TRUE(parse_policy(kDoc, p, error)) << error;
  SiteMatcher m;
  m.bind(p, {});
  EXPECT_EQ(m.python_entries(), 3u);
  EXPECT_EQ(m.unbound_entries(), 0u);
  Names names;
  names.codes = {{1, {"/home/me/scripts/train.py", "load_batch"}},
                 {2, {"/home/me/scripts/train.py", "main"}},
                 {3, {"/abs/eval.py", "run"}}};
  auto decide = [&](uint32_t code, uint32_t line, const PythonNames* n) {
    const uint64_t frames[] = {0x7f0000001000ull, trace::encode_python_frame(code, line, true),
                               trace::encode_python_frame(2, 90, true)};
    return m.decide(SiteKind::Call, frames, 3, 1 << 20, n);
  };
  Decision d = decide(1, 42, &names);  // exact line: entry 0
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.entry, 0u);
  EXPECT_EQ(d.frame, 1u);
  d = decide(1, 50, &names);  // exact line of entry 1
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.entry, 1u);
  d = decide(1, 48, &names);  // edited script: the nearest of the function's entries
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.entry, 1u);
  d = decide(3, 7, &names);  // no function: the exact line
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.path, Path::Exclude);
  EXPECT_FALSE(decide(3, 8, &names).matched);
  EXPECT_FALSE(decide(1, 42, nullptr).matched);  // no names: Python frames match nothing
  EXPECT_FALSE(decide(9, 42, &names).matched);   // a code object not known
  // Allocation sites do not match call entries.
  const uint64_t frames[] = {trace::encode_python_frame(1, 42, true)};
  EXPECT_FALSE(m.decide(SiteKind::Allocation, frames, 1, 1 << 20, &names).matched);
}

}  // namespace
}  // namespace cuxfer::policy
