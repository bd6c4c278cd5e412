// The CUPTI governor's table of cases (shim/record/cupti_governor.h).
#include "record/cupti_governor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace cuxfer::shim {
namespace {

using trace::GateReason;

constexpr uint64_t kWindow = 50'000'000;  // 50 ms, the writer's period

CopyWindow sync(uint64_t n) { return {kWindow, n, 0}; }
CopyWindow async(uint64_t n, uint64_t s = 0) { return {kWindow, s, n}; }
// The same window with copies from `sites` call sites the records time for the first time.
CopyWindow fresh(CopyWindow w, uint64_t sites = 1) {
  w.new_sites = sites;
  return w;
}
// The same window with every copy from a call site the records have timed.
CopyWindow timed(CopyWindow w) {
  w.timed_calls = w.sync_calls + w.async_calls;
  return w;
}

// Runs windows from the start state; returns the on/off of each window's outcome.
std::vector<bool> run(const std::vector<CopyWindow>& ws, GovernorState& s, const GovernorSettings& k = {}) {
  std::vector<bool> on;
  for (const auto& w : ws) {
    GovernorStep st = govern(s, w, k);
    EXPECT_EQ(st.changed, st.next.on != s.on);
    s = st.next;
    on.push_back(s.on);
  }
  return on;
}

TEST(CuptiGovernor, IdleWindowsChangeNothing) {
  GovernorState s;
  GovernorStep st = govern(s, {kWindow, 0, 0}, {});
  EXPECT_FALSE(st.changed);
  EXPECT_EQ(st.next, s);
  s.on = false;
  s.reason = GateReason::SyncOnly;
  s.off_left = 5;
  EXPECT_EQ(govern(s, {kWindow, 0, 0}, {}).next, s);
}

TEST(CuptiGovernor, SynchronousCopiesOnlyTurnRecordsOffAfterTwoWindows) {
  GovernorState s;
  EXPECT_EQ(run({sync(10), sync(10)}, s), (std::vector<bool>{true, false}));
  EXPECT_EQ(s.reason, GateReason::SyncOnly);
  EXPECT_EQ(s.off_left, 19u);
}

TEST(CuptiGovernor, AsyncCopiesKeepRecordsOnAndResetTheRun) {
  GovernorState s;
  EXPECT_EQ(run({sync(10), fresh(async(1, 10)), sync(10), fresh(async(5)), sync(3)}, s),
            (std::vector<bool>{true, true, true, true, true}));
  EXPECT_EQ(s.sync_only_run, 1u);
}

// The windows (from `from` on) whose outcome had the records on.
std::vector<size_t> on_windows(const std::vector<bool>& on, size_t from = 0) {
  std::vector<size_t> at;
  for (size_t i = from; i < on.size(); ++i)
    if (on[i]) at.push_back(i);
  return at;
}

TEST(CuptiGovernor, OffForSyncOnlySamplesAfterNineteenWindowsThenBacksOff) {
  GovernorState s;
  std::vector<CopyWindow> ws(300, sync(10));
  std::vector<bool> on = run(ws, s);
  // Window 0 on, 1 turns off; the first sample 19 windows later (20), then
  // each finds synchronous copies only again and doubles the gap: 38, 76, 152.
  EXPECT_EQ(on_windows(on, 2), (std::vector<size_t>{20, 59, 136, 289}));
  EXPECT_EQ(s.backoff, 4u);
  // A sample window with synchronous copies only turns them off again at once.
  for (size_t i = 2; i + 1 < on.size(); ++i)
    if (on[i]) {
      EXPECT_FALSE(on[i + 1]) << "window " << i;
    }
  // Without the backoff: one window in twenty, as long as the run lasts.
  GovernorSettings k;
  k.max_backoff = 0;
  GovernorState flat;
  EXPECT_EQ(on_windows(run(std::vector<CopyWindow>(62, sync(10)), flat, k), 2),
            (std::vector<size_t>{20, 40, 60}));
}

TEST(CuptiGovernor, IdleWindowsDoNotCountTowardTheNextSample) {
  GovernorState s;
  run({sync(10), sync(10)}, s);
  const uint32_t left = s.off_left;
  for (int i = 0; i < 100; ++i) s = govern(s, {kWindow, 0, 0}, {}).next;
  EXPECT_FALSE(s.on);
  EXPECT_EQ(s.off_left, left);
}

TEST(CuptiGovernor, AsyncCopiesTurnSyncOnlyOffBackOnAtOnce) {
  GovernorState s;
  run({sync(10), sync(10)}, s);
  ASSERT_FALSE(s.on);
  GovernorStep st = govern(s, async(1), {});
  EXPECT_TRUE(st.changed);
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::AsyncCopies);
}

TEST(CuptiGovernor, CostCapKeepsTheAverageAtTheShare) {
  // 4-byte synchronous storm: ~166k copies/s, 8,300 a window: 58.1 % of it in records.
  GovernorState s;
  GovernorStep st = govern(s, sync(8300), {});
  EXPECT_TRUE(st.changed);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, 58u);  // on one window in ceil(58.1) = 59
  // Async copies do not end a cost cap early.
  s = st.next;
  st = govern(s, async(8300), {});
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.off_left, 57u);
}

TEST(CuptiGovernor, CostCapOnDutyMatchesTheShare) {
  // 4 % when on: one window in four (CUPTI never detached while asynchronous
  // copies come: the duty is the budget's).
  GovernorSettings k;
  k.async_detach_after = 0;
  const uint64_t calls = static_cast<uint64_t>(0.04 * kWindow / k.record_cost_ns);
  GovernorState s;
  std::vector<CopyWindow> ws(400, async(calls));
  std::vector<bool> on = run(ws, s, k);
  int n = 0;
  for (bool b : on) n += b;
  EXPECT_NEAR(n / 400.0, 0.25, 0.01);
}

TEST(CuptiGovernor, TheShimsOwnWorkLeavesTheRecordsTheRest) {
  // A PyTorch training loop: ~3,100 copies and memsets a second (156 a
  // window, 1.09 % in records), the shim's own work 0.8 % of the window.
  // The budget's duty, as without the detach (with it, below, the records
  // stay off longer so that CUPTI can be detached in between).
  GovernorSettings k;
  k.async_detach_after = 0;
  CopyWindow w = async(156);
  EXPECT_NEAR(record_budget(w, k), 0.01, 1e-12);  // nothing measured: the whole share
  w.shim_ns = kWindow * 8 / 1000;
  EXPECT_NEAR(record_budget(w, k), 0.002, 1e-9);
  GovernorState s;
  GovernorStep st = govern(s, w, k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, 5u);  // on one window in ceil(1.09 / 0.2) = 6
  // Without the shim's share the same window keeps them on one window in two.
  w.shim_ns = 0;
  EXPECT_EQ(govern(s, w, k).next.off_left, 1u);
  // A shim that takes the whole share and more: the records keep their floor.
  w.shim_ns = kWindow / 20;
  EXPECT_NEAR(record_budget(w, k), k.min_record_share, 1e-12);
  EXPECT_EQ(govern(s, w, k).next.off_left, 5u);  // 1.09 / 0.2
  // Cheap records stay on whatever the shim costs, within the budget.
  w = async(10);  // 0.07 %
  w.shim_ns = kWindow / 200;  // 0.5 %
  EXPECT_TRUE(govern(s, w, k).next.on);
  // With the detach (the default): off for sample_every - 1 windows.
  w = async(156);
  w.shim_ns = kWindow * 8 / 1000;
  EXPECT_EQ(govern(s, w, GovernorSettings{}).next.off_left, GovernorSettings{}.sample_every - 1);
}

TEST(CuptiGovernor, SyncCopiesOverTheBudgetStayOffAsLongAsSyncOnly) {
  // 1,000 synchronous copies a second (0.35 % in records) with a slow shim
  // (5 %: the records keep their 0.2 % floor): over the budget by less than
  // 2x. Off as long as the sync-only rule keeps them, not one window in two,
  // so that CUPTI can be detached from the next window on.
  GovernorSettings k;
  CopyWindow w = sync(50);
  w.shim_ns = kWindow / 20;
  GovernorStep st = govern(GovernorState{}, w, k);
  ASSERT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::SyncOnly);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1);
  st = govern(st.next, w, k);
  EXPECT_FALSE(st.next.on);
  EXPECT_TRUE(st.may_detach);
  // Async copies then want their records back at once (not a cost cap).
  EXPECT_TRUE(govern(st.next, async(1), k).next.on);
  // The same rate of async copies is a cost cap: one window in two without
  // the detach, one in sample_every with it.
  CopyWindow a = async(50);
  a.shim_ns = kWindow / 20;
  GovernorSettings no_detach;
  no_detach.async_detach_after = 0;
  st = govern(GovernorState{}, a, no_detach);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, 1u);
  st = govern(GovernorState{}, a, k);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1);
}

TEST(CuptiGovernor, BelowTheShareAsyncCopiesStayOnWhileTheyBringNewCallSites) {
  // 1,000 async copies a second: 0.35 % in records.
  GovernorState s;
  std::vector<bool> on = run(std::vector<CopyWindow>(50, fresh(async(50))), s);
  for (bool b : on) EXPECT_TRUE(b);
  // Without repeat_windows they stay on for copies already timed too.
  GovernorSettings k;
  k.repeat_windows = 0;
  GovernorState t;
  on = run(std::vector<CopyWindow>(50, async(50)), t, k);
  for (bool b : on) EXPECT_TRUE(b);
  EXPECT_EQ(t.reason, GateReason::Start);
}

TEST(CuptiGovernor, AsyncCopiesFromTimedCallSitesTurnRecordsOffAfterThreeWindows) {
  // A training loop: its call sites are timed in the first window, then the
  // same copies repeat. Three windows without a new site: off (repeats),
  // CUPTI may go two windows later (a copy of the last on window may still
  // be in flight), and with nothing new to time the samples are skipped,
  // each skip one more doubling, until the longest gap's.
  GovernorSettings k;
  GovernorState s;
  std::vector<CopyWindow> ws{fresh(async(50), 3)};
  ws.resize(2500, timed(async(50)));
  std::vector<bool> on;
  std::vector<size_t> detach_at;
  for (size_t i = 0; i < ws.size(); ++i) {
    GovernorStep st = govern(s, ws[i], k);
    if (st.may_detach) detach_at.push_back(i);
    s = st.next;
    on.push_back(s.on);
    if (i == 3) {
      EXPECT_FALSE(s.on);
      EXPECT_EQ(s.reason, GateReason::Repeats);
      EXPECT_EQ(s.off_left, k.sample_every - 1);
      EXPECT_EQ(s.backoff, 0u);
    }
  }
  // Skipped at 22, 60, 136, 288, 592 and 1200 (gaps 19, 38 ... 608), then
  // the longest gap's sample: on, and off again at once (it found the same).
  EXPECT_EQ(on_windows(on), (std::vector<size_t>{0, 1, 2, 2400}));
  ASSERT_FALSE(detach_at.empty());
  EXPECT_EQ(detach_at.front(), 5u);
  EXPECT_EQ(s.reason, GateReason::Repeats);
  EXPECT_EQ(s.backoff, k.max_backoff);
  // A window that times a new site starts the run again.
  GovernorState t;
  run({async(50), async(50), fresh(async(50)), async(50), async(50)}, t, k);
  EXPECT_TRUE(t.on);
  EXPECT_EQ(t.repeat_run, 2u);
}

TEST(CuptiGovernor, ACallSiteNeverTimedTurnsThemOnWhileCuptiIsStillAttached) {
  GovernorSettings k;
  GovernorState s;
  s.on = false;
  s.reason = GateReason::Repeats;
  s.off_left = 100;
  s.backoff = 3;
  s.off_run = 1;  // CUPTI not yet detached (async_detach_after = 2)
  CopyWindow w = async(50);
  w.timed_calls = 45;  // five copies from a site never timed
  GovernorStep st = govern(s, w, k);
  EXPECT_TRUE(st.changed);
  EXPECT_EQ(st.next.reason, GateReason::AsyncCopies);
  EXPECT_EQ(st.next.backoff, 0u);
  // Detached by now: no attach for it at once; the gap starts again from sample_every.
  s.off_run = 5;
  st = govern(s, w, k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.backoff, 0u);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1 - 5 - 1);
  // Synchronous copies from a new site need no records: the same cut, nothing on.
  s.off_run = 1;
  CopyWindow sw = sync(10);  // from sites never timed
  st = govern(s, sw, k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.backoff, 0u);
  EXPECT_EQ(st.next.reason, GateReason::SyncOnly);  // the repeating async copies are gone
  // so asynchronous copies coming back turn them on at once, as after any sync-only stretch.
  st = govern(st.next, async(50), k);
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::AsyncCopies);
  // Copies from timed sites change nothing but the count.
  st = govern(s, timed(async(50)), k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.backoff, 3u);
  EXPECT_EQ(st.next.off_left, 99u);
}

TEST(CuptiGovernor, CostCapNeverLongerThanTheLimit) {
  GovernorSettings k;
  k.max_off_windows = 100;
  GovernorState s;
  GovernorStep st = govern(s, {1000, 1'000'000, 0}, k);  // absurd rate
  EXPECT_EQ(st.next.off_left, 100u);
  // A zero-length window does not divide by zero.
  st = govern(GovernorState{}, {0, 1, 0}, k);
  EXPECT_FALSE(st.next.on);
}

TEST(CuptiGovernor, SampleAfterCostCapWithAsyncCopiesStaysOnWhenCheap) {
  GovernorState s;
  s.on = false;
  s.reason = GateReason::CostCap;
  s.off_left = 1;
  GovernorStep st = govern(s, async(10), {});
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::Sample);
  const GovernorState sample = st.next;
  st = govern(sample, fresh(async(10)), {});
  EXPECT_TRUE(st.next.on);
  EXPECT_FALSE(st.changed);
  EXPECT_EQ(st.next.reason, GateReason::AsyncCopies);
  // A sample that times only sites timed before has done its job: off, one more doubling.
  st = govern(sample, async(10), {});
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::Repeats);
  EXPECT_EQ(st.next.backoff, 1u);
}

TEST(CuptiGovernor, AsyncCopiesOverTheBudgetAreSampledLessOftenWhileTheyStayTheSame) {
  // The same 4 %: off long enough for CUPTI to be detached in between (idle,
  // attached, it costs every launch and copy), the first sample 19 windows
  // later, then each that finds the same cost doubles the gap (38, 76 ...
  // windows after the sample's own).
  GovernorSettings k;
  const uint64_t calls = static_cast<uint64_t>(0.04 * kWindow / k.record_cost_ns);
  GovernorState s;
  GovernorStep st = govern(s, async(calls), k);
  ASSERT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1);
  EXPECT_EQ(st.next.backoff, 0u);
  std::vector<bool> on = run(std::vector<CopyWindow>(2000, async(calls)), s, k);
  EXPECT_EQ(on_windows(on), (std::vector<size_t>{19, 58, 135, 288, 593, 1202}));
  EXPECT_EQ(s.backoff, k.max_backoff);
  // Never longer apart than max_off_windows.
  EXPECT_EQ(sample_gap(k, k.max_backoff), k.max_off_windows);
  EXPECT_EQ(sample_gap(k, 0), k.sample_every - 1);
  EXPECT_EQ(sample_gap(k, 3), 8 * (k.sample_every - 1));
  // Without the backoff: one window in twenty.
  k.max_backoff = 0;
  GovernorState flat;
  on = run(std::vector<CopyWindow>(400, async(calls)), flat, k);
  EXPECT_NEAR(std::count(on.begin(), on.end(), true) / 400.0, 1.0 / k.sample_every, 0.01);
}

TEST(CuptiGovernor, ASampleThatFindsSomethingElseStartsTheGapAgain) {
  GovernorSettings k;
  const uint64_t calls = static_cast<uint64_t>(0.04 * kWindow / k.record_cost_ns);
  GovernorState s;
  run(std::vector<CopyWindow>(200, async(calls)), s, k);  // three samples found the same
  ASSERT_EQ(s.backoff, 3u);
  ASSERT_FALSE(s.on);
  // A window of synchronous copies only under the cost cap: the mix changed;
  // the rest of the gap is cut to the undoubled one's. Early in the gap, the
  // sample comes when it would have without the doubling;
  GovernorState early = s;
  early.off_run = 5;
  early.off_left = 100;
  GovernorStep st = govern(early, sync(10), k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.backoff, 0u);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1 - 5 - 1);
  // past it, at once.
  ASSERT_GE(s.off_run, k.sample_every);
  st = govern(s, sync(10), k);
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::Sample);
  EXPECT_EQ(st.next.backoff, 0u);
  // A sample that finds the records affordable and new sites keeps them on and forgets the backoff.
  GovernorState sample;
  sample.reason = GateReason::Sample;
  sample.sampled = GateReason::CostCap;
  sample.backoff = 4;
  st = govern(sample, fresh(async(10)), k);
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.backoff, 0u);
  // A sample of a cost cap that finds synchronous copies only: another reason, no doubling.
  st = govern(sample, sync(10), k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::SyncOnly);
  EXPECT_EQ(st.next.backoff, 0u);
  EXPECT_EQ(st.next.off_left, k.sample_every - 1);
  // Asynchronous copies after a backed-off sync-only gap turn them on at once, and start over.
  GovernorState off;
  off.on = false;
  off.reason = GateReason::SyncOnly;
  off.backoff = 5;
  off.off_left = 300;
  st = govern(off, async(1), k);
  EXPECT_TRUE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::AsyncCopies);
  EXPECT_EQ(st.next.backoff, 0u);
}

TEST(CuptiGovernor, APauseKeepsTheBackoff) {
  // A training loop recorded in blocks (the capture range): a sample, then
  // the range closes; the next sample, found the same, still doubles the gap.
  GovernorSettings k;
  const uint64_t calls = static_cast<uint64_t>(0.04 * kWindow / k.record_cost_ns);
  CopyWindow paused{kWindow, 0, 0};
  paused.paused = true;
  GovernorState s;
  s.on = true;
  s.reason = GateReason::Sample;
  s.sampled = GateReason::CostCap;
  s.backoff = 2;
  GovernorStep st = govern(s, paused, k);
  ASSERT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::Paused);
  EXPECT_EQ(st.next.off_left, sample_gap(k, 2));
  EXPECT_EQ(st.next.backoff, 2u);
  s = st.next;
  std::vector<bool> on = run(std::vector<CopyWindow>(sample_gap(k, 2), async(calls)), s, k);
  EXPECT_TRUE(on.back());
  EXPECT_EQ(s.reason, GateReason::Sample);
  EXPECT_EQ(s.sampled, GateReason::CostCap);  // what it was before the pause
  st = govern(s, async(calls), k);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.backoff, 3u);
  EXPECT_EQ(st.next.off_left, sample_gap(k, 3));
}

TEST(CuptiGovernor, AsyncCopiesOverTheBudgetLetCuptiGoAfterTwoWindows) {
  GovernorSettings k;
  GovernorState s;
  GovernorStep st = govern(s, {kWindow, 0, 100'000}, k);
  ASSERT_FALSE(st.next.on);
  EXPECT_FALSE(st.may_detach);  // the window that turned them off
  st = govern(st.next, {kWindow, 0, 100'000}, k);
  EXPECT_FALSE(st.may_detach);  // one window: a copy issued with records on could still be in flight
  st = govern(st.next, {kWindow, 0, 100'000}, k);
  EXPECT_TRUE(st.may_detach);  // two
  EXPECT_EQ(st.next.off_run, 2u);
  // The sample window turns them on (CUPTI attached again) and starts over.
  s = st.next;
  s.off_left = 1;
  st = govern(s, {kWindow, 0, 100'000}, k);
  EXPECT_TRUE(st.next.on);
  EXPECT_FALSE(st.may_detach);
  EXPECT_EQ(st.next.off_run, 0u);
  // With the detach off (CUXFER_CUPTI_DETACH=0): never while async copies come.
  k.async_detach_after = 0;
  st = govern(GovernorState{}, {kWindow, 0, 100'000}, k);
  for (int i = 0; i < 10; ++i) {
    st = govern(st.next, {kWindow, 0, 100'000}, k);
    EXPECT_FALSE(st.may_detach) << i;
  }
}

TEST(CuptiGovernor, OutsideTheCaptureRangeTheRecordsGoOffAndCuptiGoes) {
  GovernorSettings k;
  CopyWindow paused{kWindow, 0, 0};
  paused.paused = true;
  // Records on (the start, or a sample) when the range closes: off at once, CUPTI may go the next window.
  GovernorStep st = govern(GovernorState{}, paused, k);
  ASSERT_FALSE(st.next.on);
  EXPECT_TRUE(st.changed);
  EXPECT_EQ(st.next.reason, GateReason::Paused);
  EXPECT_FALSE(st.may_detach);  // a copy made just before may still be in flight
  const uint32_t left = st.next.off_left;
  EXPECT_EQ(left, k.sample_every - 1);
  for (int i = 0; i < 100; ++i) {  // however long the pause, it does not count toward the next sample
    st = govern(st.next, paused, k);
    EXPECT_FALSE(st.changed);
    EXPECT_TRUE(st.may_detach);
  }
  EXPECT_EQ(st.next.off_left, left);
  // Back in the range, asynchronous copies wait for the next sample (no attach at every resume).
  GovernorState s = st.next;
  std::vector<bool> on = run(std::vector<CopyWindow>(left, async(10)), s, k);
  EXPECT_EQ(std::count(on.begin(), on.end(), true), 1);
  EXPECT_TRUE(on.back());
  EXPECT_EQ(s.reason, GateReason::Sample);
  // Records already off at the pause stay off, their count kept.
  GovernorState off;
  off.on = false;
  off.reason = GateReason::CostCap;
  off.off_left = 7;
  st = govern(off, paused, k);
  EXPECT_FALSE(st.next.on);
  EXPECT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_EQ(st.next.off_left, 7u);
  EXPECT_TRUE(st.may_detach);
}

// A window without asynchronous copies lets CUPTI go a window after the
// records went off; one with them only after async_detach_after windows of a
// cost cap (a copy issued with the records on could still be in flight).
TEST(CuptiGovernor, DetachOnlyAWindowAfterTheRecordsWentOff) {
  GovernorState s;
  GovernorStep st = govern(s, sync(10), {});
  EXPECT_FALSE(st.may_detach);  // on
  st = govern(st.next, sync(10), {});
  ASSERT_FALSE(st.next.on);
  EXPECT_FALSE(st.may_detach);  // the window that turned them off
  st = govern(st.next, sync(10), {});
  EXPECT_FALSE(st.next.on);
  EXPECT_TRUE(st.may_detach);
  // Idle windows while off: nothing can be in flight that was not before.
  EXPECT_TRUE(govern(st.next, {kWindow, 0, 0}, {}).may_detach);
  // Records on and idle: nothing to detach.
  EXPECT_FALSE(govern(GovernorState{}, {kWindow, 0, 0}, {}).may_detach);
}

TEST(CuptiGovernor, NoDetachInAWindowWithAsyncCopies) {
  // A storm of asynchronous copies puts the records off by cost...
  GovernorState s;
  GovernorStep st = govern(s, {kWindow, 0, 100'000}, {});
  ASSERT_FALSE(st.next.on);
  ASSERT_EQ(st.next.reason, GateReason::CostCap);
  EXPECT_FALSE(st.may_detach);
  // ...and in the next window with them, CUPTI stays attached.
  st = govern(st.next, {kWindow, 0, 100'000}, {});
  EXPECT_FALSE(st.next.on);
  EXPECT_FALSE(st.may_detach);
  // A window of synchronous copies only: now it may go.
  st = govern(st.next, {kWindow, 100'000, 0}, {});
  EXPECT_FALSE(st.next.on);
  EXPECT_TRUE(st.may_detach);
}

TEST(CuptiGovernor, NoDetachInTheWindowThatTurnsTheRecordsOn) {
  GovernorState s;
  s.on = false;
  s.reason = GateReason::SyncOnly;
  s.off_left = 1;
  GovernorStep st = govern(s, sync(10), {});
  EXPECT_TRUE(st.next.on);
  EXPECT_FALSE(st.may_detach);
  s.off_left = 5;
  st = govern(s, async(1), {});  // async copies want them back at once
  EXPECT_TRUE(st.next.on);
  EXPECT_FALSE(st.may_detach);
}

TEST(CuptiGovernor, AsyncCopiesOverTheBudgetFromTimedSitesSkipTheSamples) {
  // A training loop recorded from the middle (a capture range): the records
  // went off at the pause before any of its copies was recorded, so its
  // first windows bring sites never timed, and the sample comes on schedule;
  // it times them (over the budget: off at once, no doubling, it found
  // something). After it every copy comes from a timed site: the samples are
  // skipped, each skip a doubling, up to the longest gap's.
  GovernorSettings k;
  const uint64_t calls = static_cast<uint64_t>(0.04 * kWindow / k.record_cost_ns);
  GovernorState s;
  GovernorStep st = govern(s, CopyWindow{kWindow, 0, 0, 0, true}, k);  // paused at the start
  ASSERT_EQ(st.next.reason, GateReason::Paused);
  s = st.next;
  std::vector<CopyWindow> ws(19, async(calls));  // sites never timed
  ws.push_back(fresh(async(calls), 3));           // the sample times them
  ws.resize(2600, timed(async(calls)));
  std::vector<bool> on = run(ws, s, k);
  EXPECT_EQ(on_windows(on), (std::vector<size_t>{18, 2416}));
  EXPECT_EQ(s.reason, GateReason::CostCap);
  EXPECT_EQ(s.backoff, k.max_backoff);
  // A site never timed during a gap: its end brings the sample.
  GovernorState g;
  g.on = false;
  g.reason = GateReason::CostCap;
  g.off_left = 3;
  g.backoff = 2;
  on = run({timed(async(calls)), async(calls), timed(async(calls))}, g, k);
  EXPECT_EQ(on, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(g.reason, GateReason::Sample);
  // So does a window of synchronous copies only: the mix changed (a program
  // alternating phases has its asynchronous phases sampled as before).
  GovernorState m;
  m.on = false;
  m.reason = GateReason::CostCap;
  m.off_left = 3;
  on = run({timed(async(calls)), timed(sync(10)), timed(async(calls))}, m, k);
  EXPECT_EQ(on, (std::vector<bool>{false, false, true}));
}

TEST(CuptiGovernor, SyncCopiesFromTimedSitesSkipTheSamples) {
  // bandwidthTest's loop: one call site per direction, timed in the first
  // windows. Once off, its copies all come from that site: every sample is
  // skipped (a doubling each) up to the longest gap's, which is taken.
  GovernorSettings k;
  GovernorState s;
  std::vector<CopyWindow> ws{fresh(sync(2)), timed(sync(2))};
  ws.resize(2600, timed(sync(2)));
  std::vector<bool> on = run(ws, s, k);
  // Off from window 1; gaps of 19, 38, ... 608 windows skipped, then 1200.
  EXPECT_EQ(on_windows(on), (std::vector<size_t>{0, 2398}));
  EXPECT_EQ(s.reason, GateReason::SyncOnly);
  EXPECT_EQ(s.backoff, k.max_backoff);
  // The other direction's site, never timed, during a gap: its end brings the sample.
  GovernorState g;
  g.on = false;
  g.reason = GateReason::SyncOnly;
  g.off_left = 3;
  g.backoff = 2;
  on = run({timed(sync(2)), sync(2), timed(sync(2))}, g, k);
  EXPECT_EQ(on, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(g.reason, GateReason::Sample);
}

TEST(TimedSites, CountsNewSitesAndCopiesFromTimedOnes) {
  TimedSites t;
  CopyWindow w = async(4);
  t.count(1, true, w);   // first record from site 1: learnt
  t.count(1, true, w);   // again: a repeat
  t.count(2, false, w);  // site 2, records off, never timed
  t.count(1, false, w);  // site 1, records off: timed before
  EXPECT_EQ(w.new_sites, 1u);
  EXPECT_EQ(w.timed_calls, 2u);
  EXPECT_EQ(t.size(), 1u);
  t.clear();
  CopyWindow v = async(1);
  t.count(1, false, v);
  EXPECT_EQ(v.timed_calls, 0u) << "cleared: site 1 is new again";
}

// The window after the records went off for repeats begins with copies made
// before the change reached the hooks: still flagged for a record, from sites
// already timed. They are repeats, not copies from an unseen site, and must
// not turn the records on again (the big-batch PyTorch loop on the H200 did,
// one window after each change to off, until this counted them).
TEST(TimedSites, CopiesStillRecordedAfterTheChangeToOffAreNotUnseen) {
  TimedSites t;
  GovernorState s;
  GovernorSettings k;
  // On-windows: the first learns the site, then repeat_windows repeat it; the last turns them off.
  for (uint32_t i = 0; i <= k.repeat_windows; ++i) {
    CopyWindow w = async(5);
    for (int c = 0; c < 5; ++c) t.count(7, true, w);
    s = govern(s, w, k).next;
  }
  ASSERT_FALSE(s.on);
  ASSERT_EQ(s.reason, GateReason::Repeats);
  CopyWindow after = async(5);
  for (int c = 0; c < 2; ++c) t.count(7, true, after);   // made before the change took effect
  for (int c = 0; c < 3; ++c) t.count(7, false, after);  // made with the records off
  EXPECT_EQ(after.timed_calls, 5u);
  const GovernorStep st = govern(s, after, k);
  EXPECT_FALSE(st.next.on) << "turned on again by copies from a site already timed";
  EXPECT_FALSE(st.next.unseen);
}

}  // namespace
}  // namespace cuxfer::shim
