// The shim's out-of-memory path (shim/core/allocation.h): what it serves when
// malloc has failed, and that it stops recording once.
#include "core/allocation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace al = cuxfer::shim::allocation;

namespace {
int g_calls = 0;
void count_call() { ++g_calls; }
}  // namespace

TEST(Allocation, MallocFirst) {
  void* p = al::allocate(100);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 100);
  al::release(p);
  void* q = al::allocate_aligned(100, 4096);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  al::release(q);
  al::release(nullptr);
}

TEST(Allocation, ReserveServesAlignedDistinctBlocksAndStopsRecordingOnce) {
  g_calls = 0;
  al::set_out_of_memory_handler(&count_call);
  EXPECT_FALSE(al::exhausted());
  EXPECT_EQ(g_calls, 0);
  auto* a = static_cast<unsigned char*>(al::serve_from_reserve(24, 1));
  auto* b = static_cast<unsigned char*>(al::serve_from_reserve(1000, 64));
  auto* c = static_cast<unsigned char*>(al::serve_from_reserve(10, 4096));
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % alignof(std::max_align_t), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 4096, 0u);
  EXPECT_GE(b, a + 24);
  EXPECT_GE(c, b + 1000);
  std::memset(a, 1, 24);
  std::memset(b, 2, 1000);
  std::memset(c, 3, 10);
  EXPECT_EQ(a[23], 1);
  EXPECT_EQ(b[0], 2);
  EXPECT_TRUE(al::exhausted());
  EXPECT_EQ(g_calls, 1) << "the handler runs on the first allocation from the reserve only";
  al::release(b);  // a reserve block is never handed to free()
  EXPECT_EQ(b[999], 2);
  // A handler set afterwards still learns it (a static constructor ran out first).
  al::set_out_of_memory_handler(&count_call);
  EXPECT_EQ(g_calls, 2);
}

TEST(AllocationDeathTest, SpentReserveAbortsWithOneLine) {
  EXPECT_DEATH(
      {
        al::serve_from_reserve(al::kReserveBytes / 2, 1);
        al::serve_from_reserve(al::kReserveBytes / 2 + 4096, 1);
      },
      "its reserve is spent: aborting");
}
