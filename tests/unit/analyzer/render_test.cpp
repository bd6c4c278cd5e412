// The renderers: the JSON schema other tools read, the text report's
// banners, labels and width, and the HTML report's links to the docs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>

#include "analyzer/render/html_renderer.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/markup.h"
#include "analyzer/render/text_renderer.h"
#include "analyzer/text/units.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using nlohmann::json;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

SyntheticTrace busy_trace() {
  SyntheticTrace t;
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train_with_a_rather_long_name", ""});
  uint32_t s = t.site(0x401000);
  for (int i = 0; i < 1000; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 8, 9'000, false, s);
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, true, t.site(0x402000));
  t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'300'000, false);
  auto& f = t.copy(Direction::HtoD, MemKind::Pinned, 5, 10);
  f.flags |= trace::kFlagFailed;
  return t;
}

class Render : public JobTest {};

// Every docs/ page the HTML report names is a link to the installed docs
// where there are some, and only named where there are none (the wheel, a
// build tree): no link that leads nowhere.
TEST_F(Render, HtmlLinksTheDocsItCitesWhereTheyAreInstalled) {
  const model::Job job = load(busy_trace());
  const analyses::Report r = analyses::analyze(job);
  const std::string docs = "file:///opt/cuxfer/share/doc/cuxfer/docs/";
  const std::string linked = render::render_html(r, job, nullptr, docs);
  EXPECT_NE(linked.find("model in <a href='" + docs + "report.md#accounting-words'>docs/report.md</a>"),
            std::string::npos);
  EXPECT_NE(linked.find("<a href='" + docs + "report.md'>docs/report.md</a> explains every number"),
            std::string::npos);
  EXPECT_FALSE(std::regex_search(linked, std::regex("[^>/]docs/[a-z-]+\\.md")))
      << "a docs/ page named, not linked";

  const std::string named = render::render_html(r, job, nullptr);
  EXPECT_EQ(named.find("<a "), std::string::npos);
  EXPECT_NE(named.find("model in docs/report.md"), std::string::npos);
  EXPECT_NE(named.find("docs/report.md explains every number"), std::string::npos);

  EXPECT_EQ(render::file_url("/opt/my docs/c#d'"), "file:///opt/my%20docs/c%23d%27");
}

TEST_F(Render, JsonFollowsTheSchema) {
  SyntheticTrace t = busy_trace();
  t.status.simulated = true;
  t.status.cupti_reason = "simulated CUDA";
  analyses::Report r = analyses::analyze(load(t));
  json j = json::parse(render::render_json(r, {}));
  EXPECT_EQ(j["schema"], "cuxfer.report/1");
  EXPECT_EQ(j["simulated"], true);
  EXPECT_EQ(j["timing"], "cpu");

  ASSERT_EQ(j["processes"].size(), 1u);
  const json& p = j["processes"][0];
  EXPECT_EQ(p["pid"], 4242);
  EXPECT_EQ(p["exe"], "/opt/app/train");
  EXPECT_TRUE(p["trace"].get<std::string>().ends_with("t0-0.trace"));
  EXPECT_EQ(p["complete"], true);
  EXPECT_EQ(p["cut_reason"], "");
  EXPECT_EQ(p["cupti"]["state"], "unavailable");
  EXPECT_EQ(p["cupti"]["reason"], "simulated CUDA");
  EXPECT_EQ(p["events"], 1003);
  EXPECT_EQ(p["events_dropped"], 0);

  EXPECT_EQ(j["totals"]["calls"], 1002);
  EXPECT_EQ(j["totals"]["bytes"], 128 * MiB + 8000);
  EXPECT_TRUE(j["totals"]["bytes"].is_number_unsigned());
  EXPECT_EQ(j["totals"]["cpu_blocked_ns"], 9'000'000 + 10'000'000 + 1'300'000);
  EXPECT_EQ(j["failed_calls"], 1);

  bool saw_pageable_h2d = false;
  for (const auto& c : j["classes"]) {
    for (const char* k : {"direction", "memory", "calls", "bytes", "cpu_blocked_ns", "gpu_ns", "gbps"})
      EXPECT_TRUE(c.contains(k)) << k;
    EXPECT_TRUE(c["gpu_ns"].is_null());
    if (c["direction"] == "H2D" && c["memory"] == "pageable") {
      saw_pageable_h2d = true;
      EXPECT_EQ(c["bytes"], 64 * MiB);
      EXPECT_NEAR(c["gbps"].get<double>(), 64.0 * MiB / 10'000'000, 1e-12);
    }
  }
  EXPECT_TRUE(saw_pageable_h2d);
  EXPECT_EQ(j["memsets"]["calls"], 0);
  for (const char* k : {"device", "managed", "host_pinned", "host_registered"}) {
    EXPECT_EQ(j["allocations"][k]["calls"], 0);
    EXPECT_EQ(j["allocations"][k]["bytes"], 0);
  }
  ASSERT_FALSE(j["apis"].empty());
  EXPECT_TRUE(j["apis"][0].contains("name"));
  EXPECT_EQ(j["pageable_share"]["pageable_bytes"], 64 * MiB + 8000);
  EXPECT_EQ(j["pageable_share"]["host_bytes"], 128 * MiB + 8000);
  EXPECT_TRUE(j["pageable_share"]["fraction"].is_number_float());

  ASSERT_EQ(j["callsites"].size(), 2u);
  for (const auto& s : j["callsites"]) {
    for (const char* k : {"id", "pid", "function", "file", "line", "module", "offset", "calls", "bytes",
                          "cpu_blocked_ns", "gpu_ns", "stack"})
      EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_EQ(s["module"], "/opt/app/train_with_a_rather_long_name");
  }
  std::set<std::string> kinds;
  for (const auto& f : j["findings"]) {
    kinds.insert(f["kind"]);
    for (const char* k :
         {"kind", "title", "calls", "bytes", "time_ns", "estimated_recoverable_ns", "callsites", "advice"})
      EXPECT_TRUE(f.contains(k)) << k;
    for (const auto& id : f["callsites"]) {
      bool listed = false;
      for (const auto& s : j["callsites"]) listed |= s["id"] == id;
      EXPECT_TRUE(listed) << id;
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"async_pageable", "large_pageable", "rewrite_candidates", "tiny_storm"}));
  for (const auto& f : j["findings"])
    if (f["kind"] == "tiny_storm") {
      EXPECT_TRUE(f["estimated_recoverable_ns"].is_null());
    }
}

TEST_F(Render, JsonTopKeepsSitesThatFindingsNeed) {
  analyses::Report r = analyses::analyze(load(busy_trace()));
  json j = json::parse(render::render_json(r, {size_t{0}}));
  EXPECT_EQ(j["callsites"].size(), 2u);  // both are named by findings
}

// Four ranks copying at one line: the text has one row naming the largest
// rank's site and pid "+3", and says so; JSON lists the location with its
// four sites, and --top 1 keeps every site of it.
TEST_F(Render, OneLineOfSeveralProcessesIsOneRow) {
  std::vector<SyntheticTrace> ranks;
  for (uint32_t pid : {101, 102, 103, 104}) {
    SyntheticTrace& t = ranks.emplace_back(pid);
    t.modules.push_back({0x400000 + pid * 0x1000000, 0x400000 + pid * 0x1000000, 0x500000 + pid * 0x1000000,
                         "/opt/app/train", ""});
    const uint32_t s = t.site(0x401000 + pid * 0x1000000);
    for (uint32_t i = 0; i < pid - 100; ++i)
      t.copy(Direction::HtoD, MemKind::Pageable, MiB, 10'000, false, s);
    t.copy(Direction::DtoH, MemKind::Pinned, 8, 1'000, false, t.site(0x402000 + pid * 0x1000000));
  }
  const analyses::Report r = analyses::analyze(load(ranks));
  ASSERT_EQ(r.locations.size(), 2u);
  const std::string text = render::render_text(r, {120, 10});
  EXPECT_NE(text.find("Top call sites by CPU-blocked time (2 of 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("#1 train+0x1000"), std::string::npos) << text;  // numbered by rank
  EXPECT_NE(text.find("104 +3\n"), std::string::npos) << text;  // rank 104 copied most
  EXPECT_NE(text.find("A row sums one line of code over the processes that ran it"), std::string::npos)
      << text;

  const json j = json::parse(render::render_json(r, {size_t{1}}));
  ASSERT_EQ(j["locations"].size(), 1u);
  const json& l = j["locations"][0];
  for (const char* k :
       {"id", "key", "callsites", "pids", "function", "file", "line", "module", "location", "calls", "bytes",
        "cpu_blocked_ns", "max_cpu_blocked_ns", "gpu_ns", "failed_calls", "class", "stacks_differ"})
    EXPECT_TRUE(l.contains(k)) << k;
  EXPECT_EQ(l["calls"], 1 + 2 + 3 + 4);
  EXPECT_EQ(l["pids"], json({104, 103, 102, 101}));
  EXPECT_EQ(j["callsites"].size(), 4u);  // every process's site of the location shown
  for (const auto& s : j["callsites"])
    EXPECT_NE(std::find(l["callsites"].begin(), l["callsites"].end(), s["id"]), l["callsites"].end());
}

// A note every process wrote alike is said once, before the processes; each
// keeps its own.
TEST_F(Render, NotesOfEveryProcessAreSaidOnce) {
  SyntheticTrace a(201), b(202);
  a.notes = {"Python frames in call stacks: CPython 3.12", "a note of pid 201"};
  b.notes = {"a note of pid 202", "Python frames in call stacks: CPython 3.12"};
  for (SyntheticTrace* t : {&a, &b}) t->copy(Direction::HtoD, MemKind::Pinned, 10, 1'000);
  const std::string text = render::render_text(analyses::analyze(load({a, b})), {200, 10});
  const std::string processes = text.substr(text.find("\nProcesses\n"));
  const size_t every =
      processes.find("  every process (2):\n      shim: Python frames in call stacks: CPython 3.12\n");
  ASSERT_NE(every, std::string::npos) << processes;
  EXPECT_EQ(processes.find("CPython 3.12", processes.find("CPython 3.12") + 1), std::string::npos)
      << processes;  // once
  EXPECT_NE(processes.find("shim: a note of pid 201"), std::string::npos) << processes;
  EXPECT_NE(processes.find("shim: a note of pid 202"), std::string::npos) << processes;
  EXPECT_LT(processes.find("shim: a note of pid 201"), processes.find("pid 202")) << processes;
}

TEST_F(Render, TextSaysSimulatedCpuTimingAndPartial) {
  SyntheticTrace t = busy_trace();
  t.status.simulated = true;
  t.status.cupti_reason = "simulated CUDA";
  t.write_end = false;
  std::string text = render::render_text(analyses::analyze(load(t)), {100, 10});
  EXPECT_NE(text.find("SIMULATED CUDA (tests/simcuda) — no GPU was used; timings are not meaningful"),
            std::string::npos);
  EXPECT_NE(text.find("GPU time: n/a (CUPTI unavailable: simulated CUDA) — CPU timing shown"),
            std::string::npos);
  EXPECT_NE(text.find("PARTIAL: "), std::string::npos);
  EXPECT_NE(text.find("did not shut down cleanly"), std::string::npos);
  EXPECT_NE(text.find("[async_pageable]"), std::string::npos);
  EXPECT_NE(text.find("[large_pageable]"), std::string::npos);
  EXPECT_NE(text.find("[tiny_storm]"), std::string::npos);
  EXPECT_NE(text.find("estimate"), std::string::npos);
  EXPECT_NE(text.find("1 failed copy"), std::string::npos);
}

TEST_F(Render, TextFitsTheWidth) {
  analyses::Report r = analyses::analyze(load(busy_trace()));
  for (size_t width : {60, 80, 100, 140}) {
    std::string text = render::render_text(r, {width, 10});
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      std::string line = text.substr(start, nl - start);
      EXPECT_LE(text::display_width(line), width) << "width " << width << ": " << line;
      start = nl + 1;
    }
  }
}

// NVIDIA's UnifiedMemoryStreams: managed memory, no copies, CUPTI active.
// The header must not say CUPTI was unavailable.
TEST_F(Render, TextOfARunWithoutCopiesClaimsNoCuptiFailure) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  t.add(trace::EventKind::ManagedAlloc, "cudaMallocManaged", Direction::Unknown, MemKind::Managed, MemKind::Managed,
        MiB, 1000, 0, 0);
  std::string text = render::render_text(analyses::analyze(load(t)), {100, 10});
  EXPECT_EQ(text.find("GPU time: n/a"), std::string::npos) << text;
  EXPECT_NE(text.find("CUPTI active"), std::string::npos) << text;
}

TEST_F(Render, TextOfACleanRun) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pinned, MiB, 30'000);
  std::string text = render::render_text(analyses::analyze(load(t)), {100, 10});
  EXPECT_NE(text.find("Findings\n  none"), std::string::npos);
  EXPECT_EQ(text.find("SIMULATED"), std::string::npos);
}

// The text report says a thing once and counts one way (issue: "noise in
// the text report"): each test below failed on the text before.

// The header's "GPU time: n/a (CUPTI unavailable: ...)" says it; the
// Processes line and the shim's note no longer repeat it, for one process
// or several.
TEST_F(Render, TextSaysCuptiUnavailableOnce) {
  SyntheticTrace a = busy_trace(), b(4343);
  for (SyntheticTrace* t : {&a, &b}) {
    t->status.simulated = true;
    t->status.cupti_reason = "simulated CUDA";
    t->notes = {"CUPTI unavailable: simulated CUDA; GPU times are not recorded", "rewrite: off"};
  }
  b.copy(Direction::HtoD, MemKind::Pinned, MiB, 30'000);
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  for (const std::vector<SyntheticTrace>& job : {std::vector<SyntheticTrace>{a}, std::vector<SyntheticTrace>{a, b}}) {
    const std::string text = render::render_text(analyses::analyze(load(job)), {200, 10});
    EXPECT_EQ(count(text, "CUPTI unavailable"), 1u) << text;
    EXPECT_NE(text.find("GPU time: n/a (CUPTI unavailable: simulated CUDA) — CPU timing shown"), std::string::npos);
    EXPECT_NE(text.find("shim: rewrite: off"), std::string::npos) << text;  // other notes stay
  }
  // A process whose state the header did not say keeps it on its line.
  SyntheticTrace c = busy_trace();
  c.status.cupti = trace::CuptiState::Active;
  const std::string text = render::render_text(analyses::analyze(load({a, c})), {200, 10});
  EXPECT_NE(text.find("CUPTI active"), std::string::npos) << text;
}

TEST_F(Render, TextSaysEstimateOnce) {
  const std::string text = render::render_text(analyses::analyze(load(busy_trace())), {200, 10});
  EXPECT_NE(text.find("estimated recoverable time: "), std::string::npos) << text;
  EXPECT_EQ(text.find("(estimate)"), std::string::npos) << text;
}

// "1 calls", "1 copies", "1 events": one is singular everywhere.
TEST_F(Render, TextCountsOneInTheSingular) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, false, t.site(0x401000));
  t.add(trace::EventKind::Memset, "cudaMemset", Direction::Unknown, MemKind::Device, MemKind::Device, MiB, 1000);
  t.add(trace::EventKind::DeviceAlloc, "cudaMalloc", Direction::Unknown, MemKind::Device, MemKind::Device, MiB,
        1000);
  const std::string text = render::render_text(analyses::analyze(load(t)), {200, 10});
  EXPECT_NE(text.find(", 1 copy, 64.0 MiB moved"), std::string::npos) << text;
  const std::regex plural_one(R"((^|[^0-9.,])1 (calls|copies|events|kernels|processes|call sites))");
  std::smatch m;
  EXPECT_FALSE(std::regex_search(text, m, plural_one)) << m.str() << "\n" << text;
}

// "0 of these copies reuse a buffer ...": a clause that counts nothing is
// left out.
TEST_F(Render, TextLeavesOutClausesOfZero) {
  const analyses::Report r = analyses::analyze(load(busy_trace()));  // one 64 MiB first use: staged
  ASSERT_TRUE(testing::find_finding(r, "rewrite_candidates"));
  const std::string text = render::render_text(r, {200, 10});
  EXPECT_EQ(text.find(" 0 of these"), std::string::npos) << text;
  EXPECT_NE(text.find("1 copy would be staged through pinned buffers"), std::string::npos) << text;
  EXPECT_EQ(text.find("(0 dropped)"), std::string::npos) << text;
}

// "1627" beside "1,627": every count in thousands.
TEST_F(Render, TextWritesCountsOneWay) {
  SyntheticTrace t;
  const uint32_t s = t.site(0x401000);
  for (int i = 0; i < 1'628; ++i) t.copy(Direction::HtoD, MemKind::Pageable, MiB, 400'000, false, s).address = 0x7000'0000;
  const std::string text = render::render_text(analyses::analyze(load(t)), {200, 10});
  EXPECT_NE(text.find("1,627 of these copies reuse a buffer"), std::string::npos) << text;
  EXPECT_EQ(text.find("1627"), std::string::npos) << text;
}

// The call-site table's numbers run #1, #2, #3 down the ranking (they were
// the sites' ids: #2, #3, #1), and the findings name sites by the same ones.
TEST_F(Render, TextNumbersCallSitesByRank) {
  SyntheticTrace t;
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  const uint32_t low = t.site(0x401000), high = t.site(0x402000), middle = t.site(0x403000);
  t.copy(Direction::HtoD, MemKind::Pageable, 32 * MiB, 2'000'000, false, low);
  t.copy(Direction::HtoD, MemKind::Pageable, 32 * MiB, 9'000'000, false, high);
  t.copy(Direction::HtoD, MemKind::Pageable, 32 * MiB, 5'000'000, false, middle);
  const std::string text = render::render_text(analyses::analyze(load(t)), {200, 10});
  const size_t table = text.find("Top call sites");
  ASSERT_NE(table, std::string::npos) << text;
  const size_t one = text.find("  #1 train+0x2000", table), two = text.find("  #2 train+0x3000", table),
               three = text.find("  #3 train+0x1000", table);
  ASSERT_NE(one, std::string::npos) << text;
  ASSERT_NE(two, std::string::npos) << text;
  ASSERT_NE(three, std::string::npos) << text;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
  const size_t findings = text.find("\nFindings\n");
  EXPECT_NE(text.find("at #1 train+0x2000", findings), std::string::npos) << text;
  EXPECT_NE(text.find("at #3 train+0x1000", findings), std::string::npos) << text;
}

TEST(Units, Formats) {
  EXPECT_EQ(text::format_bytes(0), "0 B");
  EXPECT_EQ(text::format_bytes(1023), "1023 B");
  EXPECT_EQ(text::format_bytes(4096), "4.00 KiB");
  EXPECT_EQ(text::format_bytes(64ull << 20), "64.0 MiB");
  EXPECT_EQ(text::format_bytes(300ull << 30), "300 GiB");
  EXPECT_EQ(text::format_duration(850), "850 ns");
  EXPECT_EQ(text::format_duration(3'200), "3.20 us");
  EXPECT_EQ(text::format_duration(12'345'678), "12.3 ms");
  EXPECT_EQ(text::format_duration(1'240'000'000), "1.24 s");
  EXPECT_EQ(text::format_count(1234567), "1,234,567");
  EXPECT_EQ(text::format_count(999), "999");
  EXPECT_EQ(text::format_gbps(std::nullopt), "n/a");
  EXPECT_EQ(text::fit("abcdef", 4), "abc…");
  EXPECT_EQ(text::fit("abc", 4), "abc");
  EXPECT_EQ(text::wrap("aa bb cc dd", 5), (std::vector<std::string>{"aa bb", "cc dd"}));
}

}  // namespace
}  // namespace cuxfer

// One escaping for the HTML report and the JUnit XML: every markup character,
// and control bytes (from a trace's names) that XML 1.0 cannot hold at all.
TEST(Markup, EscapesMarkupAndControlCharacters) {
  using cuxfer::render::markup_escaped;
  EXPECT_EQ(markup_escaped(R"(<a href="x">Tom & 'Jerry'</a>)"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(markup_escaped(std::string("a\tb\nc\r\x01\x1f" "d", 9)), "a\tb\nc\r??d");
  EXPECT_EQ(markup_escaped("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \xff");  // bytes >= 0x80 untouched
  EXPECT_EQ(markup_escaped(""), "");
}
