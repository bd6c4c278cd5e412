#include "record/correlation_ids.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

using cuxfer::shim::CorrelationBlock;
using cuxfer::shim::CorrelationIds;

TEST(CorrelationIds, OneThreadCountsFromOneWithoutGaps) {
  CorrelationIds ids;
  CorrelationBlock b;
  for (uint32_t i = 1; i <= 3 * CorrelationIds::kBlock + 5; ++i) ASSERT_EQ(ids.next(b), i);
}

TEST(CorrelationIds, ThreadsGetDisjointBlocks) {
  CorrelationIds ids;
  constexpr int kThreads = 8, kPerThread = 10'000;
  std::vector<std::vector<uint32_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      CorrelationBlock b;
      for (int i = 0; i < kPerThread; ++i) got[t].push_back(ids.next(b));
    });
  for (auto& th : threads) th.join();
  std::set<uint32_t> all;
  for (const auto& v : got) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));  // increasing per thread
    all.insert(v.begin(), v.end());
  }
  EXPECT_EQ(all.size(), size_t{kThreads} * kPerThread);  // unique across threads
  EXPECT_EQ(all.count(0), 0u);
}

TEST(CorrelationIds, TheCounterWrapsWithoutHandingOutZero) {
  // The last whole block before 2^32 ends at 0: it stops one short.
  CorrelationIds ids(UINT32_MAX - CorrelationIds::kBlock + 1);
  CorrelationBlock b;
  std::vector<uint32_t> got;
  for (uint32_t i = 0; i < 2 * CorrelationIds::kBlock; ++i) got.push_back(ids.next(b));
  EXPECT_EQ(std::count(got.begin(), got.end(), 0u), 0);
  EXPECT_EQ(got.front(), UINT32_MAX - CorrelationIds::kBlock + 2);
  EXPECT_EQ(got[CorrelationIds::kBlock - 2], UINT32_MAX);
  EXPECT_EQ(got[CorrelationIds::kBlock - 1], 1u);  // the next block, after the wrap
}

TEST(CorrelationIds, ABlockStartingAtZeroStartsAtOne) {
  CorrelationIds ids(UINT32_MAX);  // the next block would start at 0
  CorrelationBlock b;
  EXPECT_EQ(ids.next(b), 1u);
  for (uint32_t i = 2; i < CorrelationIds::kBlock; ++i) EXPECT_EQ(ids.next(b), i);
}
