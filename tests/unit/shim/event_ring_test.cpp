// EventRing (SPSC, drop when full) and RingRegistry (reuse of free rings).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "record/event_ring.h"

namespace cuxfer::shim {
namespace {

trace::Event ev(uint32_t seq) {
  trace::Event e{};
  e.correlation_id = seq;
  e.bytes = seq * 3ull;
  e.t_enter_ns = seq;
  e.t_exit_ns = seq + 1;
  return e;
}

std::vector<uint32_t> seqs(const std::vector<trace::Event>& v) {
  std::vector<uint32_t> s;
  for (const auto& e : v) s.push_back(e.correlation_id);
  return s;
}

TEST(EventRing, PushDrainInOrder) {
  EventRing r(8);
  EXPECT_TRUE(r.empty());
  for (uint32_t i = 1; i <= 5; ++i) ASSERT_TRUE(r.push(ev(i)));
  EXPECT_FALSE(r.empty());
  std::vector<trace::Event> out;
  EXPECT_EQ(r.drain(out), 5u);
  EXPECT_EQ(seqs(out), (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(out[3].bytes, 12u);  // whole events travel, not just ids
  EXPECT_EQ(out[3].t_exit_ns, 5u);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.drain(out), 0u);  // nothing new
  EXPECT_EQ(out.size(), 5u);
  EXPECT_EQ(r.take_dropped(), 0u);
}

TEST(EventRing, DrainAppends) {
  EventRing r(4);
  std::vector<trace::Event> out{ev(100)};
  ASSERT_TRUE(r.push(ev(1)));
  EXPECT_EQ(r.drain(out), 1u);
  EXPECT_EQ(seqs(out), (std::vector<uint32_t>{100, 1}));
}

TEST(EventRing, FullRingDropsAndCounts) {
  EventRing r(8);
  for (uint32_t i = 1; i <= 8; ++i) ASSERT_TRUE(r.push(ev(i)));
  EXPECT_FALSE(r.push(ev(9)));
  EXPECT_FALSE(r.push(ev(10)));
  EXPECT_FALSE(r.push(ev(11)));
  EXPECT_EQ(r.take_dropped(), 3u);
  EXPECT_EQ(r.take_dropped(), 0u);  // taking resets the count
  std::vector<trace::Event> out;
  EXPECT_EQ(r.drain(out), 8u);
  EXPECT_EQ(seqs(out), (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));  // the oldest are kept
  // Room again after the drain.
  for (uint32_t i = 12; i <= 19; ++i) EXPECT_TRUE(r.push(ev(i)));
  EXPECT_FALSE(r.push(ev(20)));
  EXPECT_EQ(r.take_dropped(), 1u);
  out.clear();
  EXPECT_EQ(r.drain(out), 8u);
  EXPECT_EQ(out.front().correlation_id, 12u);
  EXPECT_EQ(out.back().correlation_id, 19u);
}

TEST(EventRing, WrapsAroundInOrder) {
  EventRing r(4);
  std::vector<trace::Event> out;
  uint32_t next = 1, expect = 1;
  for (int round = 0; round < 10; ++round) {
    int n = 1 + round % 4;  // 1..4 events, so head crosses the end at different points
    for (int i = 0; i < n; ++i) ASSERT_TRUE(r.push(ev(next++)));
    out.clear();
    ASSERT_EQ(r.drain(out), static_cast<size_t>(n));
    for (const auto& e : out) EXPECT_EQ(e.correlation_id, expect++);
  }
  EXPECT_EQ(r.take_dropped(), 0u);
}

TEST(EventRing, ResetForgetsEverything) {
  EventRing r(4);
  for (uint32_t i = 1; i <= 6; ++i) r.push(ev(i));  // 4 kept, 2 dropped
  r.reset();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.take_dropped(), 0u);
  std::vector<trace::Event> out;
  EXPECT_EQ(r.drain(out), 0u);
  // Reusable: full capacity available again, in order.
  for (uint32_t i = 21; i <= 24; ++i) ASSERT_TRUE(r.push(ev(i)));
  EXPECT_FALSE(r.push(ev(25)));
  EXPECT_EQ(r.drain(out), 4u);
  EXPECT_EQ(seqs(out), (std::vector<uint32_t>{21, 22, 23, 24}));
  EXPECT_EQ(r.take_dropped(), 1u);
}

TEST(EventRing, ResetAfterPartialDrainAndWrap) {
  EventRing r(4);
  std::vector<trace::Event> out;
  for (uint32_t i = 1; i <= 3; ++i) r.push(ev(i));
  r.drain(out);
  for (uint32_t i = 4; i <= 6; ++i) r.push(ev(i));  // wraps
  r.reset();
  out.clear();
  for (uint32_t i = 7; i <= 10; ++i) ASSERT_TRUE(r.push(ev(i)));
  EXPECT_EQ(r.drain(out), 4u);
  EXPECT_EQ(seqs(out), (std::vector<uint32_t>{7, 8, 9, 10}));
}

// One producer, one consumer, a small ring: the producer retries when the
// ring is full, so every event must arrive exactly once and in order.
TEST(EventRing, SpscEveryEventOnceInOrder) {
  constexpr uint32_t kEvents = 100000;
  EventRing r(256);
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint32_t i = 1; i <= kEvents; ++i)
      while (!r.push(ev(i))) std::this_thread::yield();
    done.store(true);
  });
  std::vector<trace::Event> got;
  got.reserve(kEvents);
  for (;;) {
    bool finished = done.load();
    size_t n = r.drain(got);
    if (finished && n == 0) break;
    if (n == 0) std::this_thread::yield();
  }
  producer.join();
  ASSERT_EQ(got.size(), kEvents);
  for (uint32_t i = 0; i < kEvents; ++i) {
    ASSERT_EQ(got[i].correlation_id, i + 1) << "at " << i;
    ASSERT_EQ(got[i].bytes, (i + 1) * 3ull) << "torn event at " << i;
  }
  EXPECT_TRUE(r.empty());
}

// The producer never waits: what arrives is in order and without
// duplicates, and arrived + dropped accounts for every push.
TEST(EventRing, SpscLossyAccountsForEveryPush) {
  constexpr uint32_t kEvents = 100000;
  EventRing r(64);
  std::atomic<bool> done{false};
  uint64_t pushed_ok = 0;
  std::thread producer([&] {
    for (uint32_t i = 1; i <= kEvents; ++i) pushed_ok += r.push(ev(i));
    done.store(true);
  });
  std::vector<trace::Event> got;
  uint64_t dropped = 0;
  for (;;) {
    bool finished = done.load();
    size_t n = r.drain(got);
    dropped += r.take_dropped();
    if (finished && n == 0) break;
  }
  producer.join();
  dropped += r.take_dropped();
  EXPECT_EQ(got.size(), pushed_ok);
  EXPECT_EQ(got.size() + dropped, kEvents);
  for (size_t i = 1; i < got.size(); ++i)
    ASSERT_LT(got[i - 1].correlation_id, got[i].correlation_id) << "at " << i;
  for (const auto& e : got) ASSERT_EQ(e.bytes, e.correlation_id * 3ull);
}

// The registry never frees rings (they live as long as the process); tests
// free them by hand so that leak checkers stay quiet.
void free_rings(RingRegistry& reg) {
  std::vector<EventRing*> all;
  reg.for_each([&](EventRing& r) { all.push_back(&r); });
  for (EventRing* r : all) delete r;
}

size_t count_rings(RingRegistry& reg) {
  size_t n = 0;
  reg.for_each([&](EventRing&) { ++n; });
  return n;
}

TEST(RingRegistry, AcquireAllocatesThenReusesFreeRings) {
  RingRegistry reg(1024);
  EXPECT_EQ(count_rings(reg), 0u);
  EventRing* a = reg.acquire();
  EventRing* b = reg.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);  // both owned: the second thread gets a new ring
  EXPECT_EQ(a->state.load(), EventRing::kOwned);
  EXPECT_EQ(count_rings(reg), 2u);

  // An orphaned ring (thread exited, not yet drained) is not reused.
  a->state.store(EventRing::kOrphaned);
  EventRing* c = reg.acquire();
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  EXPECT_EQ(count_rings(reg), 3u);

  // Once the writer has drained it and marked it free, it is reused.
  a->state.store(EventRing::kFree);
  EventRing* d = reg.acquire();
  EXPECT_EQ(d, a);
  EXPECT_EQ(d->state.load(), EventRing::kOwned);
  EXPECT_EQ(count_rings(reg), 3u);

  // A reused ring has the registry's capacity.
  std::vector<trace::Event> out;
  for (uint32_t i = 0; i < 1024; ++i) ASSERT_TRUE(d->push(ev(i)));
  EXPECT_FALSE(d->push(ev(9999)));
  EXPECT_EQ(d->drain(out), 1024u);
  free_rings(reg);
}

TEST(RingRegistry, ConcurrentAcquireGivesDistinctRingsAndReusesFreeOnes) {
  constexpr int kThreads = 8;
  RingRegistry reg(1024);
  auto acquire_all = [&] {
    std::vector<EventRing*> got(kThreads);
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i) ts.emplace_back([&, i] { got[i] = reg.acquire(); });
    for (auto& t : ts) t.join();
    return got;
  };
  auto first = acquire_all();
  std::set<EventRing*> first_set(first.begin(), first.end());
  EXPECT_EQ(first_set.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(first_set.count(nullptr), 0u);
  EXPECT_EQ(count_rings(reg), static_cast<size_t>(kThreads));

  for (EventRing* r : first) r->state.store(EventRing::kFree);
  auto second = acquire_all();
  std::set<EventRing*> second_set(second.begin(), second.end());
  EXPECT_EQ(second_set, first_set);  // each free ring went to exactly one thread
  EXPECT_EQ(count_rings(reg), static_cast<size_t>(kThreads));
  for (EventRing* r : second) EXPECT_EQ(r->state.load(), EventRing::kOwned);
  free_rings(reg);
}

// The shim's own time (record/hook_time.h): every call counted, about one in
// kHookTimeEvery timed, at random gaps (a fixed stride aliased with the ring's
// pages: every timed call was the one that faulted a new page in), the sums
// kept across a recycling reset() until a fork child's forget_hook_time().
TEST(EventRing, CountsHookCallsAndTimesAboutOneInSixtyFourAtRandomGaps) {
  EventRing ring(16);
  constexpr uint32_t kCalls = 1000 * EventRing::kHookTimeEvery;
  uint32_t timed = 0, last = 0, max_gap = 0, stride_hits = 0;
  for (uint32_t i = 1; i <= kCalls; ++i) {
    if (!ring.count_hook_call()) continue;
    if (timed == 0) {
      EXPECT_EQ(i, EventRing::kHookTimeEvery) << "the first gap is the mean";
    }
    max_gap = std::max(max_gap, i - last);
    stride_hits += i % EventRing::kHookTimeEvery == 0;
    last = i;
    ring.add_hook_time(100);
    ++timed;
  }
  EXPECT_EQ(ring.hook_calls(), kCalls);
  EXPECT_EQ(ring.hook_timed(), timed);
  EXPECT_EQ(ring.hook_ns(), 100ull * timed);
  EXPECT_GT(timed, 900u);
  EXPECT_LT(timed, 1100u);
  EXPECT_LE(max_gap, 2 * EventRing::kHookTimeEvery - 1);
  EXPECT_LT(stride_hits, timed / 8) << "timed calls must not fall on a fixed stride";
  // Recycled for another thread: the sums stay (the exited thread's calls
  // were made); only a fork child forgets them.
  ring.reset();
  EXPECT_EQ(ring.hook_calls(), kCalls);
  EXPECT_EQ(ring.hook_timed(), timed);
  ring.forget_hook_time();
  EXPECT_EQ(ring.hook_calls(), 0u);
  EXPECT_EQ(ring.hook_timed(), 0u);
  EXPECT_EQ(ring.hook_ns(), 0u);
  EXPECT_EQ(ring.hook_max_ns(), 0u);
  EXPECT_EQ(ring.hook_hist(6), 0u);
}

}  // namespace
}  // namespace cuxfer::shim
