// The staging path's host copies: exact bytes for every size and alignment,
// and no mix-up between jobs when several callers and late workers overlap.
#include "rewrite/parallel_memcpy.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace cuxfer::shim::rewrite {
namespace {

std::vector<unsigned char> pattern(size_t n, uint32_t seed) {
  std::vector<unsigned char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<unsigned char>(x);
  }
  return v;
}

TEST(ParallelMemcpy, ExactForSizesAndAlignments) {
  ParallelMemcpy pm(4);
  EXPECT_EQ(pm.threads(), 4u);
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{512} << 10, (size_t{1} << 20) + 3,
                      (size_t{9} << 20) + 7}) {
    for (size_t misalign : {0, 1, 7}) {
      auto src = pattern(size + 8, static_cast<uint32_t>(size + misalign));
      std::vector<unsigned char> dst(size + 16, 0xAB);
      pm.copy(dst.data() + misalign, src.data() + 1, size);
      ASSERT_EQ(std::memcmp(dst.data() + misalign, src.data() + 1, size), 0) << size << " " << misalign;
      for (size_t i = 0; i < misalign; ++i) ASSERT_EQ(dst[i], 0xAB);            // guard before
      for (size_t i = misalign + size; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB);  // guard after
    }
  }
}

TEST(ParallelMemcpy, BackToBackJobsDoNotMix) {
  // Consecutive jobs reuse the workers; a late worker of one job must never
  // copy a piece of the next with the wrong source or destination.
  ParallelMemcpy pm(6);
  constexpr size_t kSize = (3u << 20) + 11;
  for (uint32_t round = 0; round < 200; ++round) {
    auto src = pattern(kSize, round);
    std::vector<unsigned char> dst(kSize, 0);
    pm.copy(dst.data(), src.data(), kSize);
    ASSERT_EQ(std::memcmp(dst.data(), src.data(), kSize), 0) << "round " << round;
  }
}

TEST(ParallelMemcpy, ConcurrentCallersEachGetTheirOwnBytes) {
  ParallelMemcpy pm(4);
  constexpr size_t kSize = (2u << 20) + 5;
  std::vector<std::thread> callers;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      int good = 1;
      for (uint32_t round = 0; round < 30; ++round) {
        auto src = pattern(kSize, 1000u * t + round);
        std::vector<unsigned char> dst(kSize, 0);
        pm.copy(dst.data(), src.data(), kSize);
        good &= std::memcmp(dst.data(), src.data(), kSize) == 0;
      }
      ok[t] = good;
    });
  for (auto& c : callers) c.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 1) << "caller " << t;
}

// populate() faults a fresh mapping in without changing a byte: untouched
// pages read as zero before and after, touched ones keep their contents, and
// every page is resident afterwards (the point: tensor.cpu() into new memory).
TEST(ParallelMemcpy, PopulateFaultsInWithoutChangingContents) {
  ParallelMemcpy pm(4);
  constexpr size_t kSize = 24u << 20;
  auto* p = static_cast<unsigned char*>(mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  // 4 KiB pages, so that two writes touch two pages whatever the machine's THP setting.
  madvise(p, kSize, MADV_NOHUGEPAGE);
  p[12345] = 7;
  p[kSize - 1] = 9;
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident(kSize / page);
  ASSERT_EQ(mincore(p, kSize, resident.data()), 0);
  size_t before = 0;
  for (unsigned char r : resident) before += r & 1;
  EXPECT_LE(before, 2u);
  if (!pm.populate(p + 100, kSize - 200)) {
    munmap(p, kSize);
    GTEST_SKIP() << "MADV_POPULATE_WRITE not supported by this kernel (Linux < 5.14)";
  }
  ASSERT_EQ(mincore(p, kSize, resident.data()), 0);
  size_t after = 0;
  for (unsigned char r : resident) after += r & 1;
  EXPECT_EQ(after, resident.size());
  EXPECT_EQ(p[12345], 7);
  EXPECT_EQ(p[kSize - 1], 9);
  size_t nonzero = 0;
  for (size_t i = 0; i < kSize; ++i) nonzero += p[i] != 0;
  EXPECT_EQ(nonzero, 2u);
  munmap(p, kSize);
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
