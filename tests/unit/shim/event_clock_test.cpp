// core/event_clock.h: when the time-stamp counter stamps events, and how the
// writer turns its ticks into CLOCK_MONOTONIC nanoseconds.
#include "core/event_clock.h"

#include <gtest/gtest.h>

#include <thread>

using namespace cuxfer::shim;
using namespace cuxfer::shim::event_clock;

namespace {

TscFacts good() {
  TscFacts f;
  f.x86_64 = true;
  f.invariant = true;
  f.clocksource = "tsc";
  f.allowed = true;
  return f;
}

}  // namespace

TEST(EventClock, TicksOnlyWhereTheKernelKeepsTimeOnAnInvariantCounter) {
  std::string why;
  EXPECT_TRUE(tsc_usable(good(), why));
  EXPECT_TRUE(why.empty());

  TscFacts f = good();
  f.allowed = false;
  EXPECT_FALSE(tsc_usable(f, why));
  EXPECT_EQ(why, "CUXFER_TSC=0");

  f = good();
  f.invariant = false;
  EXPECT_FALSE(tsc_usable(f, why));
  EXPECT_NE(why.find("not invariant"), std::string::npos);

  f = good();
  f.clocksource = "kvm-clock";
  EXPECT_FALSE(tsc_usable(f, why));
  EXPECT_NE(why.find("kvm-clock"), std::string::npos);

  f.clocksource.clear();
  EXPECT_FALSE(tsc_usable(f, why));
  EXPECT_NE(why.find("unknown"), std::string::npos);

  f = good();
  f.x86_64 = false;
  EXPECT_FALSE(tsc_usable(f, why));
  EXPECT_NE(why.find("x86-64"), std::string::npos);
}

TEST(EventClock, NanosecondStampsPassThrough) {
  StampConverter c(false);
  c.add({100, 1000});
  c.add({200, 2000});
  EXPECT_EQ(c.to_ns(123456789), 123456789u);
}

TEST(EventClock, InterpolatesBetweenThePairsAroundAStamp) {
  StampConverter c(true);
  // 2 ticks a nanosecond, then 4 (a rate that changes between pairs is followed).
  c.add({1'000, 10'000});
  c.add({3'000, 11'000});
  c.add({7'000, 12'000});
  EXPECT_EQ(c.to_ns(1'000), 10'000u);
  EXPECT_EQ(c.to_ns(2'000), 10'500u);
  EXPECT_EQ(c.to_ns(3'000), 11'000u);
  EXPECT_EQ(c.to_ns(5'000), 11'500u);
  EXPECT_EQ(c.to_ns(7'000), 12'000u);
}

TEST(EventClock, ExtrapolatesOutsideThePairsAtTheWholeRate) {
  StampConverter c(true);
  c.add({1'000, 10'000});
  c.add({2'000, 10'400});
  c.add({5'000, 11'000});  // 4,000 ticks in 1,000 ns over all the pairs
  EXPECT_EQ(c.to_ns(9'000), 12'000u);  // after the last pair, from it
  EXPECT_EQ(c.to_ns(0), 9'750u);       // before the first, from it
  EXPECT_EQ(c.to_ns(0), c.to_ns(0));
  StampConverter early(true);
  early.add({1'000'000, 100});
  early.add({2'000'000, 200});
  EXPECT_EQ(early.to_ns(0), 0u);  // never below zero
}

TEST(EventClock, StaysWithinANanosecondAtARealMachinesScale) {
  // A 2.1 GHz counter, days into the machine's uptime, pairs a 50 ms write cycle apart, with a
  // slightly different rate in each interval (the kernel's adjustments).
  StampConverter c(true);
  const uint64_t t0 = 400'000'000'000'000ull, n0 = 190'476'190'476'190ull;
  const double rates[] = {1 / 2.1, 1 / 2.1000021, 1 / 2.0999979};
  uint64_t t = t0;
  double n = static_cast<double>(n0);
  std::vector<std::pair<uint64_t, double>> at{{t, n}};
  c.add({t, n0});
  for (double r : rates) {
    t += 105'000'000;  // 50 ms of ticks
    n += 105'000'000 * r;
    c.add({t, static_cast<uint64_t>(n + 0.5)});
    at.emplace_back(t, n);
  }
  for (size_t i = 0; i + 1 < at.size(); ++i)
    for (uint64_t step : {1ull, 33'333'333ull, 104'999'999ull}) {
      const uint64_t stamp = at[i].first + step;
      const double want = at[i].second + static_cast<double>(step) * rates[i];
      EXPECT_NEAR(static_cast<double>(c.to_ns(stamp)), want, 1.0) << "interval " << i << " step " << step;
    }
}

TEST(EventClock, IgnoresAPairThatDoesNotMoveForwardAndKeepsTheLastOnes) {
  StampConverter c(true);
  c.add({1'000, 10'000});
  c.add({1'000, 10'500});  // same tick
  c.add({900, 11'000});    // earlier tick
  c.add({2'000, 10'000});  // same nanosecond
  EXPECT_EQ(c.pairs(), 1u);
  for (uint64_t i = 1; i <= 2 * StampConverter::kKept; ++i) c.add({1'000 + 1'000 * i, 10'000 + 100 * i});
  EXPECT_EQ(c.pairs(), StampConverter::kKept);
  EXPECT_EQ(c.to_ns(1'500), 10'050u);  // before the pairs kept: extrapolated at their rate, still exact here
}

TEST(EventClock, ConvertedStampsAgreeWithTheClockOnThisMachine) {
  const TscFacts facts = probe(true);
  std::string why;
  if (!tsc_usable(facts, why)) GTEST_SKIP() << "event stamps are nanoseconds here: " << why;
  StampConverter c(true);
  c.add(read_pair());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t before = now_ns();
  _mm_lfence();
  const uint64_t tick = __rdtsc();
  const uint64_t after = now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.add(read_pair());
  const uint64_t ns = c.to_ns(tick);
  // Within the bracket, give or take the pairs' own reads (tens of microseconds at most, on a loaded machine; a wrong rate or unit is off by milliseconds).
  EXPECT_GE(ns + 50'000, before);
  EXPECT_LE(ns, after + 50'000);
}

TEST(EventClock, SpansAtTheMeasuredRate) {
  EXPECT_EQ(rate_q32({0, 0}, {2'000, 1'000}), uint64_t{1} << 31);  // half a nanosecond a tick
  EXPECT_EQ(rate_q32({5, 5}, {5, 9}), 0u);                          // no ticks between them
  const bool saved_tsc = g_hot_line.tsc_stamps;
  const uint64_t saved_rate = g_hot_line.ns_per_tick_q32;
  g_hot_line.tsc_stamps = false;
  EXPECT_EQ(span_ns(100, 350), 250u);  // nanosecond stamps
  EXPECT_EQ(span_ns(350, 100), 0u);    // never negative
  g_hot_line.tsc_stamps = true;
  g_hot_line.ns_per_tick_q32 = uint64_t{1} << 31;
  EXPECT_EQ(span_ns(100, 350), 125u);
  g_hot_line.tsc_stamps = saved_tsc;
  g_hot_line.ns_per_tick_q32 = saved_rate;
}

TEST(EventClock, InitMeasuresTheRateBeforeTicksAreUsed) {
  const std::string line = init(true);
  std::string why;
  if (!tsc_usable(probe(true), why)) {
    EXPECT_FALSE(g_hot_line.tsc_stamps);
    EXPECT_NE(line.find(why), std::string::npos) << line;
    GTEST_SKIP() << "event stamps are nanoseconds here: " << why;
  }
  ASSERT_TRUE(g_hot_line.tsc_stamps) << line;
  // Within 1 % of what a 20 ms bracket says (the init's own 200 us measure is far better than that).
  const Pair a = read_pair();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const Pair b = read_pair();
  const double measured = static_cast<double>(rate_q32(a, b)), kept = static_cast<double>(g_hot_line.ns_per_tick_q32);
  EXPECT_NEAR(kept / measured, 1.0, 0.01);
  EXPECT_EQ(init(false).find("CUXFER_TSC=0") != std::string::npos, true);
  EXPECT_FALSE(g_hot_line.tsc_stamps);
}
