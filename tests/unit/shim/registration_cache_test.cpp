// RegistrationCache against a fake driver that enforces what the real one
// does: no overlapping registrations, unregister only what was registered,
// and (optionally) one lock for every register/unregister of the process.
#include "rewrite/registration_cache.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cuxfer::shim::rewrite {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr int kAlreadyRegistered = 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
constexpr int kNotRegistered = 713;
using namespace std::chrono_literals;

// Holds cuMemHostRegister calls until released: "another thread is inside a
// slow registration".
class Gate {
 public:
  void close() {
    std::lock_guard<std::mutex> l(m_);
    open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> l(m_);
    open_ = true;
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> l(m_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    --waiting_;
  }
  // Waits until a registration is held here.
  bool wait_for_waiter() {
    std::unique_lock<std::mutex> l(m_);
    return cv_.wait_for(l, 10s, [&] { return waiting_ > 0; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

class FakeDriver : public RegistrationOps {
 public:
  int register_range(uint64_t b, uint64_t n) override {
    std::unique_lock<std::mutex> serial(serial_mu, std::defer_lock);
    if (serialised) serial.lock();  // the real driver: one register/unregister at a time
    if (cache) check_not_covered(b, "register");
    if (gate) gate->pass();
    std::lock_guard<std::mutex> lock(mu);
    if (fail_next) return fail_next = false, 2;  // CUDA_ERROR_OUT_OF_MEMORY
    for (auto& [rb, re] : live)
      if (rb < b + n && b < re) return kAlreadyRegistered;
    live[b] = b + n;
    mapping_gen_at_register[b] = mapping_gen.load();
    log.push_back("reg " + std::to_string(b / MiB) + "+" + std::to_string(n / MiB));
    return 0;
  }
  int unregister_range(uint64_t b) override {
    std::unique_lock<std::mutex> serial(serial_mu, std::defer_lock);
    if (serialised) serial.lock();
    if (cache) check_not_covered(b, "unregister");
    std::lock_guard<std::mutex> lock(mu);
    if (fail_unregisters > 0) {  // the driver refuses and keeps the pages pinned
      --fail_unregisters;
      return 1;                  // CUDA_ERROR_INVALID_VALUE
    }
    if (!live.erase(b)) return kNotRegistered;
    unregistered_by[b] = std::this_thread::get_id();
    log.push_back("unreg " + std::to_string(b / MiB));
    return 0;
  }
  void on_registered(uint64_t b, uint64_t e) override { marked += e - b; }
  void on_unregistered(uint64_t b, uint64_t e) override { marked -= e - b; }
  void on_unregister_failed(uint64_t, uint64_t, int status, bool given_up) override {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(std::string(given_up ? "gave up " : "failed ") + std::to_string(status));
  }
  bool process_wide() const override { return process; }

  // While the driver holds or drops a registration, the cache must not
  // answer Covers for it (a copy would trust it).
  void check_not_covered(uint64_t b, const char* what) {
    if (cache->peek(b, 1) == Cover::Covers) {
      ++invariant_errors;
      std::fprintf(stderr, "cache answers Covers at %#lx during %s\n", static_cast<unsigned long>(b), what);
    }
  }
  uint64_t pinned() {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (auto& [b, e] : live) n += e - b;
    return n;
  }
  bool registered(uint64_t p) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [b, e] : live)
      if (b <= p && p < e) return true;
    return false;
  }
  // A copy of [p, p+n) reaching the driver: true when a registration made
  // before the memory was last replaced still overlaps it (the driver would
  // DMA the old pages).
  bool copy_would_be_stale(uint64_t p, uint64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [b, e] : live)
      if (b < p + n && p < e && mapping_gen_at_register[b] < mapping_gen.load()) return true;
    return false;
  }
  std::vector<std::string> log_copy() {
    std::lock_guard<std::mutex> lock(mu);
    return log;
  }

  std::mutex mu, serial_mu;
  std::map<uint64_t, uint64_t> live;
  std::map<uint64_t, uint64_t> mapping_gen_at_register;
  std::map<uint64_t, std::thread::id> unregistered_by;
  std::vector<std::string> log;
  std::atomic<int64_t> marked{0};
  std::atomic<uint64_t> mapping_gen{0};  // bumped when the test "unmaps and maps again"
  std::atomic<int> invariant_errors{0};
  bool fail_next = false;
  int fail_unregisters = 0;  // the next this many unregisters fail
  bool serialised = false;
  bool process = false;
  Gate* gate = nullptr;
  RegistrationCache* cache = nullptr;  // for check_not_covered
};

TEST(RegistrationCache, RegistersPageRoundedAndLooksUp) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  EXPECT_EQ(c.lookup(10 * MiB, 100), Cover::None);
  AddResult r = c.add(10 * MiB + 100, 12 * MiB + 5);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 12 * MiB + 4096);
  EXPECT_EQ(c.lookup(10 * MiB + 100, 2 * MiB), Cover::Covers);
  EXPECT_EQ(c.lookup(12 * MiB, 4096), Cover::Covers);
  EXPECT_EQ(c.lookup(12 * MiB, 8192), Cover::Touches);  // runs past the registration
  EXPECT_EQ(c.lookup(9 * MiB, 2 * MiB), Cover::Touches);
  EXPECT_EQ(c.lookup(20 * MiB, 1), Cover::None);
  EXPECT_EQ(drv.marked, int64_t(2 * MiB + 4096));
  EXPECT_FALSE(c.empty());
}

// add() in two steps, the second on another thread (the background
// registrar): between them the range answers Touches and the driver has not
// been called; a free() between them withdraws it, and completing it then
// makes no driver call at all.
TEST(RegistrationCache, ReservedThenCompletedOnAnotherThread) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  drv.cache = &c;
  RegistrationCache::Reservation res = c.reserve(10 * MiB, 14 * MiB);
  ASSERT_TRUE(res.ok);
  EXPECT_EQ(c.lookup(10 * MiB, 4 * MiB), Cover::Touches);
  EXPECT_EQ(drv.pinned(), 0u);  // no driver call yet
  AddResult r;
  std::thread([&] { r = c.complete(res); }).join();
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 14 * MiB);
  EXPECT_EQ(c.lookup(10 * MiB, 4 * MiB), Cover::Covers);
  EXPECT_EQ(drv.pinned(), 4 * MiB);

  // Freed between the two steps: withdrawn, and the completion calls nobody.
  RegistrationCache::Reservation gone = c.reserve(20 * MiB, 24 * MiB);
  ASSERT_TRUE(gone.ok);
  EXPECT_EQ(c.invalidate_nowait(20 * MiB, 24 * MiB), 1u);
  const size_t calls = drv.log_copy().size();
  std::thread([&] { r = c.complete(gone); }).join();
  EXPECT_TRUE(r.withdrawn);
  EXPECT_FALSE(r.doomed);
  EXPECT_EQ(r.status, -1);
  EXPECT_EQ(drv.log_copy().size(), calls);  // neither a register nor an unregister
  EXPECT_FALSE(drv.registered(20 * MiB));
  c.drain_pending();
  EXPECT_EQ(c.lookup(20 * MiB, 4 * MiB), Cover::None);
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_EQ(c.bytes(), 4 * MiB);  // the first one only
  EXPECT_EQ(drv.invariant_errors.load(), 0);

  // A range being reserved cannot be reserved again, and a full budget reserves nothing.
  RegistrationCache::Reservation first = c.reserve(30 * MiB, 31 * MiB);
  ASSERT_TRUE(first.ok);
  EXPECT_FALSE(c.reserve(30 * MiB, 31 * MiB).ok);
  EXPECT_EQ(c.complete(first).status, 0);
  EXPECT_FALSE(c.reserve(0, 65 * MiB).ok);
}

// A copy may hold its reservation while it runs (the registration is handed
// over after its staged DMA): no other thread may then wait for that copy.
// Invalidating the reserved range -- a free() and the drain of the freeing
// thread's next call, or a copy that needs the range pageable -- withdraws
// it at once, on any thread, the reserving one included (with the range
// left Pending instead, the drain waited for the holder: for ever when the
// holder was the thread itself).
TEST(RegistrationCache, AHeldReservationMakesNobodyWait) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  drv.cache = &c;
  RegistrationCache::Reservation held = c.reserve(10 * MiB, 14 * MiB);
  ASSERT_TRUE(held.ok);
  // The holder itself releases the range (a copy that needs it pageable).
  // A wait here would be for ever: a watchdog fails the test instead. Its
  // flag is shared, not on this stack: the detached watchdog outlives the test.
  auto returned = std::make_shared<std::atomic<bool>>(false);
  std::thread([returned] {
    for (int i = 0; i < 100 && !returned->load(); ++i) std::this_thread::sleep_for(50ms);
    if (!returned->load()) {
      std::fprintf(stderr, "FAIL: invalidate() of a range its own thread holds reserved did not return\n");
      std::_Exit(1);
    }
  }).detach();
  EXPECT_EQ(c.invalidate(10 * MiB, 14 * MiB), 1u);
  returned->store(true);
  EXPECT_EQ(c.peek(10 * MiB, 4 * MiB), Cover::None);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_TRUE(c.complete(held).withdrawn);

  // Another thread frees it, then drains: returns while the holder still holds it.
  RegistrationCache::Reservation held2 = c.reserve(20 * MiB, 24 * MiB);
  ASSERT_TRUE(held2.ok);
  auto other = std::async(std::launch::async, [&] {
    c.invalidate_nowait(20 * MiB, 21 * MiB);
    c.drain_pending();
    return c.peek(20 * MiB, 1);
  });
  ASSERT_EQ(other.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(other.get(), Cover::None);
  EXPECT_EQ(c.pending(), 0u);
  // The range may be reserved again at once; the old reservation completes as withdrawn.
  RegistrationCache::Reservation again = c.reserve(20 * MiB, 24 * MiB);
  ASSERT_TRUE(again.ok);
  EXPECT_TRUE(c.complete(held2).withdrawn);
  EXPECT_EQ(c.complete(again).status, 0);
  EXPECT_EQ(c.peek(20 * MiB, 4 * MiB), Cover::Covers);
  EXPECT_EQ(drv.log_copy(), std::vector<std::string>{"reg 20+4"});
  EXPECT_EQ(drv.invariant_errors.load(), 0);
}

// Reservations held for a while (as across a staged copy) while other threads
// invalidate, look up and add over the same ranges: the driver and the cache
// stay in step and every reservation is settled exactly once.
TEST(RegistrationCache, HeldReservationsUnderConcurrentInvalidation) {
  FakeDriver drv;
  RegistrationCache c(drv, 32 * MiB);
  drv.cache = &c;
  std::atomic<int> driver_errors{0}, withdrawn{0}, made{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const uint64_t base = uint64_t((t + i) % 10) * 4 * MiB;
        if (t % 2 == 0) {
          RegistrationCache::Reservation res = c.reserve(base, base + 3 * MiB);
          if (!res.ok) continue;
          c.peek(base, MiB);  // held without draining: withdrawals race the completion itself
          std::this_thread::yield();
          AddResult r = c.complete(res);
          if (r.status > 0) ++driver_errors;
          if (r.withdrawn) ++withdrawn;
          if (r.status == 0) ++made;
        } else if (i % 2) {
          c.invalidate_nowait(base, base + MiB);
        } else {
          c.invalidate(base + MiB, base + 2 * MiB);
        }
      }
    });
  for (auto& th : threads) th.join();
  c.drain_pending();
  EXPECT_EQ(driver_errors.load(), 0);
  EXPECT_GT(made.load() + withdrawn.load(), 0);
  EXPECT_EQ(drv.pinned(), c.bytes());
  EXPECT_LE(c.bytes(), 32 * MiB);
  EXPECT_EQ(drv.invariant_errors.load(), 0);
  c.clear();
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.pending(), 0u);
}

TEST(RegistrationCache, OverlapsMergeIntoOneRegistration) {
  // Two heap blocks sharing a page: the driver refuses overlapping
  // registrations, so the second becomes the union of both.
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 11 * MiB + 100).status, 0);
  AddResult r = c.add(11 * MiB + 200, 13 * MiB);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 13 * MiB);
  EXPECT_EQ(r.unregistered, 1u);
  EXPECT_EQ(c.count(), 1u);
  EXPECT_EQ(c.lookup(10 * MiB, 3 * MiB), Cover::Covers);
  EXPECT_EQ(drv.pinned(), 3 * MiB);
}

TEST(RegistrationCache, BudgetIsNeverExceededAndLruGoesFirst) {
  FakeDriver drv;
  RegistrationCache c(drv, 8 * MiB);
  ASSERT_EQ(c.add(0x1000 * MiB, 0x1000 * MiB + 3 * MiB).status, 0);  // A
  ASSERT_EQ(c.add(0x2000 * MiB, 0x2000 * MiB + 3 * MiB).status, 0);  // B
  EXPECT_EQ(c.lookup(0x1000 * MiB, MiB), Cover::Covers);               // A used more recently than B
  AddResult r = c.add(0x3000 * MiB, 0x3000 * MiB + 4 * MiB);           // C: needs B's room
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.evicted_bytes, 3 * MiB);
  EXPECT_EQ(c.lookup(0x2000 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(0x1000 * MiB, 1), Cover::Covers);
  EXPECT_LE(drv.pinned(), 8 * MiB);
  EXPECT_LE(c.bytes(), 8 * MiB);
  EXPECT_EQ(c.add(0x4000 * MiB, 0x4000 * MiB + 9 * MiB).status, -1);  // larger than the budget
  EXPECT_LE(drv.pinned(), 8 * MiB);
}

TEST(RegistrationCache, InvalidateDropsEverythingOverlapping) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  c.add(10 * MiB, 12 * MiB);
  c.add(20 * MiB, 22 * MiB);
  c.add(30 * MiB, 32 * MiB);
  EXPECT_EQ(c.invalidate(11 * MiB, 21 * MiB), 2u);  // a partial unmap still drops the whole registration
  EXPECT_EQ(c.lookup(10 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(21 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(30 * MiB, 1), Cover::Covers);
  EXPECT_EQ(c.invalidate(32 * MiB, 40 * MiB), 0u);
  EXPECT_EQ(drv.pinned(), 2 * MiB);
  EXPECT_EQ(c.clear(), 1u);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_EQ(drv.marked, 0);
}

TEST(RegistrationCache, DriverFailureLeavesNothingBehind) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  drv.fail_next = true;
  AddResult r = c.add(10 * MiB, 12 * MiB);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.lookup(10 * MiB, 1), Cover::None);
}

// Drains until nothing is queued or `limit` passes (failed unregisters are
// retried only after their delay).
void drain_until_settled(RegistrationCache& c, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (c.pending() > 0 && std::chrono::steady_clock::now() < until) {
    c.drain_pending();
    std::this_thread::sleep_for(1ms);
  }
}

TEST(RegistrationCache, AFailedUnregisterIsKeptAndRetried) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  drv.fail_unregisters = 2;
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  c.drain_pending();
  // The driver still holds the pages: the entry stays, queued, never trusted,
  // and no registration is made over it.
  EXPECT_TRUE(drv.registered(10 * MiB));
  EXPECT_EQ(c.pending(), 1u);
  EXPECT_EQ(c.peek(10 * MiB, 1), Cover::Touches);
  EXPECT_EQ(c.add(10 * MiB, 11 * MiB).status, -1);
  drain_until_settled(c, 5s);
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_FALSE(drv.registered(10 * MiB));
  EXPECT_EQ(c.peek(10 * MiB, 1), Cover::None);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(drv.marked.load(), 0);
  const auto log = drv.log_copy();
  EXPECT_EQ(std::count(log.begin(), log.end(), "failed 1"), 2) << ::testing::PrintToString(log);
  EXPECT_EQ(std::count(log.begin(), log.end(), "unreg 10"), 1);
}

TEST(RegistrationCache, AnUnregisterThatNeverSucceedsIsGivenUpAndSaid) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  drv.fail_unregisters = 1000;
  c.invalidate(10 * MiB, 12 * MiB);
  drain_until_settled(c, 5s);
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_TRUE(c.empty());
  const auto log = drv.log_copy();
  EXPECT_EQ(std::count(log.begin(), log.end(), "failed 1"), RegistrationCache::kUnregisterTries - 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), "gave up 1"), 1);
}

TEST(RegistrationCache, ForkChildForgetsWithoutTheDriver) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  c.add(10 * MiB, 12 * MiB);
  drv.log.clear();
  c.forget_all_after_fork();
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(drv.log.empty());
}

TEST(RegistrationCache, MirrorCountFollowsEntries) {
  FakeDriver drv;
  std::atomic<uint32_t> mirror{0};
  RegistrationCache c(drv, 64 * MiB, &mirror);
  c.add(10 * MiB, 12 * MiB);
  EXPECT_EQ(mirror.load(), 1u);
  c.invalidate(10 * MiB, 11 * MiB);
  EXPECT_EQ(mirror.load(), 0u);
  // A queued entry still counts: it is in the driver until drained.
  c.add(10 * MiB, 12 * MiB);
  c.invalidate_nowait(10 * MiB, 11 * MiB);
  EXPECT_EQ(mirror.load(), 1u);
  c.drain_pending();
  EXPECT_EQ(mirror.load(), 0u);
}

// Many threads registering, looking up and invalidating disjoint and shared
// ranges: the fake driver rejects any overlap or double unregister, and at
// the end nothing is left pinned beyond what the cache lists (run under TSan in CI).
TEST(RegistrationCache, ConcurrentUseKeepsDriverAndCacheInStep) {
  FakeDriver drv;
  RegistrationCache c(drv, 32 * MiB);
  std::atomic<int> driver_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        uint64_t base = uint64_t((t + i) % 12) * 4 * MiB;
        switch (i % 3) {
          case 0: {
            AddResult r = c.add(base, base + 3 * MiB);
            if (r.status > 0) ++driver_errors;
            break;
          }
          case 1: c.lookup(base, MiB); break;
          default: c.invalidate(base, base + MiB); break;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(driver_errors.load(), 0);
  EXPECT_EQ(drv.pinned(), c.bytes());
  EXPECT_LE(c.bytes(), 32 * MiB);
  c.clear();
  EXPECT_EQ(drv.pinned(), 0u);
}


// --- lazy invalidation (issue 12: free() never waits) ------------------------------

TEST(RegistrationCache, InvalidateNowaitMarksAtOnceAndNeverCallsTheDriver) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  drv.cache = &c;
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  ASSERT_EQ(c.add(20 * MiB, 22 * MiB).status, 0);
  EXPECT_EQ(c.peek(10 * MiB, MiB), Cover::Covers);
  const size_t before = drv.log_copy().size();
  EXPECT_EQ(c.invalidate_nowait(11 * MiB, 11 * MiB + 1), 1u);
  EXPECT_EQ(drv.log_copy().size(), before);  // no driver call
  EXPECT_TRUE(drv.registered(10 * MiB));     // still in the driver...
  EXPECT_EQ(c.peek(10 * MiB, MiB), Cover::Touches);  // ...but no copy may trust it
  EXPECT_EQ(c.peek(10 * MiB, 1), Cover::Touches);
  EXPECT_EQ(c.peek(20 * MiB, MiB), Cover::Covers);   // the other one is untouched
  EXPECT_EQ(c.pending(), 1u);
  EXPECT_EQ(c.count(), 2u);  // counted (and budgeted) until unregistered
  EXPECT_EQ(c.invalidate_nowait(10 * MiB, 12 * MiB), 0u);  // already queued
  c.drain_pending();
  EXPECT_FALSE(drv.registered(10 * MiB));
  EXPECT_EQ(c.peek(10 * MiB, MiB), Cover::None);
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_EQ(c.count(), 1u);
  EXPECT_EQ(c.bytes(), 2 * MiB);
  EXPECT_EQ(drv.marked, int64_t(2 * MiB));
  EXPECT_EQ(drv.invariant_errors, 0);
}

TEST(RegistrationCache, LookupAndAddDrainBeforeAnythingElse) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  // A lookup of another range drains first.
  EXPECT_EQ(c.lookup(30 * MiB, 1), Cover::None);
  EXPECT_FALSE(drv.registered(10 * MiB));
  // add() unregisters the queued entry before it registers anything: the
  // driver refuses overlapping registrations, so this add over the same
  // memory (freed and allocated again) must find it gone.
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  drv.log.clear();
  AddResult r = c.add(10 * MiB, 13 * MiB);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 13 * MiB);
  ASSERT_EQ(drv.log.size(), 2u);
  EXPECT_EQ(drv.log[0], "unreg 10");
  EXPECT_EQ(drv.log[1], "reg 10+3");
  EXPECT_EQ(c.count(), 1u);
}

// The hazard the drain exists for (FACTS.md): munmap + mmap(MAP_FIXED) of a
// registered range; a registration still in the driver would make the next
// copy DMA the old pages.
TEST(RegistrationCache, NoCopyAfterARemapSeesTheOldRegistration) {
  FakeDriver drv;
  drv.process = true;  // the shim's cache: drain_pending_registrations() drains it
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 14 * MiB).status, 0);
  // munmap hook, then the kernel maps new pages there.
  EXPECT_EQ(c.invalidate_nowait(10 * MiB, 14 * MiB), 1u);
  drv.mapping_gen++;
  EXPECT_TRUE(drv.copy_would_be_stale(11 * MiB, MiB));  // what a copy without the drain would meet
  EXPECT_NE(detail::g_unregistrations_queued.load(), 0u);
  // The copy hook: drain first, then the driver call.
  drain_pending_registrations();
  EXPECT_FALSE(drv.copy_would_be_stale(11 * MiB, MiB));
  EXPECT_EQ(detail::g_unregistrations_queued.load(), 0u);
  EXPECT_EQ(c.lookup(11 * MiB, MiB), Cover::None);
  // Nothing queued: one load, nothing else.
  drv.log.clear();
  drain_pending_registrations();
  EXPECT_TRUE(drv.log.empty());
}

TEST(RegistrationCache, InvalidatedWhilePendingIsUnregisteredByTheRegisteringThread) {
  FakeDriver drv;
  Gate gate;
  drv.gate = &gate;
  RegistrationCache c(drv, 64 * MiB);
  drv.cache = &c;
  gate.close();
  std::thread::id adder_id;
  auto adder = std::async(std::launch::async, [&] {
    adder_id = std::this_thread::get_id();
    return c.add(10 * MiB, 12 * MiB);
  });
  ASSERT_TRUE(gate.wait_for_waiter());
  EXPECT_EQ(c.peek(10 * MiB, MiB), Cover::Touches);  // Pending: never Covers
  // free() of that memory now: marks it doomed and returns, although the
  // registration will not return until the gate opens.
  EXPECT_EQ(c.invalidate_nowait(10 * MiB, 12 * MiB), 1u);
  EXPECT_EQ(c.peek(10 * MiB, MiB), Cover::Touches);
  EXPECT_EQ(c.pending(), 1u);
  EXPECT_EQ(adder.wait_for(50ms), std::future_status::timeout);  // still inside the driver
  gate.open();
  AddResult r = adder.get();
  EXPECT_EQ(r.status, -1);
  EXPECT_TRUE(r.doomed);
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_EQ(drv.unregistered_by[10 * MiB], adder_id);  // the registering thread dropped it
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(drv.marked, 0);
  EXPECT_EQ(drv.invariant_errors, 0);
}

TEST(RegistrationCache, DrainWaitsForADoomedRegistrationStillInTheDriver) {
  FakeDriver drv;
  Gate gate;
  drv.gate = &gate;
  RegistrationCache c(drv, 64 * MiB);
  gate.close();
  auto adder = std::async(std::launch::async, [&] { return c.add(10 * MiB, 12 * MiB); });
  ASSERT_TRUE(gate.wait_for_waiter());
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  // The freeing thread's next copy drains: it must not reach the driver
  // while the doomed registration may still be made.
  auto drainer = std::async(std::launch::async, [&] {
    c.drain_pending();
    return drv.pinned();
  });
  EXPECT_EQ(drainer.wait_for(50ms), std::future_status::timeout);
  gate.open();
  EXPECT_EQ(drainer.get(), 0u);  // when the drain returned, the registration was gone
  EXPECT_TRUE(adder.get().doomed);
}

TEST(RegistrationCache, DoomedRegistrationThatFailedLeavesNothingBehind) {
  FakeDriver drv;
  Gate gate;
  drv.gate = &gate;
  RegistrationCache c(drv, 64 * MiB);
  drv.fail_next = true;
  gate.close();
  auto adder = std::async(std::launch::async, [&] { return c.add(10 * MiB, 12 * MiB); });
  ASSERT_TRUE(gate.wait_for_waiter());
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  gate.open();
  EXPECT_EQ(adder.get().status, 2);
  c.drain_pending();  // returns: nothing left to wait for
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.pending(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

// The real driver serialises every register and unregister of the process:
// free() of a registered buffer must return while another thread is inside a
// slow registration of a different buffer (old code: it unregistered inline
// and so waited for the whole registration).
TEST(RegistrationCache, InvalidationReturnsWhileAnotherThreadRegisters) {
  FakeDriver drv;
  drv.serialised = true;
  Gate gate;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  drv.gate = &gate;
  gate.close();
  auto adder = std::async(std::launch::async, [&] { return c.add(40 * MiB, 48 * MiB); });
  ASSERT_TRUE(gate.wait_for_waiter());  // inside the driver, holding its lock
  auto freer = std::async(std::launch::async, [&] { return c.invalidate_nowait(10 * MiB, 12 * MiB); });
  ASSERT_EQ(freer.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(freer.get(), 1u);
  EXPECT_EQ(c.peek(40 * MiB, 1), Cover::Touches);  // being registered
  EXPECT_EQ(c.peek(10 * MiB, 1), Cover::Touches);  // invalidated: no copy trusts it
  // (A copy's drain would now unregister it, waiting behind the driver's
  // lock like the real driver: that wait is on the copy path, not in free().)
  gate.open();
  EXPECT_EQ(adder.get().status, 0);
  c.drain_pending();
  EXPECT_FALSE(drv.registered(10 * MiB));
  EXPECT_TRUE(drv.registered(40 * MiB));
}

TEST(RegistrationCache, ClearWaitsForEverything) {
  FakeDriver drv;
  Gate gate;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  ASSERT_EQ(c.add(20 * MiB, 22 * MiB).status, 0);
  c.invalidate_nowait(20 * MiB, 21 * MiB);
  drv.gate = &gate;
  gate.close();
  auto adder = std::async(std::launch::async, [&] { return c.add(30 * MiB, 32 * MiB); });
  ASSERT_TRUE(gate.wait_for_waiter());
  auto clearer = std::async(std::launch::async, [&] { return c.clear(); });
  EXPECT_EQ(clearer.wait_for(50ms), std::future_status::timeout);
  gate.open();
  EXPECT_EQ(clearer.get(), 2u);  // the live one and the pending one (the queued one was already counted)
  EXPECT_TRUE(adder.get().doomed);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_EQ(drv.marked, 0);
}

// A fork while another thread is inside cuMemHostRegister (its entry
// Pending) and the queue holds an entry: the child resets the cache with
// plain stores and can use it at once; nothing of the parent's reaches its driver.
TEST(RegistrationCache, ForkChildResetsWhileAnotherThreadIsInTheCache) {
  FakeDriver drv;
  Gate gate;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 12 * MiB).status, 0);
  c.invalidate_nowait(10 * MiB, 12 * MiB);
  drv.gate = &gate;
  gate.close();
  auto adder = std::async(std::launch::async, [&] { return c.add(20 * MiB, 22 * MiB); });
  ASSERT_TRUE(gate.wait_for_waiter());
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    drv.gate = nullptr;  // the child's copy of the driver
    drv.live.clear();
    drv.log.clear();
    c.forget_all_after_fork();
    int bad = 0;
    bad |= !c.empty() << 0;
    bad |= (c.pending() != 0) << 1;
    bad |= (c.lookup(10 * MiB, 1) != Cover::None) << 2;  // no drain, no wait, nothing left
    bad |= (c.lookup(20 * MiB, 1) != Cover::None) << 3;
    bad |= (c.add(20 * MiB, 22 * MiB).status != 0) << 4;  // the range the parent's thread was registering
    bad |= (c.lookup(20 * MiB, MiB) != Cover::Covers) << 5;
    bad |= (drv.log.size() != 1) << 6;  // only the child's own registration
    c.invalidate_nowait(20 * MiB, 22 * MiB);
    c.drain_pending();
    bad |= !c.empty() << 7;
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed checks (bit mask)";
  gate.open();
  EXPECT_EQ(adder.get().status, 0);
  c.clear();
  EXPECT_EQ(drv.pinned(), 0u);
}

// Threads registering, looking up, invalidating (from "free", without
// waiting) and draining over shared ranges. The fake driver rejects overlaps
// and double unregisters and checks, at every register and unregister, that
// the cache does not answer Covers for that range meanwhile. Run under TSan
// in CI (scripts/test.sh, build-tsan).
TEST(RegistrationCache, ConcurrentLookupsInvalidationsAndDrains) {
  FakeDriver drv;
  drv.serialised = true;
  RegistrationCache c(drv, 24 * MiB);
  drv.cache = &c;
  std::atomic<int> driver_errors{0}, trusted_invalid{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 400; ++i) {
        const uint64_t base = uint64_t((t * 7 + i) % 10) * 4 * MiB;
        switch ((t + i) % 5) {
          case 0: {
            AddResult r = c.add(base, base + 3 * MiB);
            if (r.status > 0) ++driver_errors;
            break;
          }
          case 1: c.lookup(base + MiB, MiB); break;
          case 2: c.invalidate_nowait(base, base + MiB); break;
          case 3: c.drain_pending(); break;
          default: c.invalidate(base + 2 * MiB, base + 3 * MiB); break;
        }
      }
    });
  // A range only this thread adds and invalidates: right after its own
  // invalidation, no answer for it may be Covers, whatever the others do.
  threads.emplace_back([&] {
    const uint64_t mine = 100 * MiB;
    for (int i = 0; i < 300; ++i) {
      c.add(mine, mine + 2 * MiB);
      c.invalidate_nowait(mine, mine + 2 * MiB);
      if (c.peek(mine, MiB) == Cover::Covers) ++trusted_invalid;
    }
  });
  threads.emplace_back([&] {
    while (!stop.load())
      for (uint64_t p = 0; p < 104 * MiB; p += 2 * MiB) c.peek(p, MiB);
  });
  for (size_t i = 0; i + 1 < threads.size(); ++i) threads[i].join();
  stop = true;
  threads.back().join();
  c.drain_pending();
  EXPECT_EQ(driver_errors.load(), 0);
  EXPECT_EQ(trusted_invalid.load(), 0);
  EXPECT_EQ(drv.invariant_errors.load(), 0);
  EXPECT_EQ(drv.pinned(), c.bytes());
  EXPECT_EQ(uint64_t(drv.marked.load()), c.bytes());
  EXPECT_LE(c.bytes(), 24 * MiB);
  EXPECT_EQ(c.pending(), 0u);
  c.clear();
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_TRUE(c.empty());
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
