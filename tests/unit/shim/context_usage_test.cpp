// ContextUsage: whether a cuCtxDetach destroys its context (PyCUDA ends every
// context it makes with one), from the attaches the shim saw.
#include "interpose/context_usage.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(usage.classify(handle(0x1000)), Detach::Last);
}

TEST(ContextUsage, EachAttachKeepsTheContextThroughOneDetach) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000), b = handle(0x2000);
  usage.attached(a);
  usage.attached(a);
  EXPECT_EQ(usage.classify(a), Detach::NotLast);
  EXPECT_EQ(usage.classify(b), Detach::Last) << "another context's attach counts for nothing here";
  usage.detached(a);
  EXPECT_EQ(usage.classify(a), Detach::NotLast);
  usage.detached(a);
  EXPECT_EQ(usage.classify(a), Detach::Last);
}

// A new context may be made at a destroyed one's address: it starts with one
// reference, whatever the old one had.
TEST(ContextUsage, ADestroyedContextsAttachesDoNotCountForTheNextAtItsAddress) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  usage.attached(a);
  usage.destroyed(a);  // cuCtxDestroy, whatever the count
  EXPECT_EQ(usage.classify(a), Detach::Last);
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
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(usage.classify(a), Detach::NotLast) << "after " << i << " detaches";
    usage.detached(a);
  }
  EXPECT_EQ(usage.classify(a), Detach::Last);
}

// Past kSlots attached contexts a count is not known: a detach might be the
// last, and the caller must not bind the context afterwards.
TEST(ContextUsage, AnAttachThatFoundNoSlotMakesZeroCountsUnknown) {
  auto usage = std::make_unique<ContextUsage>();
  for (uintptr_t i = 1; i <= ContextUsage::kSlots; ++i) usage->attached(handle(i << 12));
  EXPECT_EQ(usage->classify(handle(0x999000)), Detach::Last);
  usage->attached(handle(0x999000));  // no slot left
  EXPECT_EQ(usage->classify(handle(0x999000)), Detach::Unknown);
  EXPECT_EQ(usage->classify(handle(1 << 12)), Detach::NotLast) << "a kept count is still known";
  usage->detached(handle(1 << 12));
  EXPECT_EQ(usage->classify(handle(1 << 12)), Detach::Unknown);
}

TEST(ContextUsage, ADetachBeyondTheCountedAttachesTakesNothing) {
  ContextUsage usage;
  const CUcontext a = handle(0x1000);
  usage.detached(a);  // never attached: nothing to take
  usage.attached(a);
  EXPECT_EQ(usage.classify(a), Detach::NotLast);
}

}  // namespace
}  // namespace cuxfer::shim
