// RegistrationCache against a fake driver that enforces what the real one
// does: no overlapping registrations, unregister only what was registered.
#include "rewrite/registration_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace cuxfer::shim::rewrite {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr int kAlreadyRegistered = 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
constexpr int kNotRegistered = 713;

class FakeDriver : public RegistrationOps {
 public:
  int register_range(uint64_t b, uint64_t n) override {
    std::lock_guard<std::mutex> lock(mu);
    if (fail_next) return fail_next = false, 2;  // CUDA_ERROR_OUT_OF_MEMORY
    for (auto& [rb, re] : live)
      if (rb < b + n && b < re) return kAlreadyRegistered;
    live[b] = b + n;
    log.push_back("reg " + std::to_string(b / MiB) + "+" + std::to_string(n / MiB));
    return 0;
  }
  int unregister_range(uint64_t b) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!live.erase(b)) return kNotRegistered;
    log.push_back("unreg " + std::to_string(b / MiB));
    return 0;
  }
  void on_registered(uint64_t b, uint64_t e) override { marked += e - b; }
  void on_unregistered(uint64_t b, uint64_t e) override { marked -= e - b; }
  uint64_t pinned() {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (auto& [b, e] : live) n += e - b;
    return n;
  }
  std::mutex mu;
  std::map<uint64_t, uint64_t> live;
  std::vector<std::string> log;
  std::atomic<int64_t> marked{0};
  bool fail_next = false;
};

TEST(RegistrationCache, RegistersPageRoundedAndLooksUp) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  EXPECT_EQ(c.lookup(10 * MiB, 100), Cover::None);
  AddResult r = c.add(10 * MiB + 100, 12 * MiB + 5);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 12 * MiB + 4096);
  EXPECT_EQ(c.lookup(10 * MiB + 100, 2 * MiB), Cover::Covers);
  EXPECT_EQ(c.lookup(12 * MiB, 4096), Cover::Covers);
  EXPECT_EQ(c.lookup(12 * MiB, 8192), Cover::Touches);  // runs past the registration
  EXPECT_EQ(c.lookup(9 * MiB, 2 * MiB), Cover::Touches);
  EXPECT_EQ(c.lookup(20 * MiB, 1), Cover::None);
  EXPECT_EQ(drv.marked, int64_t(2 * MiB + 4096));
  EXPECT_FALSE(c.empty());
}

TEST(RegistrationCache, OverlapsMergeIntoOneRegistration) {
  // Two heap blocks sharing a page: the driver refuses overlapping
  // registrations, so the second becomes the union of both.
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  ASSERT_EQ(c.add(10 * MiB, 11 * MiB + 100).status, 0);
  AddResult r = c.add(11 * MiB + 200, 13 * MiB);
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.begin, 10 * MiB);
  EXPECT_EQ(r.end, 13 * MiB);
  EXPECT_EQ(r.unregistered, 1u);
  EXPECT_EQ(c.count(), 1u);
  EXPECT_EQ(c.lookup(10 * MiB, 3 * MiB), Cover::Covers);
  EXPECT_EQ(drv.pinned(), 3 * MiB);
}

TEST(RegistrationCache, BudgetIsNeverExceededAndLruGoesFirst) {
  FakeDriver drv;
  RegistrationCache c(drv, 8 * MiB);
  ASSERT_EQ(c.add(0x1000 * MiB, 0x1000 * MiB + 3 * MiB).status, 0);  // A
  ASSERT_EQ(c.add(0x2000 * MiB, 0x2000 * MiB + 3 * MiB).status, 0);  // B
  EXPECT_EQ(c.lookup(0x1000 * MiB, MiB), Cover::Covers);               // A used more recently than B
  AddResult r = c.add(0x3000 * MiB, 0x3000 * MiB + 4 * MiB);           // C: needs B's room
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.evicted_bytes, 3 * MiB);
  EXPECT_EQ(c.lookup(0x2000 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(0x1000 * MiB, 1), Cover::Covers);
  EXPECT_LE(drv.pinned(), 8 * MiB);
  EXPECT_LE(c.bytes(), 8 * MiB);
  EXPECT_EQ(c.add(0x4000 * MiB, 0x4000 * MiB + 9 * MiB).status, -1);  // larger than the budget
  EXPECT_LE(drv.pinned(), 8 * MiB);
}

TEST(RegistrationCache, InvalidateDropsEverythingOverlapping) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  c.add(10 * MiB, 12 * MiB);
  c.add(20 * MiB, 22 * MiB);
  c.add(30 * MiB, 32 * MiB);
  EXPECT_EQ(c.invalidate(11 * MiB, 21 * MiB), 2u);  // a partial unmap still drops the whole registration
  EXPECT_EQ(c.lookup(10 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(21 * MiB, 1), Cover::None);
  EXPECT_EQ(c.lookup(30 * MiB, 1), Cover::Covers);
  EXPECT_EQ(c.invalidate(32 * MiB, 40 * MiB), 0u);
  EXPECT_EQ(drv.pinned(), 2 * MiB);
  EXPECT_EQ(c.clear(), 1u);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(drv.pinned(), 0u);
  EXPECT_EQ(drv.marked, 0);
}

TEST(RegistrationCache, DriverFailureLeavesNothingBehind) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  drv.fail_next = true;
  AddResult r = c.add(10 * MiB, 12 * MiB);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.lookup(10 * MiB, 1), Cover::None);
}

TEST(RegistrationCache, ForkChildForgetsWithoutTheDriver) {
  FakeDriver drv;
  RegistrationCache c(drv, 64 * MiB);
  c.add(10 * MiB, 12 * MiB);
  drv.log.clear();
  c.forget_all_after_fork();
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(drv.log.empty());
}

TEST(RegistrationCache, MirrorCountFollowsEntries) {
  FakeDriver drv;
  std::atomic<uint32_t> mirror{0};
  RegistrationCache c(drv, 64 * MiB, &mirror);
  c.add(10 * MiB, 12 * MiB);
  EXPECT_EQ(mirror.load(), 1u);
  c.invalidate(10 * MiB, 11 * MiB);
  EXPECT_EQ(mirror.load(), 0u);
}

// Many threads registering, looking up and invalidating disjoint and shared
// ranges: the fake driver rejects any overlap or double unregister, and at
// the end nothing is left pinned beyond what the cache lists (run under TSan in CI).
TEST(RegistrationCache, ConcurrentUseKeepsDriverAndCacheInStep) {
  FakeDriver drv;
  RegistrationCache c(drv, 32 * MiB);
  std::atomic<int> driver_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        uint64_t base = uint64_t((t + i) % 12) * 4 * MiB;
        switch (i % 3) {
          case 0: {
            AddResult r = c.add(base, base + 3 * MiB);
            if (r.status > 0) ++driver_errors;
            break;
          }
          case 1: c.lookup(base, MiB); break;
          default: c.invalidate(base, base + MiB); break;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(driver_errors.load(), 0);
  EXPECT_EQ(drv.pinned(), c.bytes());
  EXPECT_LE(c.bytes(), 32 * MiB);
  c.clear();
  EXPECT_EQ(drv.pinned(), 0u);
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
