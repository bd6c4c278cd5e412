// cuxfer tune's decisions (analyzer/tune/decision.h): the noise rule, the
// keep/reject rule for call and zero_copy candidates, and the run bound.
#include "analyzer/tune/decision.h"
#include "analyzer/tune/plan.h"

#include <gtest/gtest.h>

namespace cuxfer::tune {
namespace {

TEST(TuneStats, MedianOddEvenEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(TuneStats, NoiseIsRelativeRangeWithAFloor) {
  EXPECT_DOUBLE_EQ(relative_noise({100, 110, 90}), 0.2);   // (110 - 90) / 100
  EXPECT_DOUBLE_EQ(relative_noise({100, 100.5, 100}), kMinNoise);  // 0.5 % < 2 %
  EXPECT_DOUBLE_EQ(relative_noise({100}), kMinNoise);      // one sample says nothing
  EXPECT_DOUBLE_EQ(relative_noise({0, 0}), kMinNoise);
  EXPECT_DOUBLE_EQ(comparison_noise({100, 110, 90}, {50, 51, 50}), 0.2);
  // Both groups' spreads over the baseline's median, the effect's unit.
  EXPECT_DOUBLE_EQ(comparison_noise({100, 101, 100}, {50, 60, 55}), 10.0 / 100);
  EXPECT_DOUBLE_EQ(comparison_noise({100, 101, 100}, {100, 100.5, 100}), kMinNoise);
  EXPECT_DOUBLE_EQ(comparison_noise({0, 0}, {5, 9}), kMinNoise);
}

TEST(TuneStats, EffectIsRelativeToTheBaselineMedian) {
  EXPECT_DOUBLE_EQ(relative_effect({100, 100, 100}, {75, 75, 75}), 0.25);
  EXPECT_DOUBLE_EQ(relative_effect({100}, {120}), -0.2);
  EXPECT_DOUBLE_EQ(relative_effect({0, 0}, {5}), 0);
}

CandidateSamples call(std::vector<double> base_site, std::vector<double> now_site, std::vector<double> base_wall,
                      std::vector<double> now_wall) {
  return {false, std::move(base_site), std::move(now_site), std::move(base_wall), std::move(now_wall)};
}

TEST(TuneJudge, KeepsAClearImprovementThatDoesNotSlowTheRun) {
  Judgement j = judge(call({10e6, 10.1e6, 9.9e6}, {5e6, 5.1e6, 5e6}, {1e9, 1.01e9, 0.99e9}, {0.99e9, 1e9, 0.98e9}));
  EXPECT_TRUE(j.keep());
  EXPECT_NEAR(j.site_effect, 0.5, 1e-9);  // medians 10e6 -> 5e6
  EXPECT_DOUBLE_EQ(j.site_noise, kMinNoise);
}

// The shape of gpu.tune.zc_reread on an H200 (2026-12-01: the register candidate's site time
// spread 96 % of its own median over three runs, its effect 80 %; 2026-12-05: 100.7 % and
// 62.7 %): made-up runs where every candidate run beats every baseline run, but spread by
// 100 % of their own small median. The old rule (each group over its own median) called it noise.
TEST(TuneJudge, KeepsAVariableButClearImprovement) {
  Judgement j =
      judge(call({180e6, 181e6, 182e6}, {40e6, 67e6, 107e6}, {580e6, 579e6, 582e6}, {576e6, 520e6, 556e6}));
  EXPECT_TRUE(j.keep()) << j.reason;
  EXPECT_NEAR(j.site_noise, 67.0 / 181, 1e-9);
}

TEST(TuneJudge, RejectsAnImprovementWhoseRunsReachTheBaseline) {
  // One of the candidate's runs is as slow as the baseline: its spread covers the effect.
  Judgement j =
      judge(call({180e6, 181e6, 182e6}, {20e6, 67e6, 185e6}, {580e6, 579e6, 582e6}, {576e6, 520e6, 556e6}));
  EXPECT_EQ(j.verdict, Verdict::Noise) << j.reason;
}

TEST(TuneJudge, KeepsACallCandidateWhoseRunTimeIsWithinNoise) {
  // Sites 50 % faster; the whole run 1 % slower, inside its 2 % noise: kept.
  Judgement j = judge(call({10, 10, 10}, {5, 5, 5}, {100, 100, 100}, {101, 101, 101}));
  EXPECT_TRUE(j.keep()) << j.reason;
}

TEST(TuneJudge, RejectsWhenTheWholeRunGetsSlowerBeyondNoise) {
  Judgement j = judge(call({10, 10, 10}, {5, 5, 5}, {100, 100, 100}, {110, 110, 110}));
  EXPECT_EQ(j.verdict, Verdict::Slower);
  EXPECT_NE(j.reason.find("whole run got 10.0% slower"), std::string::npos) << j.reason;
}

TEST(TuneJudge, RejectsAnEffectInsideTheNoiseAndSaysSo) {
  // Baseline sites vary 20 %; a 10 % improvement is not larger than that.
  Judgement j = judge(call({100, 110, 90}, {90, 90, 90}, {100, 100, 100}, {100, 100, 100}));
  EXPECT_EQ(j.verdict, Verdict::Noise);
  EXPECT_EQ(j.reason, "run-to-run noise (20.0%) is larger than the effect (10.0%) at its call sites");
}

TEST(TuneJudge, NoiseOfTheCandidateRunsCountsToo) {
  Judgement j = judge(call({100, 100, 100}, {50, 90, 80}, {100, 100, 100}, {100, 100, 100}));
  // effect (100 - 80) / 100 = 20 %, noise (90 - 50) / 80 = 50 %.
  EXPECT_EQ(j.verdict, Verdict::Noise);
}

TEST(TuneJudge, TheTwoPercentFloorHoldsForPerfectlyStableRuns) {
  Judgement j = judge(call({100, 100}, {99, 99}, {100, 100}, {100, 100}));
  EXPECT_EQ(j.verdict, Verdict::Noise);  // 1 % < 2 %
  EXPECT_TRUE(judge(call({100, 100}, {97, 97}, {100, 100}, {100, 100})).keep());  // 3 % > 2 %
}

TEST(TuneJudge, RejectsSlowerOrUnchangedSites) {
  EXPECT_EQ(judge(call({100, 100}, {150, 150}, {1, 1}, {1, 1})).verdict, Verdict::Slower);
  EXPECT_EQ(judge(call({100, 100}, {101, 101}, {1, 1}, {1, 1})).verdict, Verdict::NoEffect);
  EXPECT_EQ(judge(call({0, 0}, {0, 0}, {1, 1}, {1, 1})).verdict, Verdict::NoEffect);
  EXPECT_EQ(judge(call({}, {}, {}, {})).verdict, Verdict::NoEffect);
}

CandidateSamples zero_copy(std::vector<double> base_site, std::vector<double> now_site, std::vector<double> base_wall,
                           std::vector<double> now_wall) {
  auto s = call(std::move(base_site), std::move(now_site), std::move(base_wall), std::move(now_wall));
  s.zero_copy = true;
  return s;
}

TEST(TuneJudge, ZeroCopyThatSlowsItsKernelsIsRejected) {
  // The tiny copies vanish (sites 90 % faster), but a kernel re-reading the
  // buffer over the bus makes the whole run 30 % slower.
  Judgement j = judge(zero_copy({10e6, 10e6, 10e6}, {1e6, 1e6, 1e6}, {1e9, 1e9, 1e9}, {1.3e9, 1.3e9, 1.3e9}));
  EXPECT_FALSE(j.keep());
  EXPECT_EQ(j.verdict, Verdict::Slower);
}

TEST(TuneJudge, ZeroCopyMustMakeTheWholeRunFasterBeyondNoise) {
  // Sites much faster, whole run unchanged: a call entry would be kept, a zero_copy one is not.
  EXPECT_TRUE(judge(call({10, 10}, {1, 1}, {100, 100}, {100, 100})).keep());
  Judgement same = judge(zero_copy({10, 10}, {1, 1}, {100, 100}, {100, 100}));
  EXPECT_EQ(same.verdict, Verdict::NoEffect);
  Judgement small = judge(zero_copy({10, 10}, {1, 1}, {100, 100}, {99, 99}));
  EXPECT_EQ(small.verdict, Verdict::Noise);
  EXPECT_NE(small.reason.find("run-to-run noise (2.0%) is larger than the effect (1.0%) on the whole run"),
            std::string::npos)
      << small.reason;
  EXPECT_TRUE(judge(zero_copy({10, 10}, {1, 1}, {100, 100}, {90, 90})).keep());
}

TEST(TunePlan, MinimumRuns) {
  EXPECT_EQ(minimum_runs(2), 5u);
  EXPECT_EQ(minimum_runs(3), 7u);
}

TEST(TunePlan, OneCandidateNeedsNoRunsOfItsOwn) {
  EXPECT_TRUE(plan_solo_runs({{false, false, 10}}, true, 3, 100).empty());
}

TEST(TunePlan, NothingSuspiciousNothingPlanned) {
  EXPECT_TRUE(plan_solo_runs({{false, true, 10}, {false, true, 5}}, false, 3, 100).empty());
}

TEST(TunePlan, SuspiciousOrderAndTheBound) {
  // 0: call kept, 1: zero_copy, 2: call rejected (gain 5), 3: call rejected (gain 50)
  std::vector<CombinedOutcome> o = {{false, true, 100}, {true, true, 1}, {false, false, 5}, {false, false, 50}};
  EXPECT_EQ(plan_solo_runs(o, false, 3, 100), (std::vector<size_t>{1, 3, 2}));
  // 3 reps each and 3 held back for confirming: 10 runs left fit two.
  EXPECT_EQ(plan_solo_runs(o, false, 3, 10), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(plan_solo_runs(o, false, 3, 5), (std::vector<size_t>{}));
  EXPECT_TRUE(plan_solo_runs(o, false, 3, 2).empty());
  // The whole run got slower: everyone is suspicious, zero_copy first, then by gain.
  EXPECT_EQ(plan_solo_runs(o, true, 2, 100), (std::vector<size_t>{1, 0, 3, 2}));
}

TEST(TunePlan, NeverExceedsTheBound) {
  std::vector<CombinedOutcome> o(10, {true, false, 1});
  for (uint32_t reps = 2; reps <= 5; ++reps)
    for (uint32_t left = 0; left <= 60; ++left) {
      const size_t k = plan_solo_runs(o, true, reps, left).size();
      EXPECT_LE(k * reps + (k ? reps : 0), left) << "reps " << reps << ", left " << left;
    }
}

// After the solo runs (tune/plan.h): a kept candidate without runs of its own.
TEST(TunePlan, SettlesCandidatesThatDidNotRunAlone) {
  auto keep = [] { Judgement j; j.verdict = Verdict::Keep; j.reason = "kept"; return j; };
  auto reject = [] { Judgement j; j.verdict = Verdict::Noise; j.reason = "noise"; return j; };
  // 0: kept with all, no runs alone; 1: zero_copy, kept with all, no runs alone;
  // 2: kept alone; 3: rejected with all.
  const std::vector<Standing> start = {{keep(), false, false}, {keep(), true, false}, {keep(), false, true},
                                       {reject(), false, false}};
  std::vector<Standing> fine = start;
  settle_unmeasured(fine, 0.10, 0.02);  // all together 10 % faster
  EXPECT_TRUE(fine[0].judgement.keep());
  EXPECT_EQ(fine[1].judgement.verdict, Verdict::Noise);  // zero_copy cannot be told apart from the others
  EXPECT_TRUE(fine[2].judgement.keep());
  EXPECT_EQ(fine[3].judgement.reason, "noise");
  std::vector<Standing> worse = start;
  settle_unmeasured(worse, -0.10, 0.02);  // all together 10 % slower
  EXPECT_EQ(worse[0].judgement.verdict, Verdict::Slower);
  EXPECT_NE(worse[0].judgement.reason.find("10.0% slower"), std::string::npos) << worse[0].judgement.reason;
  EXPECT_EQ(worse[1].judgement.verdict, Verdict::Slower);
  EXPECT_TRUE(worse[2].judgement.keep());  // its own runs decided
  // One candidate: the all-candidates runs are its own.
  std::vector<Standing> one = {{keep(), true, false}};
  settle_unmeasured(one, -0.10, 0.02);
  EXPECT_TRUE(one[0].judgement.keep());
}

TEST(TunePlan, WhichRunsMeasureTheWinningSet) {
  auto st = [](bool kept, bool alone) {
    Standing s;
    s.judgement.verdict = kept ? Verdict::Keep : Verdict::Noise;
    s.ran_alone = alone;
    return s;
  };
  EXPECT_EQ(choose_winning_runs({st(true, false), st(true, true)}, 0, 3), WinningRuns::Combined);
  EXPECT_EQ(choose_winning_runs({st(false, true), st(true, true)}, 0, 3), WinningRuns::Solo);
  EXPECT_EQ(choose_winning_runs({st(true, false), st(false, true)}, 3, 3), WinningRuns::Confirm);
  EXPECT_EQ(choose_winning_runs({st(true, false), st(false, true)}, 2, 3), WinningRuns::CombinedNoRoom);
  EXPECT_EQ(choose_winning_runs({st(true, true), st(true, true), st(false, true)}, 9, 3), WinningRuns::Confirm);
  EXPECT_EQ(choose_winning_runs({st(false, true), st(false, false)}, 9, 3), WinningRuns::NoneKept);
  EXPECT_TRUE(confirm_rejects(-0.05, 0.02));
  EXPECT_FALSE(confirm_rejects(-0.01, 0.02));
}

TEST(TuneFormat, Percent) {
  EXPECT_EQ(percent(0.041), "4.1%");
  EXPECT_EQ(percent(-0.5), "-50.0%");
}

}  // namespace
}  // namespace cuxfer::tune
