// Multi-rank jobs (analyses/ranks.h): the rank note, per-rank totals, the
// spread across ranks, findings per rank, and the rule that refuses two runs.
#include <gtest/gtest.h>

#include "analyzer/analyses/ranks.h"
#include "analyzer/analyses/report.h"
#include "analyzer/render/html_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer::testing {
namespace {

using analyses::RankTotals;
using trace::Direction;
using trace::MemKind;
constexpr uint64_t kMiB = 1u << 20;

SyntheticTrace rank_trace(uint32_t pid, int rank, uint32_t ppid = 1, std::string launch_id = "",
                          std::string exe = "/opt/app/train") {
  SyntheticTrace t(pid, ppid, exe);
  if (rank >= 0)
    t.notes.push_back("rank: " + std::to_string(rank) + " launcher=openmpi variable=OMPI_COMM_WORLD_RANK" +
                      (launch_id.empty() ? "" : " launch_id=" + launch_id));
  return t;
}

TEST(RankNote, Parses) {
  auto id = analyses::parse_rank_note(
      "rank: 3 launcher=slurm variable=SLURM_PROCID local_rank=1 world_size=4 launch_id=991.2 future=x");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->rank, 3u);
  EXPECT_EQ(id->launcher, "slurm");
  EXPECT_EQ(id->variable, "SLURM_PROCID");
  EXPECT_EQ(id->local_rank, 1u);
  EXPECT_EQ(id->world_size, 4u);
  EXPECT_EQ(id->launch_id, "991.2");
  auto bare = analyses::parse_rank_note("rank: 0");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->rank, 0u);
  EXPECT_FALSE(bare->world_size);
  for (const char* bad : {"rank: abc launcher=env", "rank: ", "rank:3", "ranks: 1", "cupti: rank: 1", ""})
    EXPECT_FALSE(analyses::parse_rank_note(bad)) << bad;
}

class RanksTest : public JobTest {};

// Three ranks, a fork of rank 1 (its rank by inheritance) and a launcher
// without a rank; each rank's copies are known exactly.
TEST_F(RanksTest, PerRankTotalsAndSpread) {
  auto r0 = rank_trace(100, 0);
  r0.copy(Direction::HtoD, MemKind::Pageable, kMiB, 1000, false, r0.site(0x1000));
  r0.copy(Direction::HtoD, MemKind::Pageable, kMiB, 1000, false, 1);
  r0.copy(Direction::DtoH, MemKind::Pinned, kMiB / 2, 200);
  auto r1 = rank_trace(101, 1);
  const uint32_t s1 = r1.site(0x2000);
  for (int i = 0; i < 4; ++i) r1.copy(Direction::HtoD, MemKind::Pageable, kMiB, 3000, false, s1);
  r1.copy(Direction::HtoD, MemKind::Pageable, kMiB, 50).flags |= trace::kFlagFailed;
  auto fork = rank_trace(103, 1, 101);
  fork.copy(Direction::DtoH, MemKind::Pageable, kMiB, 100, false, fork.site(0x3000));
  auto r2 = rank_trace(102, 2);
  r2.copy(Direction::HtoD, MemKind::Pinned, 8 * kMiB, 500, false, r2.site(0x4000));
  auto launcher = rank_trace(99, -1);
  launcher.copy(Direction::HtoD, MemKind::Pageable, 64 * kMiB, 9'000'000, false, launcher.site(0x5000));

  auto job = load({launcher, r1, r0, fork, r2});
  EXPECT_FALSE(analyses::mixed_runs(job));
  auto report = analyses::analyze(job);
  const analyses::Ranks& k = report.ranks;
  ASSERT_EQ(k.ranks.size(), 3u);
  EXPECT_EQ(k.unranked_processes, 1u);
  const RankTotals &a = k.ranks[0], &b = k.ranks[1], &c = k.ranks[2];
  EXPECT_EQ(a.rank, 0u);
  EXPECT_EQ(a.host, "node0");
  EXPECT_EQ(a.pids, std::vector<uint32_t>{100});
  EXPECT_EQ(a.copies, 3u);
  EXPECT_EQ(a.bytes, 2 * kMiB + kMiB / 2);
  EXPECT_EQ(a.pageable_bytes, 2 * kMiB);
  EXPECT_EQ(a.cpu_blocked_ns, 2200u);
  ASSERT_EQ(a.classes.size(), 2u);
  EXPECT_EQ(a.classes[0].cls, "H2D pageable");
  EXPECT_EQ(a.classes[0].calls, 2u);
  EXPECT_EQ(a.classes[0].bytes, 2 * kMiB);
  EXPECT_EQ(a.classes[1].cls, "D2H pinned");
  EXPECT_EQ(a.classes[1].bytes, kMiB / 2);

  EXPECT_EQ(b.rank, 1u);
  EXPECT_EQ(b.pids, (std::vector<uint32_t>{101, 103}));
  EXPECT_EQ(b.copies, 5u);
  EXPECT_EQ(b.failed_calls, 1u);
  EXPECT_EQ(b.bytes, 5 * kMiB);
  EXPECT_EQ(b.pageable_bytes, 5 * kMiB);
  EXPECT_EQ(b.cpu_blocked_ns, 12'100u);
  EXPECT_FALSE(b.gpu_ns);

  EXPECT_EQ(c.rank, 2u);
  EXPECT_EQ(c.bytes, 8 * kMiB);
  EXPECT_EQ(c.pageable_bytes, 0u);
  EXPECT_EQ(c.cpu_blocked_ns, 500u);

  ASSERT_TRUE(k.spread);
  const analyses::RankSpread& s = *k.spread;
  EXPECT_EQ(s.most_bytes_rank, 2u);
  EXPECT_EQ(s.most_bytes, 8 * kMiB);
  EXPECT_DOUBLE_EQ(*s.bytes_imbalance, 8.0 / 5.0);  // median 5 MiB
  EXPECT_EQ(s.most_pageable_rank, 1u);
  EXPECT_EQ(s.most_pageable_bytes, 5 * kMiB);
  EXPECT_DOUBLE_EQ(*s.pageable_imbalance, 5.0 / 2.0);  // median 2 MiB
  EXPECT_EQ(s.slowest_rank, 1u);
  EXPECT_EQ(s.slowest_cpu_blocked_ns, 12'100u);
  EXPECT_DOUBLE_EQ(*s.cpu_blocked_imbalance, 12'100.0 / 2200.0);

  // large_pageable (each copy >= 1 MiB from pageable memory): rank 1's five
  // copies (its fork's D2H too) and rank 0's two; none of rank 2's.
  const analyses::Finding* large = find_finding(report, "large_pageable");
  ASSERT_NE(large, nullptr);
  auto of = [](const RankTotals& r, const std::string& kind) -> const analyses::RankFinding* {
    for (const auto& f : r.findings)
      if (f.kind == kind) return &f;
    return nullptr;
  };
  ASSERT_NE(of(b, "large_pageable"), nullptr);
  EXPECT_EQ(of(b, "large_pageable")->calls, 5u);
  EXPECT_EQ(of(b, "large_pageable")->bytes, 5 * kMiB);
  EXPECT_EQ(of(b, "large_pageable")->time_ns, 12'100u);
  ASSERT_NE(of(a, "large_pageable"), nullptr);
  EXPECT_EQ(of(a, "large_pageable")->calls, 2u);
  // Each rank's share of a finding adds up to the finding.
  uint64_t calls = 0;
  for (const auto& r : k.ranks)
    if (auto* f = of(r, "large_pageable")) calls += f->calls;
  EXPECT_EQ(calls, large->calls - 1);  // the launcher's 64 MiB copy is in no rank
  EXPECT_TRUE(c.findings.empty());     // pinned copies only
  for (const auto& r : k.ranks)
    for (size_t i = 1; i < r.findings.size(); ++i)
      EXPECT_GE(r.findings[i - 1].time_ns, r.findings[i].time_ns);
}

TEST(RankSpread, MedianOfEvenCountTiesAndZero) {
  std::vector<RankTotals> ranks(4);
  const uint64_t bytes[] = {10, 40, 20, 40};
  for (uint32_t i = 0; i < 4; ++i) {
    ranks[i].rank = i;
    ranks[i].bytes = bytes[i];
  }
  ranks[2].pageable_bytes = 7;
  auto s = analyses::rank_spread(ranks);
  EXPECT_EQ(s.most_bytes_rank, 1u);                   // a tie goes to the lower rank
  EXPECT_DOUBLE_EQ(*s.bytes_imbalance, 40.0 / 30.0);  // median (20 + 40) / 2
  EXPECT_EQ(s.most_pageable_rank, 2u);
  EXPECT_FALSE(s.pageable_imbalance);  // median 0: no ratio
  EXPECT_EQ(s.slowest_rank, 0u);
  EXPECT_FALSE(s.cpu_blocked_imbalance);
}

// The HTML report's Ranks section: one strip bar per rank for CPU-blocked
// time and for pageable bytes, the slow rank's bars in the outliers' colour
// and titled with its rank, and a table sortable by any column, its numbers
// carried raw for the sort.
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST_F(RanksTest, HtmlShowsImbalanceAtAGlanceAndSortsRanks) {
  std::vector<SyntheticTrace> traces;
  for (uint32_t rank = 0; rank < 6; ++rank) {
    auto& t = traces.emplace_back(rank_trace(200 + rank, static_cast<int>(rank)));
    const uint32_t site = t.site(0x1000);
    const uint64_t ns = rank == 4 ? 9000 : 1000;  // rank 4 is slow
    for (int i = 0; i < 3; ++i) t.copy(Direction::HtoD, MemKind::Pageable, kMiB, ns, false, site);
  }
  auto job = load(traces);
  auto report = analyses::analyze(job);
  ASSERT_EQ(report.ranks.ranks.size(), 6u);
  const std::string html = render::render_html(report, job, nullptr);
  const size_t ranks_at = html.find("<h2>Ranks (6)</h2>");
  ASSERT_NE(ranks_at, std::string::npos);
  const std::string section = html.substr(ranks_at, html.find("</script>", ranks_at) - ranks_at);
  EXPECT_EQ(count(section, "<svg class='strip'"), 2u);
  EXPECT_EQ(count(section, "<rect "), 12u);  // 6 ranks, 2 strips
  EXPECT_NE(section.find("aria-label='CPU-blocked time in copies per rank'"), std::string::npos);
  EXPECT_EQ(count(section, "fill='#c0392b'><title>rank 4: "), 1u) << section;  // CPU-blocked: only rank 4 stands out
  EXPECT_EQ(count(section, "fill='#c0392b'"), 1u);  // the pageable bytes are even
  EXPECT_NE(section.find("<table class='sortable'>"), std::string::npos);
  EXPECT_NE(section.find("<td class='n' data-v='27000'>"), std::string::npos) << section;  // rank 4's 3 x 9 us
  EXPECT_EQ(count(html, "<script>"), 1u);
  EXPECT_NE(html.find("table.sortable th"), std::string::npos);
}

TEST_F(RanksTest, OneRankIsNoRankSection) {
  auto r0 = rank_trace(100, 0);
  r0.copy(Direction::HtoD, MemKind::Pageable, kMiB, 1000);
  auto plain = rank_trace(101, -1, 100);
  plain.copy(Direction::HtoD, MemKind::Pageable, kMiB, 1000);
  auto job = load({r0, plain});
  auto report = analyses::analyze(job);
  EXPECT_TRUE(report.ranks.ranks.empty());
  EXPECT_FALSE(report.ranks.spread);
}

TEST_F(RanksTest, MixedRunsAreNamed) {
  // The same rank twice, not parent and child: a second run in the directory.
  {
    auto job = load({rank_trace(100, 0), rank_trace(101, 1), rank_trace(200, 0)});
    auto m = analyses::mixed_runs(job);
    ASSERT_TRUE(m);
    EXPECT_NE(m->find(job.processes[0].trace.path), std::string::npos) << *m;
    EXPECT_NE(m->find(job.processes[2].trace.path), std::string::npos) << *m;
    EXPECT_NE(m->find("both are rank 0"), std::string::npos) << *m;
    EXPECT_EQ(m->find('\n'), std::string::npos);
  }
  // A rank's fork (and its fork) carry the rank too: one run.
  EXPECT_FALSE(
      analyses::mixed_runs(load({rank_trace(100, 0), rank_trace(101, 0, 100), rank_trace(102, 0, 101)})));
  // Different launch ids.
  {
    auto m = analyses::mixed_runs(load({rank_trace(100, 0, 1, "991.0"), rank_trace(101, 1, 1, "992.0")}));
    ASSERT_TRUE(m);
    EXPECT_NE(m->find("launch ids 991.0 and 992.0"), std::string::npos) << *m;
  }
  EXPECT_FALSE(analyses::mixed_runs(load({rank_trace(100, 0, 1, "991.0"), rank_trace(101, 1, 1, "991.0")})));
  // Different programs far apart; the same program far apart is one run.
  {
    auto a = rank_trace(100, 0), b = rank_trace(101, 1, 1, "", "/opt/app/eval");
    b.process.start_realtime_ns += 120'000'000'000ull;
    auto m = analyses::mixed_runs(load({a, b}));
    ASSERT_TRUE(m);
    EXPECT_NE(m->find("programs /opt/app/train and /opt/app/eval started 120 s apart"), std::string::npos)
        << *m;
    auto near = rank_trace(101, 1, 1, "", "/opt/app/eval");  // MPMD: two programs started together
    EXPECT_FALSE(analyses::mixed_runs(load({a, near})));
    auto same = rank_trace(101, 1);
    same.process.start_realtime_ns += 120'000'000'000ull;
    EXPECT_FALSE(analyses::mixed_runs(load({a, same})));
  }
  // Traces without ranks are never refused.
  EXPECT_FALSE(analyses::mixed_runs(load({rank_trace(100, -1), rank_trace(200, -1, 1, "", "/bin/other")})));
}

}  // namespace
}  // namespace cuxfer::testing
