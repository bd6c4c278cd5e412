// core/huge_region: the stack walks' random-access tables carved from one
// 2 MiB region marked for a transparent huge page, and calloc's memory when
// the region is full.
#include "core/huge_region.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace cuxfer::shim::huge_region {
namespace {

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

// The VmFlags line of the mapping that holds `p` (/proc/self/smaps).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugeRegion, CarvesAlignedZeroedTablesFromOneRegion) {
  Region region;
  ASSERT_NE(region.base(), 0u) << "the region could not be mapped";
  EXPECT_EQ(region.base() % kRegionBytes, 0u);  // a huge page can back all of it
  void* a = region.carve(1000);
  void* b = region.carve(5000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a), region.base());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) - reinterpret_cast<uintptr_t>(a), 1024u);  // 1000 rounded to lines
  EXPECT_TRUE(region.contains(a));
  EXPECT_TRUE(region.contains(b));
  EXPECT_FALSE(region.contains(&region));
  EXPECT_TRUE(all_zero(a, 1000));
  EXPECT_TRUE(all_zero(b, 5000));
  std::memset(a, 0xab, 1000);
  EXPECT_TRUE(all_zero(b, 5000));  // pieces never overlap
}

TEST(HugeRegion, FullThenNull) {
  Region region;
  ASSERT_NE(region.base(), 0u);
  EXPECT_NE(region.carve(kRegionBytes - 128), nullptr);
  EXPECT_NE(region.carve(64), nullptr);
  EXPECT_NE(region.carve(1), nullptr);  // the last line
  EXPECT_EQ(region.carve(1), nullptr);
  EXPECT_EQ(region.carve(0), nullptr);
}

TEST(HugeRegion, TheRegionIsMarkedForHugePages) {
  Region region;
  void* a = region.carve(64);
  ASSERT_NE(a, nullptr);
  const std::string flags = vm_flags_of(a);
  ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds " << a;
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!thp) GTEST_SKIP() << "this kernel has no transparent huge pages: the region is 4 KiB pages";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;  // MADV_HUGEPAGE
}

TEST(HugeRegion, TheProcessTablesComeFromTheRegionUntilItIsFull) {
  // The process's region serves what fits (the unwinder's memo and the
  // Python code table, 1.4 MiB together); a table that does not fit comes
  // from the heap, zeroed and aligned all the same.
  void* big = allocate_zeroed(kRegionBytes + 64);
  ASSERT_NE(big, nullptr);
  EXPECT_FALSE(contains(big));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  EXPECT_TRUE(all_zero(big, kRegionBytes + 64));
  release(big);
  void* small = allocate_zeroed(64);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  EXPECT_TRUE(all_zero(small, 64));
  release(small);  // kept if it is the region's, freed if the region was full
}

}  // namespace
}  // namespace cuxfer::shim::huge_region
