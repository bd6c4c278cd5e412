// GreenContexts: which context a cuGreenCtxDestroy takes with it (the one its
// green context was converted to), so that the rewrite lets go of it first.
#include "interpose/green_contexts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace cuxfer::shim {
namespace {

CUgreenCtx green(uintptr_t n) { return reinterpret_cast<CUgreenCtx>(n * 0x1000); }
CUcontext ctx(uintptr_t n) { return reinterpret_cast<CUcontext>(n * 0x1000 + 0x10); }

TEST(GreenContexts, DestroyTakesTheConvertedContextOnce) {
  GreenContexts g;
  g.converted(green(1), ctx(1));
  g.converted(green(2), ctx(2));
  GreenContexts::Taken t = g.take(green(1));
  EXPECT_EQ(t.ctx, ctx(1));
  EXPECT_FALSE(t.unknown);
  t = g.take(green(1));  // forgotten: a second destroy (the app's error) takes nothing
  EXPECT_EQ(t.ctx, nullptr);
  EXPECT_EQ(g.take(green(2)).ctx, ctx(2));
}

TEST(GreenContexts, NeverConvertedTakesNothingAndIsNotUnknown) {
  GreenContexts g;
  const GreenContexts::Taken t = g.take(green(7));
  EXPECT_EQ(t.ctx, nullptr);
  EXPECT_FALSE(t.unknown);
}

TEST(GreenContexts, ConvertingAgainKeepsOneSlot) {
  GreenContexts g;
  for (int i = 0; i < 3 * static_cast<int>(GreenContexts::kSlots); ++i) g.converted(green(1), ctx(1));
  // Had each conversion taken a slot, the table would be full: it is not.
  for (uintptr_t i = 2; i <= GreenContexts::kSlots; ++i) g.converted(green(i), ctx(i));
  EXPECT_FALSE(g.take(green(GreenContexts::kSlots)).unknown);
  EXPECT_EQ(g.take(green(1)).ctx, ctx(1));
}

TEST(GreenContexts, ASlotIsFreeAgainAfterItsDestroy) {
  GreenContexts g;
  for (int round = 0; round < 4; ++round)
    for (uintptr_t i = 1; i <= GreenContexts::kSlots; ++i) {
      g.converted(green(i), ctx(i + round));
      const GreenContexts::Taken t = g.take(green(i));
      ASSERT_EQ(t.ctx, ctx(i + round));
      ASSERT_FALSE(t.unknown);
    }
}

// Past kSlots live conversions, an unremembered green context is Unknown (the
// hook asks the driver); the remembered ones are still answered.
TEST(GreenContexts, OverflowMakesTheUnrememberedUnknown) {
  GreenContexts g;
  for (uintptr_t i = 1; i <= GreenContexts::kSlots + 1; ++i) g.converted(green(i), ctx(i));
  const GreenContexts::Taken lost = g.take(green(GreenContexts::kSlots + 1));
  EXPECT_EQ(lost.ctx, nullptr);
  EXPECT_TRUE(lost.unknown);
  EXPECT_EQ(g.take(green(3)).ctx, ctx(3));
}

// Threads converting and destroying their own green contexts at once: each
// destroy takes exactly its own context.
TEST(GreenContexts, ConcurrentThreadsEachTakeTheirOwn) {
  GreenContexts g;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (uintptr_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uintptr_t i = 0; i < 2000; ++i) {
        const uintptr_t n = 1 + t * 100000 + i % 8;
        g.converted(green(n), ctx(n));
        if (g.take(green(n)).ctx != ctx(n)) wrong.fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Two threads converting the same green context at once may each claim a
// slot for it (neither found the other's). Its destroy must clear both: a
// slot left behind would answer a later destroy of a green context at the
// same address, never converted, with a context that is gone.
TEST(GreenContexts, ADestroyClearsEverySlotOfItsGreenContext) {
  GreenContexts g;
  g.claim(green(9), ctx(9));
  g.claim(green(9), ctx(9));
  EXPECT_EQ(g.take(green(9)).ctx, ctx(9));
  const GreenContexts::Taken again = g.take(green(9));
  EXPECT_EQ(again.ctx, nullptr);
  EXPECT_FALSE(again.unknown);
}

}  // namespace
}  // namespace cuxfer::shim
