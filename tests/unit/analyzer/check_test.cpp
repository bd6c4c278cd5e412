// `cuxfer check`: the budget file's strict parser (every malformed field ->
// its one line), its writer, and the pure verdict function (check/verdicts.h)
// on made-up reports with known answers, with the exact lines the command
// prints (render/check_renderer.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzer/check/budget.h"
#include "analyzer/check/verdicts.h"
#include "analyzer/render/check_renderer.h"

namespace cuxfer {
namespace {

using analyses::FindingKind;
using check::Budget;
using check::Scope;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;
constexpr const char* kBuildId = "0123456789abcdef0123456789abcdef01234567";

// A body of valid entries for the malformed cases to start from.
std::string with_entries(const std::string& entries) {
  return R"({"schema": "cuxfer.budget/1", "program": "train", "entries": [)" + entries + "]}";
}

std::string parse_error(const std::string& text) {
  Budget b;
  std::string error;
  EXPECT_FALSE(check::parse_budget(text, b, error)) << text;
  EXPECT_TRUE(b.entries.empty());  // nothing half-read
  return error;
}

TEST(BudgetParse, ValidFileWithEveryKindOfEntry) {
  const std::string text = R"J({
    "schema": "cuxfer.budget/1",
    "generator": "by hand",
    "comment": "CI gate",
    "program": "train",
    "command": ["train", "--epochs", "1"],
    "entries": [
      {"max_bytes": 100, "max_copies": 4, "max_pageable_bytes": 50,
       "cpu_blocked": {"baseline_ns": 1000, "tolerance_percent": 50},
       "forbid_findings": ["async_pageable", "tiny_storm"]},
      {"name": "uploads", "class": "H2D pageable", "max_bytes": 64, "max_copies": 2},
      {"site": {"kind": "call", "python": {"file": "train.py", "function": "load_batch", "line": 42}},
       "max_copies": 8, "forbid_findings": ["large_pageable"], "comment": "the loader"},
      {"site": {"kind": "call", "build_id": "0123456789ABCDEF0123456789abcdef01234567", "offset": "0x1431",
                "symbol": "upload(int)", "source": "up.cpp:9"},
       "max_bytes": 0}
    ]})J";
  Budget b;
  std::string error;
  ASSERT_TRUE(check::parse_budget(text, b, error)) << error;
  EXPECT_EQ(b.program, "train");
  EXPECT_EQ(b.command, (std::vector<std::string>{"train", "--epochs", "1"}));
  ASSERT_EQ(b.entries.size(), 4u);
  const auto& run = b.entries[0];
  EXPECT_EQ(run.scope, Scope::Run);
  EXPECT_EQ(*run.max_bytes, 100u);
  EXPECT_EQ(*run.max_copies, 4u);
  EXPECT_EQ(*run.max_pageable_bytes, 50u);
  EXPECT_EQ(run.cpu_blocked->baseline_ns, 1000u);
  EXPECT_EQ(run.cpu_blocked->limit_ns(), 1500u);
  EXPECT_EQ(run.forbid_findings, (std::vector<FindingKind>{FindingKind::AsyncPageable, FindingKind::TinyStorm}));
  EXPECT_EQ(b.entries[1].scope, Scope::Class);
  EXPECT_EQ(b.entries[1].class_name, "H2D pageable");
  EXPECT_EQ(b.entries[1].name, "uploads");
  EXPECT_EQ(b.entries[2].scope, Scope::Site);
  EXPECT_EQ(b.entries[2].site.python_file, "train.py");
  EXPECT_EQ(b.entries[2].site.python_line, 42);
  EXPECT_EQ(b.entries[3].site.build_id, kBuildId);  // lower-cased, as policies read it
  EXPECT_EQ(b.entries[3].site.offset, 0x1431u);
  EXPECT_EQ(*b.entries[3].max_bytes, 0u);
  EXPECT_EQ(check::scope_label(b.entries[2]), "site train.py:42 in load_batch");
  EXPECT_EQ(check::scope_label(b.entries[3]), "site upload(int) (up.cpp:9)");

  // The writer's output reads back to the same budget, and writes the same bytes.
  const std::string written = check::write_budget(b);
  Budget again;
  ASSERT_TRUE(check::parse_budget(written, again, error)) << error;
  EXPECT_EQ(check::write_budget(again), written);
  EXPECT_EQ(again.entries[2].forbid_findings, b.entries[2].forbid_findings);
  EXPECT_EQ(again.entries[0].cpu_blocked->tolerance_percent, 50.0);
}

TEST(BudgetParse, EveryMalformedFieldIsOneLineNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal"},
      {R"({"schema": "cuxfer.budget/1", "schema": "x", "entries": []})", "top level: duplicate key 'schema'"},
      {"[]", R"(top level: a budget is a JSON object with "schema" and "entries")"},
      {R"({"entries": []})", "top level: missing field 'schema'"},
      {R"({"schema": "cuxfer.budget/2", "entries": []})",
       "schema: budget format 'cuxfer.budget/2' is not supported by this cuxfer (it reads 'cuxfer.budget/1')"},
      {R"({"schema": "cuxfer.policy/1", "entries": []})",
       "schema: not a cuxfer budget: schema 'cuxfer.policy/1' (expected 'cuxfer.budget/1')"},
      {R"({"schema": "cuxfer.budget/1"})", "top level: missing field 'entries'"},
      {R"({"schema": "cuxfer.budget/1", "entries": {}})", "entries: must be an array, got an object"},
      {R"({"schema": "cuxfer.budget/1", "entries": [], "limits": 1})",
       "top level: unknown field 'limits' (fields: schema, generator, comment, program, command, entries)"},
      {R"({"schema": "cuxfer.budget/1", "program": "/bin/train", "entries": []})",
       "program: an executable's base name, without '/', got '/bin/train'"},
      {R"({"schema": "cuxfer.budget/1", "program": 3, "entries": []})", "top level.program: must be a string, got 3"},
      {R"({"schema": "cuxfer.budget/1", "command": ["a", 1], "entries": []})", "command[1]: must be a string, got 1"},
      {with_entries("3"), "entries[0]: must be an object, got 3"},
      {with_entries("{}"),
       "entries[0]: no limit (max_bytes, max_copies, max_pageable_bytes, cpu_blocked or forbid_findings)"},
      {with_entries(R"({"max_bytes": -1})"), "entries[0].max_bytes: must be a non-negative integer, got -1"},
      {with_entries(R"({"max_copies": "4"})"), "entries[0].max_copies: must be a non-negative integer, got \"4\""},
      {with_entries(R"({"max_bytes": 1, "max_byte": 2})"),
       "entries[0]: unknown field 'max_byte' (fields: name, class, site, nvtx_range, max_bytes, max_copies, "
       "max_pageable_bytes, cpu_blocked, forbid_findings, comment)"},
      {with_entries(R"({"max_bytes": 1}, {"max_copies": 2})"), "entries[1]: a second entry for run (entries[0])"},
      {with_entries(R"({"class": "H2D pinnned", "max_bytes": 1})"),
       "entries[0].class: unknown class 'H2D pinnned' (a direction H2D, D2H, D2D, H2H or peer, a space and a memory "
       "kind pageable, pinned, registered, managed, device, array or mapped, as the report names them: \"H2D "
       "pageable\")"},
      {with_entries(R"({"class": "D2H pinned", "max_bytes": 1}, {"class": "D2H pinned", "max_copies": 1})"),
       "entries[1]: a second entry for D2H pinned (entries[0])"},
      {with_entries(R"({"class": "H2D pageable", "max_pageable_bytes": 1})"),
       "entries[0].max_pageable_bytes: applies to the whole run or an NVTX range (not a class or site)"},
      {with_entries(R"({"class": "H2D pageable", "forbid_findings": ["tiny_storm"]})"),
       "entries[0].forbid_findings: findings are forbidden for the run or a site, not a class"},
      {with_entries(R"({"forbid_findings": ["async_pagable"]})"),
       "entries[0].forbid_findings[0]: unknown finding 'async_pagable' (async_pageable, large_pageable, tiny_storm, "
       "rewrite_candidates, sync_copy_idle, duplicate_uploads, round_trips, managed_migrations)"},
      {with_entries(R"({"forbid_findings": ["tiny_storm", "tiny_storm"]})"),
       "entries[0].forbid_findings[1]: 'tiny_storm' is listed twice"},
      {with_entries(R"({"forbid_findings": "tiny_storm"})"),
       "entries[0].forbid_findings: must be an array of strings, got \"tiny_storm\""},
      {with_entries(R"({"cpu_blocked": 5})"),
       "entries[0].cpu_blocked: must be an object {baseline_ns, tolerance_percent}, got 5"},
      {with_entries(R"({"cpu_blocked": {"baseline_ns": 5}})"),
       "entries[0].cpu_blocked: missing field 'tolerance_percent' (timings are noisy: say how much above the "
       "baseline passes)"},
      {with_entries(R"({"cpu_blocked": {"tolerance_percent": 5}})"),
       "entries[0].cpu_blocked: missing field 'baseline_ns'"},
      {with_entries(R"({"cpu_blocked": {"baseline_ns": 5, "tolerance_percent": -1}})"),
       "entries[0].cpu_blocked.tolerance_percent: must be a number from 0 to 100000, got -1"},
      {with_entries(R"({"cpu_blocked": {"baseline_ns": 5, "tolerance_percent": 1, "max_ns": 3}})"),
       "entries[0].cpu_blocked: unknown field 'max_ns' (fields: baseline_ns, tolerance_percent)"},
      {with_entries(R"({"nvtx_range": "", "max_bytes": 1})"),
       "entries[0].nvtx_range: must name a range as the report does (\"train / forward\"), got \"\""},
      {with_entries(R"({"nvtx_range": 3, "max_bytes": 1})"), "entries[0].nvtx_range: must be a string, got 3"},
      {with_entries(R"({"class": "H2D pageable", "site": {}, "max_bytes": 1})"),
       "entries[0]: an entry limits the run, one class, one site or one NVTX range: give at most one of 'class', "
       "'site' and 'nvtx_range'"},
      {with_entries(R"({"class": "H2D pageable", "nvtx_range": "epoch", "max_bytes": 1})"),
       "entries[0]: an entry limits the run, one class, one site or one NVTX range: give at most one of 'class', "
       "'site' and 'nvtx_range'"},
      // Sites are read by the policy file's own reader (policy/site_json.h).
      {with_entries(R"({"site": {"kind": "call", "build_id": "xyz", "offset": 1}, "max_bytes": 1})"),
       "entries[0].site.build_id: not a build id: 'xyz' (an even number of hex digits, 2-128)"},
      {with_entries(R"({"site": {"kind": "call", "python": {"file": "t.py"}}, "max_bytes": 1})"),
       "entries[0].site.python: needs a function, a line, or both"},
      {with_entries(R"({"site": {"kind": "allocation", "python": {"file": "t.py", "line": 3}}, "max_bytes": 1})"),
       "entries[0].site.kind: budget sites are call sites (copies), not 'allocation'"},
      {with_entries(R"({"site": {"kind": "call", "python": {"file": "t.py", "line": 3}}, "max_bytes": 1},
                       {"site": {"kind": "call", "python": {"file": "t.py", "line": 3}}, "max_copies": 1})"),
       "entries[1]: a second entry for site t.py:3 (entries[0])"},
      // An error quoting the file stays one line.
      {with_entries(R"({"max_bytes": 1, "a\nb": 2})"),
       "entries[0]: unknown field 'a\\nb' (fields: name, class, site, nvtx_range, max_bytes, max_copies, "
       "max_pageable_bytes, cpu_blocked, forbid_findings, comment)"},
  };
  for (const auto& [text, expected] : cases) EXPECT_EQ(parse_error(text), expected) << text;
}

TEST(BudgetParse, ReadFileNamesThePath) {
  Budget b;
  std::string error;
  EXPECT_FALSE(check::read_budget_file("/nonexistent/b.json", b, error));
  EXPECT_EQ(error, "/nonexistent/b.json: cannot open: No such file or directory");
}

// A report of `train`: H2D pageable 3 copies / 3 MiB at a Python site, D2H
// pinned 2 / 2 MiB at a native site, an async_pageable finding at the Python site.
struct RunFixture {
  analyses::Report report;
  check::CheckedRun run;
  RunFixture() {
    report.program = "/opt/bin/train";
    report.argv = {"train", "-n", "3"};
    analyses::ProcessSummary p;
    p.exe = "/opt/bin/train";
    report.processes.push_back(p);
    report.totals = {5, 5 * MiB, 9000, 0};
    analyses::ClassTotals h2d;
    h2d.cls = {Direction::HtoD, MemKind::Pageable};
    h2d.calls = 3, h2d.bytes = 3 * MiB, h2d.cpu_blocked_ns = 6000;
    analyses::ClassTotals d2h;
    d2h.cls = {Direction::DtoH, MemKind::Pinned};
    d2h.calls = 2, d2h.bytes = 2 * MiB, d2h.cpu_blocked_ns = 3000;
    report.classes = {h2d, d2h};
    report.pageable_share = {3 * MiB, 5 * MiB, 0.6};
    analyses::CallSiteTotals py;
    py.id = 1, py.calls = 3, py.bytes = 3 * MiB, py.cpu_blocked_ns = 6000;
    analyses::CallSiteTotals native;
    native.id = 2, native.calls = 2, native.bytes = 2 * MiB, native.cpu_blocked_ns = 3000;
    report.callsites = {py, native};
    analyses::Finding f;
    f.kind = FindingKind::AsyncPageable;
    f.calls = 3;
    f.callsites = {1};
    f.sites.push_back({1, 3, 3 * MiB, 6000, 2000, {}, {}, {}});
    report.findings.push_back(f);
    policy::Site py_name;
    py_name.python_file = "/home/me/train.py", py_name.python_function = "load_batch", py_name.python_line = 42;
    policy::Site native_name;
    native_name.build_id = kBuildId, native_name.offset = 0x1431, native_name.symbol = "fetch()";
    run.report = &report;
    run.site_names = {py_name, native_name};
  }
};

Budget parsed(const std::string& text) {
  Budget b;
  std::string error;
  EXPECT_TRUE(check::parse_budget(text, b, error)) << error;
  return b;
}

std::vector<std::string> violation_lines(const Budget& b, const check::CheckResult& r) {
  std::vector<std::string> out;
  for (const auto& v : r.verdicts)
    if (!v.kept) out.push_back(render::verdict_line(b, v));
  return out;
}

TEST(CheckVerdicts, KeptBudgetHasNoViolation) {
  RunFixture f;
  const Budget b = parsed(with_entries(R"(
      {"max_bytes": 5242880, "max_copies": 5, "max_pageable_bytes": 3145728,
       "cpu_blocked": {"baseline_ns": 9000, "tolerance_percent": 0}, "forbid_findings": ["tiny_storm"]},
      {"class": "H2D pageable", "max_bytes": 3145728, "max_copies": 3},
      {"class": "D2D device", "max_copies": 0},
      {"site": {"kind": "call", "python": {"file": "train.py", "function": "load_batch", "line": 40}},
       "max_copies": 3, "forbid_findings": ["tiny_storm"]})"));
  const check::CheckResult r = check::check_budget(b, f.run);
  EXPECT_EQ(r.verdicts.size(), 10u);
  EXPECT_EQ(r.violations(), 0u);
  EXPECT_TRUE(r.unmatched_site_entries.empty());
  EXPECT_EQ(render::render_check_text(b, r, "b.json"), "cuxfer check: b.json keeps the budget: 10 limits in 4 entries\n");
}

TEST(CheckVerdicts, EachKindOfViolationWithItsExactLine) {
  RunFixture f;
  const Budget b = parsed(with_entries(R"J(
      {"max_bytes": 4194304, "max_copies": 4, "max_pageable_bytes": 2097152,
       "cpu_blocked": {"baseline_ns": 4000, "tolerance_percent": 50}, "forbid_findings": ["async_pageable", "tiny_storm"]},
      {"class": "H2D pageable", "max_bytes": 1048576, "max_copies": 2},
      {"name": "readback", "class": "D2H pinned", "cpu_blocked": {"baseline_ns": 3000, "tolerance_percent": 0}},
      {"site": {"kind": "call", "python": {"file": "train.py", "function": "load_batch", "line": 42}},
       "max_copies": 2, "forbid_findings": ["async_pageable"]},
      {"site": {"kind": "call", "build_id": "0123456789abcdef0123456789abcdef01234567", "offset": "0x1431",
                "symbol": "fetch()"}, "max_bytes": 1048576, "forbid_findings": ["async_pageable"]})J"));
  const check::CheckResult r = check::check_budget(b, f.run);
  EXPECT_EQ(violation_lines(b, r),
            (std::vector<std::string>{
                "entries[0] run: bytes: measured 5242880 (5.00 MiB), limit 4194304 (4.00 MiB)",
                "entries[0] run: copies: measured 5, limit 4",
                "entries[0] run: pageable bytes: measured 3145728 (3.00 MiB), limit 2097152 (2.00 MiB)",
                "entries[0] run: CPU-blocked time: measured 9.00 us (9000 ns), limit 6.00 us (6000 ns) (baseline "
                "4.00 us + 50 %)",
                "entries[0] run: finding async_pageable: raised (3 copies), must not appear",
                "entries[1] H2D pageable: bytes: measured 3145728 (3.00 MiB), limit 1048576 (1.00 MiB)",
                "entries[1] H2D pageable: copies: measured 3, limit 2",
                "entries[3] site train.py:42 in load_batch: copies: measured 3, limit 2",
                "entries[3] site train.py:42 in load_batch: finding async_pageable: raised (3 copies), must not "
                "appear",
                "entries[4] site fetch(): bytes: measured 2097152 (2.00 MiB), limit 1048576 (1.00 MiB)",
            }));
  // Kept (3): tiny_storm absent from the run, D2H pinned exactly at its time
  // limit, async_pageable absent at the native site.
  EXPECT_EQ(r.verdicts.size(), 13u);
  EXPECT_EQ(r.violations(), 10u);
  const std::string text = render::render_check_text(b, r, "b.json");
  EXPECT_NE(text.find("over budget: entries[1] H2D pageable: copies: measured 3, limit 2\n"), std::string::npos);
  EXPECT_TRUE(text.ends_with("cuxfer check: 10 limit(s) of 13 exceeded (budget b.json)\n")) << text;
}

TEST(CheckVerdicts, PythonSitesMatchAsPoliciesDo) {
  RunFixture f;
  // The site is at line 42 of /home/me/train.py: the entry of the nearest
  // line of its function takes it; an entry of another function or file, or a
  // function-less entry of another line, does not.
  const Budget b = parsed(with_entries(R"(
      {"site": {"kind": "call", "python": {"file": "train.py", "function": "load_batch", "line": 30}}, "max_copies": 0},
      {"site": {"kind": "call", "python": {"file": "me/train.py", "function": "load_batch", "line": 45}}, "max_copies": 0},
      {"site": {"kind": "call", "python": {"file": "rain.py", "function": "load_batch", "line": 42}}, "max_copies": 0},
      {"site": {"kind": "call", "python": {"file": "train.py", "line": 41}}, "max_copies": 0},
      {"site": {"kind": "call", "python": {"file": "train.py", "function": "save", "line": 42}}, "max_copies": 0})"));
  const check::CheckResult r = check::check_budget(b, f.run);
  EXPECT_EQ(violation_lines(b, r),
            (std::vector<std::string>{"entries[1] site me/train.py:45 in load_batch: copies: measured 3, limit 0"}));
  EXPECT_EQ(r.unmatched_site_entries, (std::vector<uint32_t>{0, 2, 3, 4}));
  EXPECT_NE(render::render_check_text(b, r, "b.json")
                .find("note: entries[2] site rain.py:42 in load_batch: matched no call site of the run (checked against 0)\n"),
            std::string::npos);
}

TEST(CheckVerdicts, NativeSitesMatchByBuildIdAndOffset) {
  RunFixture f;
  const Budget b = parsed(with_entries(R"(
      {"site": {"kind": "call", "build_id": "0123456789abcdef0123456789abcdef01234567", "offset": "0x1432"}, "max_copies": 0},
      {"site": {"kind": "call", "build_id": "ff23456789abcdef0123456789abcdef01234567", "offset": "0x1431"}, "max_copies": 0})"));
  const check::CheckResult r = check::check_budget(b, f.run);
  EXPECT_EQ(r.violations(), 0u);
  EXPECT_EQ(r.unmatched_site_entries, (std::vector<uint32_t>{0, 1}));
}

TEST(CheckVerdicts, NvtxRangeEntriesUseTheReportsRangeTotals) {
  RunFixture f;
  analyses::RangeTotals load;
  load.path = "load", load.name = "load", load.depth = 1;
  load.calls = 3, load.bytes = 3 * MiB, load.pageable_bytes = 3 * MiB, load.cpu_blocked_ns = 6000;
  load.findings = {{"async_pageable", 3}};
  analyses::RangeTotals decode = load;
  decode.path = "load / decode", decode.name = "decode", decode.depth = 2;
  decode.calls = 1, decode.bytes = MiB, decode.pageable_bytes = MiB, decode.findings = {};
  f.report.ranges = {load, decode};
  const Budget b = parsed(with_entries(R"(
      {"nvtx_range": "load", "max_bytes": 3145728, "max_pageable_bytes": 1048576, "forbid_findings": ["async_pageable"]},
      {"nvtx_range": "load / decode", "max_copies": 0, "forbid_findings": ["async_pageable"]},
      {"nvtx_range": "decode", "max_copies": 0})"));
  const check::CheckResult r = check::check_budget(b, f.run);
  EXPECT_EQ(violation_lines(b, r),
            (std::vector<std::string>{
                "entries[0] NVTX range load: pageable bytes: measured 3145728 (3.00 MiB), limit 1048576 (1.00 MiB)",
                "entries[0] NVTX range load: finding async_pageable: raised (3 copies), must not appear",
                "entries[1] NVTX range load / decode: copies: measured 1, limit 0",
            }));
  // A range is named by its whole path: "decode" alone is no range of the run.
  EXPECT_EQ(r.unmatched_site_entries, (std::vector<uint32_t>{2}));
  EXPECT_NE(render::render_check_text(b, r, "b.json")
                .find("note: entries[2] NVTX range decode: no copy of the run ran inside this range (checked against 0)\n"),
            std::string::npos);
  // Written back and read again: the same entries.
  EXPECT_EQ(check::write_budget(parsed(check::write_budget(b))), check::write_budget(b));
}

TEST(CheckVerdicts, ProgramMismatchIsSaid) {
  RunFixture f;
  Budget b = parsed(with_entries(R"({"max_copies": 5})"));
  EXPECT_EQ(check::program_mismatch(b, f.report), "");
  b.program = "infer";
  EXPECT_EQ(check::program_mismatch(b, f.report), "the budget is for program 'infer', the traces are of 'train'");
  b.program.clear();
  EXPECT_EQ(check::program_mismatch(b, f.report), "");  // no program: any
}

TEST(CheckVerdicts, WrittenBudgetIsKeptByItsRunAndTightOnIt) {
  RunFixture f;
  const Budget exact = check::budget_from_run(f.run, {0, 100}, "test");
  EXPECT_EQ(exact.program, "train");
  EXPECT_EQ(exact.command, f.report.argv);
  ASSERT_EQ(exact.entries.size(), 5u);  // run, 2 classes, 2 sites
  EXPECT_EQ(*exact.entries[0].max_bytes, 5 * MiB);
  EXPECT_EQ(*exact.entries[0].max_pageable_bytes, 3 * MiB);
  EXPECT_EQ(exact.entries[0].cpu_blocked->limit_ns(), 18000u);
  // Every finding the run does not raise is forbidden; async_pageable, raised, is not, nor are
  // the two raised by comparing measured times (run-to-run noise raises them or not).
  EXPECT_EQ(exact.entries[0].forbid_findings.size(), std::size(analyses::kAllFindingKinds) - 3);
  for (FindingKind k : {FindingKind::AsyncPageable, FindingKind::RewriteCandidates, FindingKind::SyncCopyIdle})
    EXPECT_EQ(std::count(exact.entries[0].forbid_findings.begin(), exact.entries[0].forbid_findings.end(), k), 0)
        << analyses::finding_kind_name(k);
  EXPECT_TRUE(check::raised_by_measured_time(FindingKind::RewriteCandidates));
  EXPECT_TRUE(check::raised_by_measured_time(FindingKind::SyncCopyIdle));
  EXPECT_FALSE(check::raised_by_measured_time(FindingKind::TinyStorm));
  EXPECT_EQ(exact.entries[1].class_name, "H2D pageable");
  EXPECT_EQ(exact.entries[2].class_name, "D2H pinned");
  EXPECT_EQ(exact.entries[3].site.python_file, "/home/me/train.py");
  EXPECT_EQ(*exact.entries[4].max_copies, 2u);
  // It reads back, and the run keeps it.
  Budget again = parsed(check::write_budget(exact));
  EXPECT_EQ(check::check_budget(again, f.run).violations(), 0u);
  // One more copy at the native site breaks it in three places: run, class, site.
  f.report.totals.calls += 1;
  f.report.classes[1].calls += 1;
  f.report.callsites[1].calls += 1;
  EXPECT_EQ(violation_lines(again, check::check_budget(again, f.run)),
            (std::vector<std::string>{"entries[0] run: copies: measured 6, limit 5",
                                      "entries[2] D2H pinned: copies: measured 3, limit 2",
                                      "entries[4] site fetch(): copies: measured 3, limit 2"}));
  // A 50 % margin rounds up: 3 copies -> 5, 3 MiB -> 4.5 MiB.
  const Budget loose = check::budget_from_run(f.run, {50, 100}, "test");
  EXPECT_EQ(*loose.entries[1].max_copies, 5u);
  EXPECT_EQ(*loose.entries[1].max_bytes, 3 * MiB + 3 * MiB / 2);
}

TEST(CheckRender, JUnitHasOneTestCasePerEntryAndAFailurePerBrokenEntry) {
  RunFixture f;
  const Budget b = parsed(with_entries(R"(
      {"max_copies": 4}, {"class": "H2D pageable", "max_copies": 3},
      {"name": "<readback> & co", "class": "D2H pinned", "max_copies": 1, "max_bytes": 1})"));
  const std::string xml = render::render_junit(b, check::check_budget(b, f.run), "ci/b.json");
  EXPECT_EQ(xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"cuxfer check\" tests=\"3\" failures=\"2\" errors=\"0\">\n"
            "  <testsuite name=\"ci/b.json\" tests=\"3\" failures=\"2\" errors=\"0\" skipped=\"0\">\n"
            "    <testcase classname=\"ci/b.json\" name=\"entries[0] run\">\n"
            "      <failure type=\"budget\" message=\"1 limit(s) exceeded\">entries[0] run: copies: measured 5, "
            "limit 4\n</failure>\n"
            "    </testcase>\n"
            "    <testcase classname=\"ci/b.json\" name=\"entries[1] H2D pageable\"/>\n"
            "    <testcase classname=\"ci/b.json\" name=\"entries[2] &lt;readback&gt; &amp; co\">\n"
            "      <failure type=\"budget\" message=\"2 limit(s) exceeded\">entries[2] &lt;readback&gt; &amp; co: "
            "bytes: measured 2097152 (2.00 MiB), limit 1 (1 B)\nentries[2] &lt;readback&gt; &amp; co: copies: "
            "measured 2, limit 1\n</failure>\n"
            "    </testcase>\n"
            "  </testsuite>\n"
            "</testsuites>\n");
}

}  // namespace
}  // namespace cuxfer
