// The trace note saying what the shim's own work cost (record/hook_time.h).
#include "record/hook_time.h"

#include <gtest/gtest.h>

namespace cuxfer::shim {
namespace {

TEST(HookTimeNote, NothingTimedSaysNothing) {
  HookTime t;
  t.calls = 63;  // fewer than one sample's worth
  EXPECT_EQ(hook_time_note(t, 1'000'000'000), "");
}

TEST(HookTimeNote, SumsTheRings) {
  EventRing a(16), b(16);
  for (int i = 0; i < 100; ++i) a.count_hook_call();
  for (int i = 0; i < 50; ++i) b.count_hook_call();
  a.add_hook_time(200);
  a.add_hook_time(300);
  b.add_hook_time(5000);
  HookTime t;
  t.add(a);
  t.add(b);
  EXPECT_EQ(t.calls, 150u);
  EXPECT_EQ(t.timed, 3u);
  EXPECT_EQ(t.ns, 5500u);
  EXPECT_EQ(t.max_ns, 5000u);
  EXPECT_EQ(t.hist[7], 1u);   // 200 in [128, 256)
  EXPECT_EQ(t.hist[8], 1u);   // 300 in [256, 512)
  EXPECT_EQ(t.hist[12], 1u);  // 5000 in [4096, 8192)
}

TEST(HookTimeNote, MeanTotalShareAndDistribution) {
  HookTime t;
  t.calls = 192;
  t.timed = 3;
  t.ns = 5500;
  t.max_ns = 5000;
  t.hist[7] = t.hist[8] = t.hist[12] = 1;
  // Mean 1833 ns a call, times 192 calls: 352 us, 0.04 % of 1 s.
  EXPECT_EQ(hook_time_note(t, 1'000'000'000),
            "overhead: cuxfer's own work in 192 intercepted calls took 1.83 us a call on average (median "
            "256 ns-512 ns, 99th percentile 4.1 us-8.19 us, longest 5 us; 3 calls timed whole), 352 us in all, "
            "0.04 % of the 1.000 s recorded (summed over threads); CUPTI's cost, when on, is inside the calls' "
            "own times");
  // Under a capture range only the ranges' calls are counted: the share is of the ranges' time.
  EXPECT_NE(hook_time_note(t, 250'000'000, true).find("0.14 % of the 0.250 s inside the capture ranges (summed"),
            std::string::npos)
      << hook_time_note(t, 250'000'000, true);
}

TEST(HookTimeNote, TheCallStacksPart) {
  EventRing r(16);
  for (int i = 0; i < 128; ++i) r.count_hook_call();
  r.add_hook_time(2000, {1500, 300, 900});
  r.add_hook_time(1000, {500, 100, 300});
  HookTime t;
  t.add(r);
  EXPECT_EQ(t.stack_ns, 2000u);
  EXPECT_EQ(t.python_ns, 400u);
  EXPECT_EQ(t.native_ns, 1200u);
  EXPECT_EQ(hook_time_note(t, 1'000'000'000),
            "overhead: cuxfer's own work in 128 intercepted calls took 1.5 us a call on average (median "
            "512 ns-1.02 us, 99th percentile 1.02 us-2.05 us, longest 2 us; 2 calls timed whole), 192 us in all, "
            "0.02 % of the 1.000 s recorded (summed over threads), of it capturing call stacks 1 us a call (Python "
            "frames 200 ns, native frames 600 ns, matching and interning 200 ns); "
            "CUPTI's cost, when on, is inside the calls' own times");
  r.forget_hook_time();
  EXPECT_EQ(r.hook_stack_ns(), 0u);
  EXPECT_EQ(r.hook_python_ns(), 0u);
  EXPECT_EQ(r.hook_native_ns(), 0u);
}

TEST(HookTimeNote, ZeroAndHugeSamplesStayInTheHistogram) {
  EventRing r(16);
  r.add_hook_time(0);
  r.add_hook_time(~0ull);
  EXPECT_EQ(r.hook_hist(0), 1u);
  EXPECT_EQ(r.hook_hist(EventRing::kHookHistBuckets - 1), 1u);
}

TEST(HookTime, AWindowsShareFromTheTimedCalls) {
  // 640 calls, 10 of them timed at 2 us each: 1.28 ms of the shim's work.
  const HookSums last{1000, 20, 30000}, now{1640, 30, 50000};
  EXPECT_EQ(estimate_hook_ns(now, last), 1'280'000u);
  // Too few timed in the window: the mean of all so far (50 us / 30 a call).
  const HookSums few{1100, 22, 34000};
  EXPECT_EQ(estimate_hook_ns(few, last), static_cast<uint64_t>(34000.0 / 22 * 100));
  // Nothing timed yet, and no calls.
  EXPECT_EQ(estimate_hook_ns(HookSums{5, 0, 0}, HookSums{}), 0u);
  EXPECT_EQ(estimate_hook_ns(last, last), 0u);
  // A fork child's sums start again below its parent's: counted from zero.
  EXPECT_EQ(estimate_hook_ns(HookSums{64, 8, 8000}, last), 64'000u);
}

}  // namespace
}  // namespace cuxfer::shim
