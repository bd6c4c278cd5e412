// ContextUsage: whether a cuCtxDetach destroys its context (PyCUDA ends every
// context it makes with one), from the attaches the shim saw.
#include "interpose/context_usage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace cuxfer::shim {
namespace {

using Detach = ContextUsage::Detach;

CUcontext handle(uintptr_t v) { return reinterpret_cast<CUcontext>(v); }

TEST(ContextUsage, ADetachOfAContextNeverAttachedIsItsLast) {
  ContextUsage usage;
  EXPECT_EQ(usage.claim_detach(handle(0x1000)), Detach::Last);
}

TEST(ContextUsage, EachAttachKeepsTheContextThroughOneDetach) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000), b = handle(0x2000);
  usage.attached(a);
  usage.attached(a);
  EXPECT_EQ(usage.claim_detach(b), Detach::Last) << "another context's attach counts for nothing here";
  EXPECT_EQ(usage.claim_detach(a), Detach::NotLast);
  EXPECT_EQ(usage.claim_detach(a), Detach::NotLast);
  EXPECT_EQ(usage.claim_detach(a), Detach::Last);
}

// A detach the driver refused gives its reference back.
TEST(ContextUsage, ARefusedDetachGivesItsReferenceBack) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  usage.attached(a);
  ASSERT_EQ(usage.claim_detach(a), Detach::NotLast);
  usage.attached(a);  // the driver refused: back
  EXPECT_EQ(usage.claim_detach(a), Detach::NotLast);
  EXPECT_EQ(usage.claim_detach(a), Detach::Last);
}

// Two threads detaching a context with one attach left: exactly one of them
// is told NotLast, the other Last (its call destroys the context).
TEST(ContextUsage, ConcurrentDetachesClaimEachReferenceOnce) {
  for (int round = 0; round < 200; ++round) {
    ContextUsage usage;
    const CUcontext a = handle(0x1000);
    constexpr int kThreads = 4;
    for (int i = 0; i < kThreads - 1; ++i) usage.attached(a);
    std::atomic<int> not_last{0}, last{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i)
      ts.emplace_back([&] { (usage.claim_detach(a) == Detach::NotLast ? not_last : last).fetch_add(1); });
    for (auto& t : ts) t.join();
    ASSERT_EQ(not_last.load(), kThreads - 1) << "round " << round;
    ASSERT_EQ(last.load(), 1) << "round " << round;
  }
}

// A new context may be made at a destroyed one's address: it starts with one
// reference, whatever the old one had.
TEST(ContextUsage, ADestroyedContextsAttachesDoNotCountForTheNextAtItsAddress) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  usage.attached(a);
  usage.destroyed(a);  // cuCtxDestroy, whatever the count
  EXPECT_EQ(usage.claim_detach(a), Detach::Last);
}

// Two threads attaching the same context at once may take a slot each: the
// counts are summed, and each detach takes one.
TEST(ContextUsage, CountsInTwoSlotsOfOneContextAreSummed) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  constexpr int kThreads = 8;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) ts.emplace_back([&] { usage.attached(a); });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(usage.claim_detach(a), Detach::NotLast) << "detach " << i;
  EXPECT_EQ(usage.claim_detach(a), Detach::Last);
}

// Past kSlots attached contexts a count is not known: a detach might be the
// last, and the caller must not bind the context afterwards.
TEST(ContextUsage, AnAttachThatFoundNoSlotMakesZeroCountsUnknown) {
  auto usage = std::make_unique<ContextUsage>();
  for (uintptr_t i = 1; i <= ContextUsage::kSlots; ++i) usage->attached(handle(i << 12));
  EXPECT_EQ(usage->claim_detach(handle(0x999000)), Detach::Last);
  usage->attached(handle(0x999000));  // no slot left
  EXPECT_EQ(usage->claim_detach(handle(0x999000)), Detach::Unknown);
  EXPECT_EQ(usage->claim_detach(handle(1 << 12)), Detach::NotLast) << "a kept count is still known";
  EXPECT_EQ(usage->claim_detach(handle(1 << 12)), Detach::Unknown);
}

TEST(ContextUsage, ALastDetachTakesNothing) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  EXPECT_EQ(usage.claim_detach(a), Detach::Last);  // never attached: nothing to take
  usage.attached(a);
  EXPECT_EQ(usage.claim_detach(a), Detach::NotLast);
}

}  // namespace
}  // namespace cuxfer::shim
