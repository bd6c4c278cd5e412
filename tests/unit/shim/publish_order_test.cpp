// PublishOrder: what an insert-only table's writer collects is what became
// ready since the last collection, each id once, from any number of threads.
#include "core/publish_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace cuxfer::shim {
namespace {

std::vector<uint32_t> drained(PublishOrder& o) {
  std::vector<uint32_t> ids;
  o.drain([&](uint32_t id) { ids.push_back(id); });
  return ids;
}

TEST(PublishOrder, EachIdOnceInTheOrderPublished) {
  PublishOrder o(8);
  EXPECT_TRUE(drained(o).empty());
  o.publish(5);
  o.publish(2);
  EXPECT_EQ(drained(o), (std::vector<uint32_t>{5, 2}));
  EXPECT_TRUE(drained(o).empty());  // nothing new
  o.publish(7);
  EXPECT_EQ(drained(o), (std::vector<uint32_t>{7}));
  // A fork child's new trace wants everything again.
  o.rewind();
  EXPECT_EQ(drained(o), (std::vector<uint32_t>{5, 2, 7}));
}

TEST(PublishOrder, MoreThanTheCapacityIsIgnored) {
  PublishOrder o(2);
  for (uint32_t id = 1; id <= 4; ++id) o.publish(id);
  EXPECT_EQ(drained(o), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(drained(o).empty());
}

TEST(PublishOrder, ManyThreadsWhileTheWriterDrains) {
  constexpr uint32_t kThreads = 8, kPer = 2000;
  PublishOrder o(kThreads * kPer);
  std::vector<uint32_t> seen;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done.load()) o.drain([&](uint32_t id) { seen.push_back(id); });
    o.drain([&](uint32_t id) { seen.push_back(id); });
  });
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (uint32_t i = 0; i < kPer; ++i) o.publish(t * kPer + i + 1);
    });
  for (auto& t : ts) t.join();
  done.store(true);
  writer.join();
  ASSERT_EQ(seen.size(), kThreads * kPer);
  std::sort(seen.begin(), seen.end());
  for (uint32_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], i + 1);
}

}  // namespace
}  // namespace cuxfer::shim
