// core/bounded_lock.h: the fork handlers' wait for a lock has an end.
#include "core/bounded_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace cuxfer::shim;

TEST(BoundedLock, TakesAFreeLockAtOnce) {
  RankedMutex m{LockRank::kRecorderSession};
  ASSERT_TRUE(lock_before(m, now_ns()));  // a deadline already past: a free lock is still taken
  EXPECT_FALSE(m.try_lock());
  m.unlock();
}

TEST(BoundedLock, GivesUpAtTheDeadlineOnALockThatStaysHeld) {
  RankedMutex m{LockRank::kRecorderSession};
  std::atomic<bool> held{false}, done{false};
  std::thread holder([&] {
    std::lock_guard<RankedMutex> lock(m);
    held = true;
    while (!done) std::this_thread::yield();
  });
  while (!held) std::this_thread::yield();
  const uint64_t t0 = now_ns();
  EXPECT_FALSE(lock_before(m, t0 + 20'000'000));
  const uint64_t waited = now_ns() - t0;
  EXPECT_GE(waited, 20'000'000u);
  EXPECT_LT(waited, 2'000'000'000u);  // an end, not a hang (loose: a loaded CI machine)
  done = true;
  holder.join();
}

TEST(BoundedLock, WaitsForALockReleasedBeforeTheDeadline) {
  RankedMutex m{LockRank::kRecorderSession};
  std::atomic<bool> held{false};
  std::thread holder([&] {
    std::lock_guard<RankedMutex> lock(m);
    held = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  while (!held) std::this_thread::yield();
  EXPECT_TRUE(lock_before(m, now_ns() + 5'000'000'000ull));
  m.unlock();
  holder.join();
}

TEST(BoundedLock, AForkChildsCopyIsUnlockedAgain) {
  RankedMutex m{LockRank::kRecorderSession};
  m.native().lock();  // as a thread of the parent that does not exist in the child held it
  remake_in_fork_child(m);
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}
