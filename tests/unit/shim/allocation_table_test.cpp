// AllocationTable: lookups by interior pointer, exclusive ends, replacement,
// capacity, generation, and lock-free reads racing with writers.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "memory/allocation_table.h"

namespace cuxfer::shim {
namespace {

using trace::MemKind;

// The table is ~1.5 MiB of slots: keep it off the stack.
std::unique_ptr<AllocationTable> make_table() { return std::make_unique<AllocationTable>(); }

TEST(AllocationTable, EmptyFindsNothing) {
  auto t = make_table();
  EXPECT_EQ(t->size(), 0u);
  EXPECT_FALSE(t->find(0));
  EXPECT_FALSE(t->find(0x1000));
  EXPECT_FALSE(t->find(~0ull));
  EXPECT_FALSE(t->erase(0x1000));
}

TEST(AllocationTable, InsertFindErase) {
  auto t = make_table();
  ASSERT_TRUE(t->insert(0x10000, 0x1000, MemKind::Device, 2));
  EXPECT_EQ(t->size(), 1u);
  auto a = t->find(0x10000);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->begin, 0x10000u);
  EXPECT_EQ(a->end, 0x11000u);
  EXPECT_EQ(a->kind, MemKind::Device);
  EXPECT_EQ(a->device, 2);

  auto e = t->erase(0x10000);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->begin, 0x10000u);
  EXPECT_EQ(e->end, 0x11000u);
  EXPECT_EQ(e->kind, MemKind::Device);
  EXPECT_EQ(e->device, 2);
  EXPECT_EQ(t->size(), 0u);
  EXPECT_FALSE(t->find(0x10000));
  EXPECT_FALSE(t->erase(0x10000));  // already gone
}

TEST(AllocationTable, InteriorPointersAndExclusiveEnd) {
  auto t = make_table();
  ASSERT_TRUE(t->insert(0x20000, 0x100, MemKind::Pinned, -1));
  EXPECT_FALSE(t->find(0x1ffff));  // one before the start
  ASSERT_TRUE(t->find(0x20000));   // first byte
  ASSERT_TRUE(t->find(0x20080));   // interior
  ASSERT_TRUE(t->find(0x200ff));   // last byte
  EXPECT_EQ(t->find(0x200ff)->begin, 0x20000u);
  EXPECT_FALSE(t->find(0x20100));  // end is exclusive
  EXPECT_EQ(t->find(0x20080)->kind, MemKind::Pinned);
  EXPECT_EQ(t->find(0x20080)->device, -1);  // negative devices survive the packing
}

TEST(AllocationTable, EraseOnlyByExactBegin) {
  auto t = make_table();
  ASSERT_TRUE(t->insert(0x30000, 0x1000, MemKind::Managed, 0));
  EXPECT_FALSE(t->erase(0x30001));  // an interior pointer is not an allocation's start
  EXPECT_FALSE(t->erase(0x2ffff));
  EXPECT_EQ(t->size(), 1u);
  EXPECT_TRUE(t->erase(0x30000));
}

TEST(AllocationTable, AdjacentRangesAreDistinct) {
  auto t = make_table();
  // Inserted out of order; the table keeps them sorted.
  ASSERT_TRUE(t->insert(0x3000, 0x1000, MemKind::Device, 1));
  ASSERT_TRUE(t->insert(0x1000, 0x1000, MemKind::Pinned, -1));
  ASSERT_TRUE(t->insert(0x2000, 0x1000, MemKind::Registered, -1));
  EXPECT_EQ(t->size(), 3u);
  EXPECT_FALSE(t->find(0x0fff));
  EXPECT_EQ(t->find(0x1fff)->kind, MemKind::Pinned);
  EXPECT_EQ(t->find(0x2000)->kind, MemKind::Registered);
  EXPECT_EQ(t->find(0x2fff)->kind, MemKind::Registered);
  EXPECT_EQ(t->find(0x3000)->kind, MemKind::Device);
  EXPECT_EQ(t->find(0x3000)->device, 1);
  EXPECT_FALSE(t->find(0x4000));

  // Removing the middle one leaves a hole, not a neighbour's range.
  ASSERT_TRUE(t->erase(0x2000));
  EXPECT_FALSE(t->find(0x2000));
  EXPECT_FALSE(t->find(0x2fff));
  EXPECT_EQ(t->find(0x1000)->kind, MemKind::Pinned);
  EXPECT_EQ(t->find(0x3fff)->kind, MemKind::Device);
}

TEST(AllocationTable, GapBetweenRanges) {
  auto t = make_table();
  ASSERT_TRUE(t->insert(0x1000, 0x10, MemKind::Device, 0));
  ASSERT_TRUE(t->insert(0x2000, 0x10, MemKind::Device, 0));
  EXPECT_FALSE(t->find(0x1010));
  EXPECT_FALSE(t->find(0x1800));
  EXPECT_FALSE(t->find(0x1fff));
  EXPECT_TRUE(t->find(0x2000));
}

TEST(AllocationTable, ReplaceAtSameBegin) {
  auto t = make_table();
  ASSERT_TRUE(t->insert(0x5000, 0x1000, MemKind::Device, 0));
  ASSERT_TRUE(t->insert(0x5000, 0x4000, MemKind::Pinned, -1));  // reused address, new size/kind
  EXPECT_EQ(t->size(), 1u);
  auto a = t->find(0x8fff);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->begin, 0x5000u);
  EXPECT_EQ(a->end, 0x9000u);
  EXPECT_EQ(a->kind, MemKind::Pinned);
  EXPECT_EQ(a->device, -1);
  EXPECT_TRUE(t->erase(0x5000));
  EXPECT_EQ(t->size(), 0u);
}

TEST(AllocationTable, ZeroBytesIsANoOp) {
  auto t = make_table();
  uint64_t g = t->generation();
  EXPECT_TRUE(t->insert(0x7000, 0, MemKind::Device, 0));
  EXPECT_EQ(t->size(), 0u);
  EXPECT_FALSE(t->find(0x7000));
  EXPECT_EQ(t->generation(), g);
}

TEST(AllocationTable, GenerationChangesOnEveryWrite) {
  auto t = make_table();
  uint64_t g0 = t->generation();
  EXPECT_EQ(g0 % 2, 0u);  // no write in progress
  ASSERT_TRUE(t->insert(0x1000, 0x100, MemKind::Device, 0));
  uint64_t g1 = t->generation();
  EXPECT_NE(g1, g0);
  ASSERT_TRUE(t->insert(0x1000, 0x200, MemKind::Device, 0));  // replace
  uint64_t g2 = t->generation();
  EXPECT_NE(g2, g1);
  ASSERT_TRUE(t->erase(0x1000));
  uint64_t g3 = t->generation();
  EXPECT_NE(g3, g2);
  ASSERT_TRUE(t->insert(0x2000, 0x100, MemKind::Device, 0));
  t->clear();
  uint64_t g4 = t->generation();
  EXPECT_NE(g4, g3);
  EXPECT_EQ(t->size(), 0u);
  EXPECT_FALSE(t->find(0x2000));
  // Failed erases change nothing, so cached answers stay valid.
  EXPECT_FALSE(t->erase(0x9999));
  EXPECT_EQ(t->generation(), g4);
  for (uint64_t g : {g1, g2, g3, g4}) EXPECT_EQ(g % 2, 0u);
}

TEST(AllocationTable, CapacityFullReturnsFalse) {
  auto t = make_table();
  const uint64_t base = 0x100000;
  for (uint64_t i = 0; i < AllocationTable::kCapacity; ++i)
    ASSERT_TRUE(t->insert(base + i * 0x100, 0x80, MemKind::Device, 0)) << i;
  EXPECT_EQ(t->size(), AllocationTable::kCapacity);
  uint64_t g = t->generation();

  // A new range does not fit, before, between or after the existing ones.
  EXPECT_FALSE(t->insert(0x1000, 0x10, MemKind::Pinned, -1));
  EXPECT_FALSE(t->insert(base + 0x80, 0x10, MemKind::Pinned, -1));
  EXPECT_FALSE(t->insert(base + AllocationTable::kCapacity * 0x100, 0x10, MemKind::Pinned, -1));
  EXPECT_EQ(t->generation(), g);
  EXPECT_FALSE(t->find(0x1000));
  EXPECT_FALSE(t->find(base + 0x80));

  // Replacing an existing range still works when full.
  EXPECT_TRUE(t->insert(base + 0x100, 0x40, MemKind::Managed, 3));
  EXPECT_EQ(t->find(base + 0x100)->kind, MemKind::Managed);
  EXPECT_EQ(t->size(), AllocationTable::kCapacity);

  // Every range is still found, first and last included.
  EXPECT_EQ(t->find(base)->begin, base);
  uint64_t last = base + (AllocationTable::kCapacity - 1) * 0x100;
  EXPECT_EQ(t->find(last + 0x7f)->begin, last);
  EXPECT_FALSE(t->find(last + 0x80));

  // One erase makes room for one insert.
  ASSERT_TRUE(t->erase(base + 0x200));
  EXPECT_TRUE(t->insert(0x1000, 0x10, MemKind::Pinned, -1));
  EXPECT_FALSE(t->insert(0x2000, 0x10, MemKind::Pinned, -1));
  EXPECT_EQ(t->find(0x1000)->kind, MemKind::Pinned);
}

// Writers insert and erase their own disjoint ranges while readers look up
// ranges that were inserted before the threads started and are never
// removed. Every read of a permanent range must hit it with the right kind
// and device, whatever the writers are shifting around it; a read of a
// writer's range may hit or miss, but if it hits it must be that range.
TEST(AllocationTable, ConcurrentReadersAndWriters) {
  auto t = make_table();
  constexpr int kPermanent = 64;
  constexpr uint64_t kStride = 0x10000;
  // Permanent range i: [i*stride + 0x1000, i*stride + 0x2000), kind and device depend on i.
  auto perm_kind = [](int i) { return i % 2 ? MemKind::Device : MemKind::Pinned; };
  auto perm_device = [](int i) { return static_cast<int8_t>(i % 2 ? i % 8 : -1); };
  for (int i = 0; i < kPermanent; ++i)
    ASSERT_TRUE(t->insert(i * kStride + 0x1000, 0x1000, perm_kind(i), perm_device(i)));

  constexpr int kWriters = 2, kReaders = 3, kWriterRounds = 20000;
  constexpr uint64_t kMinReads = 20000;  // writers keep going until readers have overlapped them
  std::atomic<bool> go{false};
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> bad{0}, reads{0}, reads_during_writes{0};
  int rounds_done[kWriters] = {};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      while (!go.load()) std::this_thread::yield();
      int round = 0;
      for (; round < kWriterRounds || reads.load(std::memory_order_relaxed) < kMinReads; ++round) {
        // Writer w owns offsets 0x4000 + w*0x2000 in each stride: between the permanent ranges.
        int slot = (round * 7 + w) % kPermanent;
        uint64_t begin = slot * kStride + 0x4000 + w * 0x2000;
        if (!t->insert(begin, 0x1000, MemKind::Managed, static_cast<int8_t>(w))) bad.fetch_add(1);
        if (round % 3 == 0) {
          auto e = t->erase(begin);
          if (!e || e->kind != MemKind::Managed || e->device != w) bad.fetch_add(1);
        }
      }
      rounds_done[w] = round;
      writers_done.fetch_add(1);
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      while (!go.load()) std::this_thread::yield();
      uint64_t n = 0, during = 0;
      for (int iter = 0; iter < 1000 || writers_done.load() < kWriters; ++iter) {
        during += writers_done.load() < kWriters;
        int i = (iter * 13 + r) % kPermanent;
        uint64_t p = i * kStride + 0x1000 + (iter % 0x1000);
        auto a = t->find(p);
        if (!a || a->begin != i * kStride + 0x1000 || a->end != i * kStride + 0x2000 ||
            a->kind != perm_kind(i) || a->device != perm_device(i))
          bad.fetch_add(1);
        // Between ranges: never a permanent range, at most a writer's.
        auto g = t->find(i * kStride + 0x3000);
        if (g) bad.fetch_add(1);
        auto wr = t->find(i * kStride + 0x4800);
        if (wr && (wr->kind != MemKind::Managed || wr->begin != i * kStride + 0x4000)) bad.fetch_add(1);
        ++n;
        if (n % 64 == 0) reads.fetch_add(64, std::memory_order_relaxed);
      }
      reads_during_writes.fetch_add(during);
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads_during_writes.load(), 0u);  // the race was actually run
  // Replaying the writers' operations one after the other gives the final contents.
  std::set<uint64_t> expected;
  for (int w = 0; w < kWriters; ++w)
    for (int round = 0; round < rounds_done[w]; ++round) {
      uint64_t begin = ((round * 7 + w) % kPermanent) * kStride + 0x4000 + w * 0x2000;
      expected.insert(begin);
      if (round % 3 == 0) expected.erase(begin);
    }
  EXPECT_EQ(t->size(), kPermanent + expected.size());
  for (uint64_t b : expected) EXPECT_EQ(t->find(b + 0xfff)->kind, MemKind::Managed);
  for (int i = 0; i < kPermanent; ++i) EXPECT_TRUE(t->find(i * kStride + 0x1800));
  EXPECT_EQ(t->generation() % 2, 0u);
}

}  // namespace
}  // namespace cuxfer::shim
