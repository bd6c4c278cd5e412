// `cuxfer diff`: two runs compared call site by call site, sites matched by
// identity despite different load addresses, the same-work check, and the
// staging accounting (bytes staged, time recovered) exact.
#include <gtest/gtest.h>

#include "analyzer/analyses/diff.h"
#include "analyzer/render/diff_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using nlohmann::json;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

class Diff : public JobTest {};

// A run of the workload: two call sites in /opt/app/train loaded at `base`
// (site A: 3 x 1 MiB H2D pageable, site B: 2 x 4 MiB D2H pageable), each
// copy taking `h2d_ns` / `d2h_ns`; `staged` flags them as the rewrite would.
SyntheticTrace run(uint64_t base, uint64_t h2d_ns, uint64_t d2h_ns, bool staged = false, int extra_h2d = 0) {
  SyntheticTrace t;
  t.modules.push_back({base, base, base + 0x100000, "/opt/app/train", ""});
  const uint32_t a = t.site(base + 0x1000), b = t.site(base + 0x2000);
  const uint8_t flag = staged ? trace::kFlagStaged : 0;
  for (int i = 0; i < 3 + extra_h2d; ++i) t.copy(Direction::HtoD, MemKind::Pageable, MiB, h2d_ns, false, a).flags |= flag;
  for (int i = 0; i < 2; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4 * MiB, d2h_ns, false, b).flags |= flag;
  if (staged) t.notes.push_back("rewrite: pin: enabled");
  return t;
}

// Text options wide enough that no sentence is wrapped.
render::DiffTextOptions wide() {
  render::DiffTextOptions o;
  o.width = 1000;
  return o;
}

const analyses::DiffSite* find(const analyses::Diff& d, const std::string& key) {
  for (const auto& s : d.sites)
    if (s.key == key) return &s;
  return nullptr;
}

TEST_F(Diff, IdenticalRunsHaveZeroDeltas) {
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(run(0x400000, 100'000, 500'000));
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_TRUE(d.same_work);
  ASSERT_EQ(d.sites.size(), 2u);
  for (const auto& s : d.sites) {
    EXPECT_TRUE(s.in_base && s.in_new);
    EXPECT_TRUE(s.same_work);
    EXPECT_EQ(s.time_recovered_ns(), 0);
  }
  EXPECT_EQ(d.time_recovered_ns(), 0);
  EXPECT_EQ(d.base.totals.calls, 5u);
  EXPECT_EQ(d.now.totals.copy_bytes, 11 * MiB);
  EXPECT_EQ(d.now.totals.staged_bytes, 0u);
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["schema"], "cuxfer.diff/1");
  EXPECT_EQ(j["same_work"], true);
  EXPECT_EQ(j["time_recovered_ns"], 0);
  EXPECT_EQ(j["totals"]["delta"]["cpu_blocked_ns"], 0);
  EXPECT_EQ(j["totals"]["delta"]["copy_bytes"], 0);
  EXPECT_TRUE(j["differing_sites"].empty());
  std::string text = render::render_diff_text(d, {});
  EXPECT_NE(text.find("Same work: yes"), std::string::npos) << text;
}

TEST_F(Diff, StagedRunRecoversExactTime) {
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(run(0x400000, 40'000, 200'000, true));
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_TRUE(d.same_work);
  EXPECT_FALSE(d.base.rewrite);
  EXPECT_TRUE(d.now.rewrite);
  EXPECT_EQ(d.now.totals.staged_calls, 5u);
  EXPECT_EQ(d.now.totals.staged_bytes, 11 * MiB);
  EXPECT_EQ(d.base.totals.cpu_blocked_ns, 3 * 100'000u + 2 * 500'000u);
  EXPECT_EQ(d.now.totals.cpu_blocked_ns, 3 * 40'000u + 2 * 200'000u);
  EXPECT_EQ(d.time_recovered_ns(), 3 * 60'000 + 2 * 300'000);
  const auto* a = find(d, "train+0x1000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->time_recovered_ns(), 3 * 60'000);
  EXPECT_EQ(a->now.staged_bytes, 3 * MiB);
  // Most time recovered first.
  EXPECT_EQ(d.sites[0].key, "train+0x2000");
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["time_recovered_ns"], 780'000);
  EXPECT_EQ(j["totals"]["delta"]["cpu_blocked_ns"], -780'000);
  EXPECT_EQ(j["new"]["totals"]["staged_bytes"], 11 * MiB);
  EXPECT_EQ(j["totals"]["delta"]["staged_bytes"], 11 * MiB);
  EXPECT_TRUE(j["totals"]["delta"]["gpu_ns"].is_null());
  std::string text = render::render_diff_text(d, {});
  EXPECT_NE(text.find("measured, not estimated"), std::string::npos) << text;
  EXPECT_NE(text.find("Time recovered: +780 us"), std::string::npos) << text;
}

TEST_F(Diff, ExtraCopyBreaksSameWork) {
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(run(0x400000, 100'000, 500'000, false, 1));
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_FALSE(d.same_work);
  const auto* a = find(d, "train+0x1000");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->same_work);
  EXPECT_NE(a->difference.find("H2D pageable"), std::string::npos) << a->difference;
  const auto* b = find(d, "train+0x2000");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->same_work);
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["same_work"], false);
  ASSERT_EQ(j["differing_sites"].size(), 1u);
  EXPECT_EQ(j["differing_sites"][0]["site"], "train+0x1000");
  std::string text = render::render_diff_text(d, {});
  EXPECT_NE(text.find("NOT THE SAME WORK: 1 call site"), std::string::npos) << text;
  EXPECT_NE(text.find("! train+0x1000"), std::string::npos) << text;
}

TEST_F(Diff, SitesMatchDespiteDifferentLoadAddresses) {
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(run(0x5555'5550'0000ull, 100'000, 500'000));
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_TRUE(d.same_work);
  ASSERT_EQ(d.sites.size(), 2u);
  for (const auto& s : d.sites) EXPECT_TRUE(s.in_base && s.in_new) << s.key;
  json j = render::diff_to_json(d);
  EXPECT_TRUE(j["only_in_base"].empty());
  EXPECT_TRUE(j["only_in_new"].empty());
}

TEST_F(Diff, SiteInOneRunIsListed) {
  SyntheticTrace extra = run(0x400000, 100'000, 500'000);
  const uint32_t c = extra.site(0x403000);
  extra.copy(Direction::HtoD, MemKind::Pinned, MiB, 20'000, false, c);
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(extra);
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_FALSE(d.same_work);
  const auto* s = find(d, "train+0x3000");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->in_base);
  EXPECT_TRUE(s->in_new);
  json j = render::diff_to_json(d);
  ASSERT_EQ(j["only_in_new"].size(), 1u);
  EXPECT_EQ(j["only_in_new"][0], "train+0x3000");
  std::string text = render::render_diff_text(d, {});
  EXPECT_NE(text.find("Call sites only in new (1)"), std::string::npos) << text;
}

TEST_F(Diff, SiteKeyUsesSymbolsWhenKnown) {
  symbolize::Frame f;
  f.module = "/usr/lib/libfoo.so";
  f.offset = 0x1234;
  f.address = 0x7f0000001234;
  EXPECT_EQ(analyses::site_key(f), "libfoo.so+0x1234");
  f.function = "load_batch(int)";
  f.file = "/src/load.cpp";
  f.line = 42;
  EXPECT_EQ(analyses::site_key(f), "libfoo.so!load_batch(int) (/src/load.cpp:42)");
  EXPECT_EQ(render::format_signed_duration(-1500), "-1.50 us");
  EXPECT_EQ(render::format_ratio(0, 5), "n/a");
  EXPECT_EQ(render::format_ratio(4, 2), "0.50x");
}

// One run each: the difference is measured, and the diff says that nothing
// separates it from run-to-run noise.
TEST_F(Diff, OneRunEachSaysItCannotBeToldFromNoise) {
  model::Job base = load(run(0x400000, 100'000, 500'000));
  model::Job now = load(run(0x400000, 40'000, 200'000, true));
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_EQ(d.noise.verdict, analyses::NoiseVerdict::OneRunEach);
  EXPECT_EQ(d.base.runs, 1u);
  EXPECT_EQ(d.noise.pairs_min_ns, 780'000);
  EXPECT_EQ(d.noise.pairs_max_ns, 780'000);
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["time_recovered_noise"]["verdict"], "one_run_each");
  EXPECT_EQ(j["base"]["runs"], 1);
  EXPECT_EQ(j["simulated"], false);
  std::string text = render::render_diff_text(d, wide());
  EXPECT_NE(text.find("cannot be told apart from run-to-run noise"), std::string::npos) << text;
  EXPECT_EQ(text.find("SIMULATED"), std::string::npos) << text;
}

// Several runs per side: medians, the range over every pair of runs, and a
// verdict by the exact permutation test (4 against 4 separated: 2/70).
TEST_F(Diff, SeveralRunsGiveMediansAndTheRangeOfEveryPair) {
  std::vector<model::Job> base, now;
  for (uint64_t h2d : {100'000, 130'000, 110'000, 120'000}) base.push_back(load(run(0x400000, h2d, 500'000)));
  for (uint64_t h2d : {40'000, 70'000, 50'000, 60'000})
    now.push_back(load(run(0x400000, h2d, 200'000, true)));
  std::vector<const model::Job*> b, n;
  for (const auto& j : base) b.push_back(&j);
  for (const auto& j : now) n.push_back(&j);
  analyses::Diff d = analyses::diff_runs(b, n);
  EXPECT_TRUE(d.same_work);
  EXPECT_EQ(d.base.runs, 4u);
  ASSERT_EQ(d.base.samples.size(), 4u);
  // Medians: base 3 x (110k + 120k) / 2 + 2 x 500k, new 3 x 55k + 2 x 200k.
  EXPECT_EQ(d.base.totals.cpu_blocked_ns, 3 * 115'000u + 1'000'000u);
  EXPECT_EQ(d.now.totals.cpu_blocked_ns, 3 * 55'000u + 400'000u);
  EXPECT_EQ(d.time_recovered_ns(), 3 * 60'000 + 600'000);
  EXPECT_EQ(d.base.totals.calls, 5u);
  // Pairs: from 3 x (100k - 70k) + 600k to 3 x (130k - 40k) + 600k.
  EXPECT_EQ(d.noise.pairs_min_ns, 3 * 30'000 + 600'000);
  EXPECT_EQ(d.noise.pairs_max_ns, 3 * 90'000 + 600'000);
  EXPECT_TRUE(d.noise.separated);
  EXPECT_DOUBLE_EQ(d.noise.chance, 2.0 / 70);
  EXPECT_EQ(d.noise.verdict, analyses::NoiseVerdict::Beyond);
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["base"]["runs"], 4);
  EXPECT_EQ(j["base"]["samples"].size(), 4u);
  EXPECT_EQ(j["base"]["samples"][1]["cpu_blocked_ns"], 3 * 130'000 + 1'000'000);
  EXPECT_EQ(j["time_recovered_noise"]["verdict"], "beyond_noise");
  EXPECT_EQ(j["time_recovered_noise"]["pairs_min_ns"], 690'000);
  EXPECT_EQ(j["time_recovered_basis"], "measured: median base minus median new CPU-blocked time");
  std::string text = render::render_diff_text(d, wide());
  EXPECT_NE(text.find("Totals: medians over 4 base and 4 new runs"), std::string::npos) << text;
  EXPECT_NE(text.find("The 16 pairs of a base and a new run differ by +690 us to +870 us"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Beyond run-to-run noise: every base run blocked longer than every new run"),
            std::string::npos)
      << text;
}

TEST_F(Diff, OverlappingRunsAreWithinNoise) {
  std::vector<model::Job> base, now;
  for (uint64_t h2d : {100'000, 300'000}) base.push_back(load(run(0x400000, h2d, 500'000)));
  for (uint64_t h2d : {200'000, 250'000}) now.push_back(load(run(0x400000, h2d, 500'000)));
  analyses::Diff d = analyses::diff_runs({&base[0], &base[1]}, {&now[0], &now[1]});
  EXPECT_FALSE(d.noise.separated);
  EXPECT_EQ(d.noise.verdict, analyses::NoiseVerdict::Within);
  std::string text = render::render_diff_text(d, wide());
  EXPECT_NE(text.find("Within run-to-run noise"), std::string::npos) << text;
}

TEST_F(Diff, FewSeparatedRunsAreNotConclusive) {
  const analyses::TimeRecoveredNoise n = analyses::judge_noise({300, 310, 320}, {100, 110, 120});
  EXPECT_TRUE(n.separated);
  EXPECT_DOUBLE_EQ(n.chance, 0.1);  // 2 / C(6, 3)
  EXPECT_EQ(n.verdict, analyses::NoiseVerdict::NotConclusive);
  EXPECT_EQ(n.runs_for_separation, 4u);  // 2 / C(8, 4) = 2.9 %, 2 / C(6, 3) = 10 %
  EXPECT_EQ(n.pairs_min_ns, 180);
  EXPECT_EQ(n.pairs_max_ns, 220);
  // One side of one run: the other side's spread still tells something.
  EXPECT_EQ(analyses::judge_noise({100}, {10, 20, 30, 40, 50}).verdict,
            analyses::NoiseVerdict::NotConclusive);
  EXPECT_EQ(analyses::judge_noise({100}, {100}).verdict, analyses::NoiseVerdict::OneRunEach);
}

// A side whose runs did different work is said: its medians mix them.
TEST_F(Diff, RunsOfOneSideThatDifferAreSaid) {
  model::Job b1 = load(run(0x400000, 100'000, 500'000));
  model::Job b2 = load(run(0x400000, 100'000, 500'000, false, 1));
  model::Job n1 = load(run(0x400000, 100'000, 500'000));
  analyses::Diff d = analyses::diff_runs({&b1, &b2}, {&n1});
  EXPECT_FALSE(d.same_work);
  EXPECT_NE(d.base.work_spread.find("run 2"), std::string::npos) << d.base.work_spread;
  EXPECT_NE(d.base.work_spread.find("H2D pageable"), std::string::npos) << d.base.work_spread;
  EXPECT_TRUE(d.now.work_spread.empty());
  std::string text = render::render_diff_text(d, wide());
  EXPECT_NE(text.find("NOT THE SAME WORK across the base runs"), std::string::npos) << text;
}

// Runs on the simulated CUDA are said before anything else.
TEST_F(Diff, SimulatedRunsAreSaidFirst) {
  SyntheticTrace sb = run(0x400000, 100'000, 500'000), sn = run(0x400000, 40'000, 200'000, true);
  sb.status.simulated = sn.status.simulated = true;
  model::Job base = load(sb), now = load(sn);
  analyses::Diff d = analyses::diff_jobs(base, now);
  EXPECT_TRUE(d.base.simulated && d.now.simulated);
  json j = render::diff_to_json(d);
  EXPECT_EQ(j["simulated"], true);
  EXPECT_EQ(j["base"]["simulated"], true);
  std::string text = render::render_diff_text(d, {});
  const size_t banner = text.find("!! SIMULATED CUDA"), work = text.find("Same work");
  ASSERT_NE(banner, std::string::npos) << text;
  EXPECT_LT(banner, work) << text;
  EXPECT_NE(text.find("Time recovered: +780 us on SIMULATED CUDA"), std::string::npos) << text;
  // One side only: the times do not compare.
  model::Job real = load(run(0x400000, 40'000, 200'000, true));
  text = render::render_diff_text(analyses::diff_jobs(base, real), {});
  EXPECT_NE(text.find("the base side ran without a GPU and the new side on real CUDA"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace cuxfer
