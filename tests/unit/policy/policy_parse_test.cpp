#include <string>

#include <gtest/gtest.h>

#include "policy/policy.h"

namespace cuxfer::policy {
namespace {

const char* const kGood = R"json({
  "schema": "cuxfer.policy/1",
  "generator": "hand",
  "comment": "two sites",
  "entries": [
    {
      "site": {"kind": "call", "build_id": "ABCDEF0123456789", "offset": "0x1a2b",
               "module": "/opt/app/train", "symbol": "load_batch(int)", "source": "load.cpp:42"},
      "path": "register",
      "min_bytes": 1048576,
      "estimated_gain_ns": 12345,
      "findings": ["rewrite_candidates", "large_pageable"],
      "reason": "reused 16 MiB buffer",
      "comment": "people only"
    },
    {
      "site": {"kind": "allocation", "build_id": "00ff", "offset": 4096},
      "path": "zero_copy"
    }
  ]
})json";

TEST(PolicyParse, ReadsEveryField) {
  Policy p;
  std::string error;
  ASSERT_TRUE(parse_policy(kGood, p, error)) << error;
  EXPECT_EQ(p.generator, "hand");
  EXPECT_EQ(p.comment, "two sites");
  ASSERT_EQ(p.entries.size(), 2u);
  const Entry& a = p.entries[0];
  EXPECT_EQ(a.site.kind, SiteKind::Call);
  EXPECT_EQ(a.site.build_id, "abcdef0123456789");  // normalized to lowercase
  EXPECT_EQ(a.site.offset, 0x1a2bu);
  EXPECT_EQ(a.site.module, "/opt/app/train");
  EXPECT_EQ(a.site.symbol, "load_batch(int)");
  EXPECT_EQ(a.site.source, "load.cpp:42");
  EXPECT_EQ(a.path, Path::Register);
  EXPECT_EQ(a.min_bytes, 1048576u);
  EXPECT_EQ(a.estimated_gain_ns, 12345u);
  EXPECT_EQ(a.findings, (std::vector<std::string>{"rewrite_candidates", "large_pageable"}));
  EXPECT_EQ(a.reason, "reused 16 MiB buffer");
  const Entry& b = p.entries[1];
  EXPECT_EQ(b.site.kind, SiteKind::Allocation);
  EXPECT_EQ(b.site.offset, 4096u);
  EXPECT_EQ(b.path, Path::ZeroCopy);
  EXPECT_EQ(b.min_bytes, 0u);
  EXPECT_FALSE(b.estimated_gain_ns);
  EXPECT_EQ(a.comment, "people only");
  EXPECT_TRUE(b.comment.empty());
}

TEST(PolicyParse, EmptyEntriesIsAPolicy) {
  Policy p;
  std::string error;
  EXPECT_TRUE(parse_policy(R"({"schema": "cuxfer.policy/1", "entries": []})", p, error)) << error;
  EXPECT_TRUE(p.entries.empty());
}

TEST(PolicyParse, EveryPathName) {
  for (const char* name : {"passthrough", "stage", "register", "exclude"}) {
    Policy p;
    std::string error;
    std::string text = std::string(R"({"schema":"cuxfer.policy/1","entries":[{"site":{"kind":"call","build_id":"ab","offset":"0x1"},"path":")") +
                       name + "\"}]}";
    ASSERT_TRUE(parse_policy(text, p, error)) << name << ": " << error;
    EXPECT_STREQ(path_name(p.entries[0].path), name);
  }
}

struct BadCase {
  const char* name;
  std::string text;
  std::string expected;  // the whole error line
};

std::string entry(const std::string& site, const std::string& rest = R"("path": "stage")") {
  return R"({"schema": "cuxfer.policy/1", "entries": [{"site": )" + site + ", " + rest + "}]}";
}
const std::string kSite = R"({"kind": "call", "build_id": "abcd", "offset": "0x10"})";

class PolicyParseErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(PolicyParseErrors, OneClearLine) {
  const BadCase& c = GetParam();
  Policy p;
  p.comment = "untouched";
  std::string error;
  EXPECT_FALSE(parse_policy(c.text, p, error));
  EXPECT_EQ(error, c.expected);
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_EQ(p.comment, "untouched");  // no partial result
}

INSTANTIATE_TEST_SUITE_P(
    All, PolicyParseErrors,
    ::testing::Values(
        BadCase{"empty", "", "line 1, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"},
        BadCase{"syntax", "{\n  \"schema\": \"cuxfer.policy/1\",\n  \"entries\": [,]\n}",
                "line 3, column 15: syntax error while parsing value - unexpected ','; expected '[', '{', or a literal"},
        BadCase{"not_object", "[1]", "top level: a policy is a JSON object with \"schema\" and \"entries\""},
        BadCase{"no_schema", R"({"entries": []})", "top level: missing field 'schema'"},
        BadCase{"schema_type", R"({"schema": 1, "entries": []})", "top level.schema: must be a string, got 1"},
        BadCase{"other_version", R"({"schema": "cuxfer.policy/2", "entries": []})",
                "schema: policy format 'cuxfer.policy/2' is not supported by this cuxfer (it reads 'cuxfer.policy/1')"},
        BadCase{"foreign", R"({"schema": "cuxfer.report/1", "entries": []})",
                "schema: not a cuxfer policy: schema 'cuxfer.report/1' (expected 'cuxfer.policy/1')"},
        BadCase{"unknown_top", R"({"schema": "cuxfer.policy/1", "entries": [], "extra": 1})",
                "top level: unknown field 'extra' (fields: schema, generator, comment, entries)"},
        BadCase{"no_entries", R"({"schema": "cuxfer.policy/1"})", "top level: missing field 'entries'"},
        BadCase{"entries_type", R"({"schema": "cuxfer.policy/1", "entries": {}})", "entries: must be an array"},
        BadCase{"entry_type", R"({"schema": "cuxfer.policy/1", "entries": [3]})", "entries[0]: must be an object"},
        BadCase{"duplicate_key", "{\"schema\": \"cuxfer.policy/1\", \"entries\": [{\"path\": \"stage\", \"path\": \"register\"}]}",
                "entries[0]: duplicate key 'path'"},
        BadCase{"duplicate_top_key", R"({"schema": "cuxfer.policy/1", "schema": "x", "entries": []})",
                "top level: duplicate key 'schema'"},
        BadCase{"no_site", R"({"schema": "cuxfer.policy/1", "entries": [{"path": "stage"}]})",
                "entries[0]: missing field 'site'"},
        BadCase{"site_type", entry("[]"), "entries[0].site: must be an object"},
        BadCase{"unknown_entry_field", entry(kSite, R"("path": "stage", "gain": 3)"),
                "entries[0]: unknown field 'gain' (fields: site, path, min_bytes, estimated_gain_ns, findings, reason, comment)"},
        BadCase{"unknown_site_field", entry(R"({"kind": "call", "build_id": "ab", "offset": "0x1", "address": 5})"),
                "entries[0].site: unknown field 'address' (fields: kind, build_id, offset, python, module, symbol, source)"},
        BadCase{"no_kind", entry(R"({"build_id": "ab", "offset": "0x1"})"), "entries[0].site: missing field 'kind'"},
        BadCase{"bad_kind", entry(R"({"kind": "copy", "build_id": "ab", "offset": "0x1"})"),
                "entries[0].site.kind: unknown site kind 'copy' (call or allocation)"},
        BadCase{"no_build_id", entry(R"({"kind": "call", "offset": "0x1"})"), "entries[0].site: missing field 'build_id'"},
        BadCase{"bad_build_id", entry(R"({"kind": "call", "build_id": "xyz1", "offset": "0x1"})"),
                "entries[0].site.build_id: not a build id: 'xyz1' (an even number of hex digits, 2-128)"},
        BadCase{"odd_build_id", entry(R"({"kind": "call", "build_id": "abc", "offset": "0x1"})"),
                "entries[0].site.build_id: not a build id: 'abc' (an even number of hex digits, 2-128)"},
        BadCase{"no_offset", entry(R"({"kind": "call", "build_id": "ab"})"), "entries[0].site: missing field 'offset'"},
        BadCase{"bad_offset", entry(R"({"kind": "call", "build_id": "ab", "offset": "1a2b"})"),
                "entries[0].site.offset: must be a hex string like \"0x1a2b\" (or a non-negative integer), got \"1a2b\""},
        BadCase{"negative_offset", entry(R"({"kind": "call", "build_id": "ab", "offset": -4})"),
                "entries[0].site.offset: must be a hex string like \"0x1a2b\" (or a non-negative integer), got -4"},
        // A container is named, not dumped (a deep one overflowed the stack).
        BadCase{"nested_offset", entry(R"({"kind": "call", "build_id": "ab", "offset": [[{"a": 1}]]})"),
                "entries[0].site.offset: must be a hex string like \"0x1a2b\" (or a non-negative integer), got an array"},
        BadCase{"module_type", entry(R"({"kind": "call", "build_id": "ab", "offset": "0x1", "module": 7})"),
                "entries[0].site.module: must be a string, got 7"},
        BadCase{"no_path", entry(kSite, R"("reason": "x")"), "entries[0]: missing field 'path'"},
        BadCase{"bad_path", entry(kSite, R"("path": "pin")"),
                "entries[0].path: unknown path 'pin' (passthrough, stage, register, zero_copy or exclude)"},
        BadCase{"zero_copy_call", entry(kSite, R"("path": "zero_copy")"),
                "entries[0].path: zero_copy applies to allocation sites, not call sites"},
        BadCase{"stage_allocation", entry(R"({"kind": "allocation", "build_id": "ab", "offset": "0x1"})"),
                "entries[0].path: stage applies to call sites, not allocation sites"},
        BadCase{"min_bytes_negative", entry(kSite, R"("path": "stage", "min_bytes": -1)"),
                "entries[0].min_bytes: must be a non-negative integer, got -1"},
        BadCase{"gain_float", entry(kSite, R"("path": "stage", "estimated_gain_ns": 1.5)"),
                "entries[0].estimated_gain_ns: must be a non-negative integer, got 1.5"},
        BadCase{"findings_type", entry(kSite, R"("path": "stage", "findings": "tiny_storm")"),
                "entries[0].findings: must be an array of strings, got \"tiny_storm\""},
        BadCase{"findings_item", entry(kSite, R"("path": "stage", "findings": ["a", 2])"),
                "entries[0].findings[1]: must be a string, got 2"},
        BadCase{"reason_type", entry(kSite, R"("path": "stage", "reason": ["x"])"), "entries[0].reason: must be a string, got an array"},
        BadCase{"duplicate_site",
                R"({"schema": "cuxfer.policy/1", "entries": [
                  {"site": {"kind": "call", "build_id": "AB", "offset": "0x10"}, "path": "stage"},
                  {"site": {"kind": "allocation", "build_id": "ab", "offset": "0x10"}, "path": "zero_copy"},
                  {"site": {"kind": "call", "build_id": "ab", "offset": 16}, "path": "register"}]})",
                "entries[2].site: duplicate site: call site ab+0x10 is also entries[0]"},
        // Found by fuzz/fuzz_policy_parser: control characters from the file
        // (valid JSON escapes) came through into the error, splitting the line.
        BadCase{"newline_in_key", R"({"schema": "cuxfer.policy/1", "\ntries": []})",
                "top level: unknown field '\\ntries' (fields: schema, generator, comment, entries)"},
        BadCase{"control_in_value", entry(kSite, R"("path": "st\r\u0001age")"),
                "entries[0].path: unknown path 'st\\r\\x01age' (passthrough, stage, register, zero_copy or exclude)"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(PolicyNames, BuildIdNormalization) {
  std::string out;
  EXPECT_TRUE(normalize_build_id("DEADbeef", out));
  EXPECT_EQ(out, "deadbeef");
  EXPECT_FALSE(normalize_build_id("", out));
  EXPECT_FALSE(normalize_build_id("a", out));
  EXPECT_FALSE(normalize_build_id("0x12", out));
  EXPECT_FALSE(normalize_build_id(std::string(130, 'a'), out));
}

TEST(PolicyFile, MissingFileIsOneLine) {
  Policy p;
  std::string error;
  EXPECT_FALSE(read_policy_file("/nonexistent/policy.json", p, error));
  EXPECT_EQ(error, "/nonexistent/policy.json: cannot open: No such file or directory");
}

}  // namespace
}  // namespace cuxfer::policy
