// CallerCache (shim/symbols/caller_cache.h): per calling object, the
// functions found for it; nothing survives an emptying, and nothing resolved
// before one lands after it.
#include "symbols/caller_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace cuxfer::shim {
namespace {

using Cache = CallerCache<2, 3>;

void* fn(uintptr_t n) { return reinterpret_cast<void*>(n); }

TEST(CallerCache, RemembersPerObjectAndFunction) {
  Cache c;
  const uint64_t e = c.epoch();
  EXPECT_EQ(c.find(0x1000, 0), nullptr);
  EXPECT_TRUE(c.store(0x1000, 0, fn(0xa0), e));
  EXPECT_TRUE(c.store(0x1000, 2, fn(0xa2), e));
  EXPECT_TRUE(c.store(0x2000, 0, fn(0xb0), e));
  EXPECT_EQ(c.find(0x1000, 0), fn(0xa0));
  EXPECT_EQ(c.find(0x1000, 2), fn(0xa2));
  EXPECT_EQ(c.find(0x1000, 1), nullptr);
  EXPECT_EQ(c.find(0x2000, 0), fn(0xb0));
  EXPECT_EQ(c.find(0x3000, 0), nullptr);
}

TEST(CallerCache, RejectsWhatItCannotHold) {
  Cache c;
  const uint64_t e = c.epoch();
  EXPECT_FALSE(c.store(0, 0, fn(1), e));          // no object
  EXPECT_FALSE(c.store(0x1000, 3, fn(1), e));     // no such function
  EXPECT_FALSE(c.store(0x1000, 0, nullptr, e));   // nothing found
  EXPECT_TRUE(c.store(0x1000, 0, fn(1), e));
  EXPECT_TRUE(c.store(0x2000, 0, fn(2), e));
  EXPECT_FALSE(c.store(0x3000, 0, fn(3), e));     // full: resolved again at each call
  EXPECT_EQ(c.find(0x3000, 0), nullptr);
  EXPECT_EQ(c.find(0x1000, 3), nullptr);
}

TEST(CallerCache, EmptyingForgetsEveryObjectAndFreesItsEntry) {
  Cache c;
  std::atomic<void*> beside{nullptr};
  uint64_t e = c.epoch();
  ASSERT_TRUE(c.store(0x1000, 1, fn(0xa1), e));
  ASSERT_TRUE(c.store(0x2000, 1, fn(0xb1), e));
  ASSERT_TRUE(c.store_beside(beside, fn(0xc), e));
  bool also = false;
  c.empty([&] {
    also = true;
    beside.store(nullptr);
  });
  EXPECT_TRUE(also);
  EXPECT_EQ(beside.load(), nullptr);
  EXPECT_EQ(c.find(0x1000, 1), nullptr);
  EXPECT_EQ(c.find(0x2000, 1), nullptr);
  // A new object at the same link_map address starts empty, and both
  // entries are free again.
  e = c.epoch();
  EXPECT_TRUE(c.store(0x1000, 0, fn(0xd0), e));
  EXPECT_TRUE(c.store(0x3000, 0, fn(0xe0), e));
  EXPECT_EQ(c.find(0x1000, 1), nullptr);
  EXPECT_EQ(c.find(0x1000, 0), fn(0xd0));
}

TEST(CallerCache, WhatWasResolvedBeforeAnEmptyingIsNotStored) {
  Cache c;
  std::atomic<void*> beside{nullptr};
  const uint64_t before = c.epoch();
  c.empty([] {});
  EXPECT_FALSE(c.store(0x1000, 0, fn(0xa0), before));
  EXPECT_FALSE(c.store_beside(beside, fn(0xc), before));
  EXPECT_EQ(c.find(0x1000, 0), nullptr);
  EXPECT_EQ(beside.load(), nullptr);
}

// A caller that neither scope serves (a function pointer from dlsym on a
// runtime loaded RTLD_LOCAL) is remembered with the loader generation of the
// search, so that its calls stop asking the loader (symbol_table.cpp).
TEST(CallerCache, RemembersAMissWithItsLoaderGeneration) {
  Cache c;
  const uint64_t e = c.epoch();
  EXPECT_EQ(c.missed_at(0x1000, 0), 0u);
  EXPECT_TRUE(c.store_miss(0x1000, 0, 7, e));
  EXPECT_EQ(c.missed_at(0x1000, 0), 7u);
  EXPECT_EQ(c.missed_at(0x1000, 1), 0u);  // per function
  EXPECT_EQ(c.missed_at(0x2000, 0), 0u);  // per object
  EXPECT_EQ(c.find(0x1000, 0), nullptr);  // a miss is no function
  EXPECT_TRUE(c.store_miss(0x1000, 0, 9, e));  // the loader moved: searched again, still missing
  EXPECT_EQ(c.missed_at(0x1000, 0), 9u);
  // A function found for the same object keeps its entry (one entry an object).
  EXPECT_TRUE(c.store(0x1000, 1, fn(0xa1), e));
  EXPECT_EQ(c.find(0x1000, 1), fn(0xa1));
  EXPECT_EQ(c.missed_at(0x1000, 0), 9u);
  EXPECT_TRUE(c.store_miss(0x2000, 2, 9, e));
  EXPECT_FALSE(c.store_miss(0x3000, 0, 9, e));  // full
  EXPECT_FALSE(c.store_miss(0x1000, 0, 0, e));  // a loader that does not count: never remembered
  EXPECT_FALSE(c.store_miss(0, 0, 9, e));
  EXPECT_FALSE(c.store_miss(0x1000, 3, 9, e));
}

TEST(CallerCache, EmptyingForgetsMisses) {
  Cache c;
  const uint64_t before = c.epoch();
  ASSERT_TRUE(c.store_miss(0x1000, 0, 5, before));
  c.empty([] {});
  EXPECT_EQ(c.missed_at(0x1000, 0), 0u);
  EXPECT_FALSE(c.store_miss(0x1000, 0, 5, before));  // searched before the emptying: not kept
  const uint64_t e = c.epoch();
  EXPECT_TRUE(c.store(0x1000, 1, fn(0xa1), e));  // a new object at the same address starts without one
  EXPECT_EQ(c.missed_at(0x1000, 0), 0u);
}

// Readers never see another object's function, while writers fill and an
// emptier empties the table (a run under TSan checks the ordering too).
TEST(CallerCache, ReadersSeeOnlyTheirObjectsFunctions) {
  CallerCache<4, 2> c;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (uintptr_t object = 1; object <= 3; ++object) {
    threads.emplace_back([&, object] {
      const uintptr_t key = object << 12;
      while (!stop.load(std::memory_order_relaxed)) {
        for (size_t f = 0; f < 2; ++f) {
          void* p = c.find(key, f);
          if (p && p != fn(key + f + 1)) wrong.fetch_add(1);
          if (!p) c.store(key, f, fn(key + f + 1), c.epoch());
        }
      }
    });
  }
  for (int i = 0; i < 2000; ++i) c.empty([] {});
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace cuxfer::shim
