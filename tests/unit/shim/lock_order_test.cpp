// core/ranked_lock.h: the lock-order check (built with CUXFER_LOCK_ORDER_CHECK;
// skipped without it). A lock ranked at or below one the thread holds aborts
// with a line naming both; in order, nothing happens.
#include "core/ranked_lock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <thread>

#include "core/bounded_lock.h"

using namespace cuxfer::shim;

namespace {

}  // namespace

// A macro: GTEST_SKIP returns from the function it is written in, which must
// be the test's own body (in a helper the test went on, and a death test
// "failed to die" in a build without the check).
#define SKIP_UNLESS_CHECKED() \
  if (!lock_order::kChecked) GTEST_SKIP() << "built without CUXFER_LOCK_ORDER_CHECK"

namespace {

}  // namespace

TEST(LockOrder, LocksTakenInRankOrderPass) {
  SKIP_UNLESS_CHECKED();
  RankedMutex session{LockRank::kRecorderSession}, nvtx{LockRank::kNvtxNames}, ranges{LockRank::kHostRanges};
  std::lock_guard<RankedMutex> a(session);
  std::lock_guard<RankedMutex> b(nvtx);
  std::lock_guard<RankedMutex> c(ranges);
  // What the libc hooks check on entry: allowed under NVTX names, not under host ranges (below).
  SUCCEED();
}

TEST(LockOrder, TheForkDeadlockOrderAborts) {
  SKIP_UNLESS_CHECKED();
  // prepare_fork's old order: host ranges, then NVTX names, while a thread
  // interning a name holds NVTX names and frees into host ranges.
  EXPECT_DEATH(
      {
        RankedMutex nvtx{LockRank::kNvtxNames};
        RankedMutex ranges{LockRank::kHostRanges};
        std::lock_guard<RankedMutex> a(ranges);
        std::lock_guard<RankedMutex> b(nvtx);
      },
      "lock order violated: lock of NVTX names \\(rank 65\\) while holding host ranges");
}

TEST(LockOrder, AnAllocationThroughTheHooksUnderHostRangesAborts) {
  SKIP_UNLESS_CHECKED();
  // The check the libc hooks make on entry (cuxfer_mem_check_lock_order).
  EXPECT_DEATH(
      {
        RankedMutex table{LockRank::kAllocationTable};
        std::lock_guard<RankedMutex> a(table);
        lock_order::check(LockRank::kHostRanges, "an allocation or free through the libc hooks");
      },
      "an allocation or free through the libc hooks of host ranges .* while holding allocation table");
}

TEST(LockOrder, TheSameRankTwiceAborts) {
  SKIP_UNLESS_CHECKED();
  EXPECT_DEATH(
      {
        RankedMutex one{LockRank::kZeroCopyBuffers};
        RankedMutex two{LockRank::kZeroCopyBuffers};
        std::lock_guard<RankedMutex> a(one);
        std::lock_guard<RankedMutex> b(two);
      },
      "lock order violated");
}

TEST(LockOrder, ABoundedWaitChecksLikeALock) {
  SKIP_UNLESS_CHECKED();
  EXPECT_DEATH(
      {
        RankedMutex session{LockRank::kRecorderSession};
        RankedMutex ranges{LockRank::kHostRanges};
        std::lock_guard<RankedMutex> a(ranges);
        (void)lock_before(session, now_ns() + 1'000'000);
      },
      "a bounded wait of Recorder session");
}

TEST(LockOrder, AReleasedLockIsForgottenInAnyOrder) {
  SKIP_UNLESS_CHECKED();
  RankedMutex session{LockRank::kRecorderSession}, nvtx{LockRank::kNvtxNames}, ranges{LockRank::kHostRanges};
  session.lock();
  nvtx.lock();
  session.unlock();  // out of order: the top stays NVTX names
  nvtx.unlock();
  // Nothing is held now: the outermost rank is allowed again.
  std::lock_guard<RankedMutex> a(ranges);
  EXPECT_DEATH(std::lock_guard<RankedMutex> b(session), "while holding host ranges");
}

TEST(LockOrder, ATryLockIsHeldForWhatFollows) {
  SKIP_UNLESS_CHECKED();
  RankedMutex nvtx{LockRank::kNvtxNames}, session{LockRank::kRecorderSession};
  ASSERT_TRUE(nvtx.try_lock());
  EXPECT_DEATH(std::lock_guard<RankedMutex> b(session), "lock of Recorder session \\(rank 10\\) while holding NVTX");
  nvtx.unlock();
}

TEST(LockOrder, AConditionWaitKeepsTheRankHeld) {
  SKIP_UNLESS_CHECKED();
  RankedMutex wake{LockRank::kRecorderWake}, ranges{LockRank::kHostRanges};
  std::condition_variable cv;
  RankedUniqueLock lock(wake);
  cv.wait_for(lock.get(), std::chrono::milliseconds(1));
  { std::lock_guard<RankedMutex> inner(ranges); }  // above it: fine
  lock.unlock();
  std::lock_guard<RankedMutex> again(wake);  // released: taken again without a fault
}

TEST(LockOrder, EachThreadHasItsOwnStack) {
  SKIP_UNLESS_CHECKED();
  RankedMutex ranges{LockRank::kHostRanges};
  std::lock_guard<RankedMutex> held(ranges);
  std::thread other([] {
    RankedMutex session{LockRank::kRecorderSession};
    std::lock_guard<RankedMutex> a(session);  // this thread holds nothing
  });
  other.join();
}
