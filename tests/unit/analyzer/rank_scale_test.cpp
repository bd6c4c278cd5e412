// The multi-rank report at scale: a generated job (bench/rank_trace_set.h)
// of 1,000 ranks reads within its line bar, names the ranks the generator
// planted and groups the rest; the digest's pieces (distribution, outliers,
// patterns) on small hand-made rank lists.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>

#include "analyzer/analyses/ranks.h"
#include "analyzer/analyses/report.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "bench/rank_trace_set.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer::testing {
namespace {

using analyses::RankTotals;

size_t lines_of(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(RankDistribution, MinMedianP95Max) {
  std::vector<std::pair<uint64_t, uint32_t>> v;
  for (uint32_t i = 0; i < 100; ++i) v.push_back({100 - i, i});  // values 100..1, ids 0..99
  const auto d = analyses::distribution_of(v);
  EXPECT_EQ(d.min, 1u);
  EXPECT_EQ(d.min_id, 99u);
  EXPECT_EQ(d.max, 100u);
  EXPECT_EQ(d.max_id, 0u);
  EXPECT_EQ(d.median, 50u);  // (50 + 51) / 2, rounded down
  EXPECT_EQ(d.p95, 95u);     // the 95th of 100
  const auto one = analyses::distribution_of({{7, 3}});
  EXPECT_EQ(one.min, 7u);
  EXPECT_EQ(one.p95, 7u);
  EXPECT_EQ(one.max_id, 3u);
  // A tie for the max goes to the lower id.
  EXPECT_EQ(analyses::distribution_of({{5, 9}, {5, 2}, {1, 0}}).max_id, 2u);
}

RankTotals rank(uint32_t id, uint64_t cpu_ns, std::vector<uint32_t> sites = {1, 2}) {
  RankTotals r;
  r.rank = id;
  r.copies = 10;
  r.bytes = 1000;
  r.cpu_blocked_ns = cpu_ns;
  r.classes = {{"H2D pageable", 5, 600, cpu_ns * 3 / 4}, {"D2H pinned", 5, 400, cpu_ns / 4}};
  r.findings = {{"large_pageable", 5, 600, cpu_ns * 3 / 4}};
  r.sites = std::move(sites);
  return r;
}

// A slow rank is an outlier on CPU-blocked time, and its class and finding
// say why; a rank with a site of its own is a pattern of its own.
TEST(RankDigest, OutliersAndPatterns) {
  std::vector<RankTotals> ranks;
  for (uint32_t i = 0; i < 20; ++i)
    ranks.push_back(rank(i, i == 7 ? 4000 : 1000,
                         i == 12 ? std::vector<uint32_t>{1, 2, 9} : std::vector<uint32_t>{1, 2}));
  const auto d = analyses::digest_ranks(ranks);
  ASSERT_EQ(d.outliers.size(), 1u);
  EXPECT_EQ(d.outliers[0].rank, 7u);
  EXPECT_EQ(d.outliers[0].metric, "CPU-blocked");
  EXPECT_EQ(d.outliers[0].value, 4000u);
  EXPECT_EQ(d.outliers[0].median, 1000u);
  EXPECT_EQ(d.outliers[0].cls, "H2D pageable");
  EXPECT_EQ(d.outliers[0].cls_value, 3000u);
  EXPECT_EQ(d.outliers[0].cls_median, 750u);
  EXPECT_EQ(d.outliers[0].findings, std::vector<std::string>{"large_pageable"});
  EXPECT_EQ(d.cpu_blocked.max_id, 7u);
  EXPECT_EQ(d.cpu_blocked.median, 1000u);
  ASSERT_EQ(d.patterns.size(), 2u);
  EXPECT_EQ(d.patterns[0].ranks.size(), 19u);
  EXPECT_EQ(d.patterns[1].ranks, std::vector<uint32_t>{12});
  EXPECT_EQ(d.patterns[1].sites, (std::vector<uint32_t>{1, 2, 9}));
  ASSERT_EQ(d.sites.size(), 3u);
  EXPECT_EQ(d.sites[2].site, 9u);
  EXPECT_EQ(d.sites[2].ranks, std::vector<uint32_t>{12});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].ranks.size(), 20u);
  EXPECT_EQ(d.findings[0].time_per_rank.max_id, 7u);
}

class RankScale : public JobTest {};

// 1,000 generated ranks: the text is at most 120 lines, names the planted
// ranks (the slow ones as outliers, the extra site's and the pinned reads'
// as patterns of their own) and says the rest are alike; --json keeps every rank.
TEST_F(RankScale, ThousandRanksReadOnOneScreen) {
  bench::RankTraceSetOptions o;
  o.ranks = 1000;
  o.events_per_rank = 160;
  o.seed = 7;
  bench::PlantedRanks planted;
  std::string error;
  ASSERT_TRUE(bench::write_rank_trace_set(o, dir_.string(), planted, error)) << error;
  ASSERT_EQ(planted.slow.size(), 4u);
  const model::Job job = load_paths(planted.paths);
  const analyses::Report r = analyses::analyze(job);
  ASSERT_EQ(r.ranks.ranks.size(), 1000u);
  render::TextOptions to;
  to.width = 100;
  const std::string text = render::render_text(r, to);
  EXPECT_LE(lines_of(text), 120u) << text;
  // The slow ranks, as outliers on CPU-blocked time, and nothing else is one.
  const auto d = analyses::digest_ranks(r.ranks.ranks);
  std::vector<uint32_t> outliers;
  for (const auto& x : d.outliers) outliers.push_back(x.rank);
  std::sort(outliers.begin(), outliers.end());
  outliers.erase(std::unique(outliers.begin(), outliers.end()), outliers.end());
  EXPECT_EQ(outliers, planted.slow);
  for (uint32_t s : planted.slow)
    EXPECT_NE(text.find(fmt::format("    rank {}: CPU-blocked", s)), std::string::npos) << s << "\n" << text;
  // Three patterns: everyone else, the rank with the eval site, the rank with pinned reads.
  ASSERT_EQ(d.patterns.size(), 3u);
  EXPECT_EQ(d.patterns[0].ranks.size(), 998u);
  const std::string except =
      fmt::format("ranks 0–999 except {} and {}", std::min(planted.extra_site, planted.pinned_reads),
                  std::max(planted.extra_site, planted.pinned_reads));
  EXPECT_NE(text.find(except), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("rank {}: as the first, also #", planted.extra_site)), std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("rank {}: as the first, also D2H pinned", planted.pinned_reads)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  all 1,000 complete;"), std::string::npos) << text;
  // The rank notes, alike up to their numbers, said once and counted.
  EXPECT_NE(text.find("rank: N launcher=torchrun variable=RANK local_rank=N world_size=N launch_id=" +
                      planted.launch_id),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(1,000 processes)"), std::string::npos) << text;
  // Per-rank detail stays in JSON.
  const std::string json = render::render_json(r, render::JsonOptions{});
  EXPECT_NE(json.find("\"rank\": 999"), std::string::npos);
}

}  // namespace
}  // namespace cuxfer::testing
