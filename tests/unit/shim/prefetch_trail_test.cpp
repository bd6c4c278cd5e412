// PrefetchTrail: cold captures note and replay per call site, warm ones do
// nothing, the trails are bounded and replaced round robin.
#include <gtest/gtest.h>

#include "core/prefetch_trail.h"

namespace cuxfer::shim {
namespace {

constexpr uint64_t kCold = PrefetchTrail::kColdCycles + 1;

TEST(PrefetchTrail, OnlyAColdCaptureNotes) {
  PrefetchTrail t;
  uint64_t tsc = kCold;  // the first capture of a thread is cold
  t.begin(1, tsc);
  EXPECT_TRUE(t.noting());
  t.note(PrefetchTrail::kNative, 0x1000);
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 1u);
  t.begin(1, tsc += 10);  // right after: warm
  EXPECT_FALSE(t.noting());
  t.note(PrefetchTrail::kNative, 0x2000);
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 0u);
  // Cold again: the site's trail is replayed and started over.
  t.begin(1, tsc += kCold);
  EXPECT_TRUE(t.noting());
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 0u);
}

TEST(PrefetchTrail, BoundedPerPart) {
  PrefetchTrail t;
  t.begin(7, kCold);
  for (uint64_t i = 0; i < 3 * PrefetchTrail::kPerPart; ++i) t.note(PrefetchTrail::kPython, 0x1000 + 64 * i);
  t.note(PrefetchTrail::kNative, 0x9000);
  EXPECT_EQ(t.size(PrefetchTrail::kPython), PrefetchTrail::kPerPart);
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 1u);
  EXPECT_EQ(t.at(PrefetchTrail::kPython, 0), 0x1000u);
  EXPECT_EQ(t.at(PrefetchTrail::kPython, PrefetchTrail::kPerPart), 0u);  // past the end: none
}

TEST(PrefetchTrail, OneTrailPerSiteReplacedRoundRobin) {
  PrefetchTrail t;
  uint64_t tsc = 0;
  // kTrails + 1 sites, each noting its own address: the first site's trail
  // is the one replaced by the last.
  for (uint64_t site = 1; site <= PrefetchTrail::kTrails + 1; ++site) {
    t.begin(site, tsc += kCold);
    t.note(PrefetchTrail::kNative, site * 0x1000);
    EXPECT_EQ(t.at(PrefetchTrail::kNative, 0), site * 0x1000);
  }
  // Site 2 still has its own trail; noting starts it over (its size was 1).
  t.begin(2, tsc += kCold);
  EXPECT_TRUE(t.noting());
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 0u);
  t.note(PrefetchTrail::kNative, 0x2222);
  // Site 1 was replaced: it gets a slot again (the next round-robin one).
  t.begin(1, tsc += kCold);
  EXPECT_TRUE(t.noting());
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 0u);
  // And site 2's note survived site 1's new trail.
  t.begin(2, tsc += kCold);
  EXPECT_EQ(t.size(PrefetchTrail::kNative), 0u);  // replayed, then started over
}

}  // namespace
}  // namespace cuxfer::shim
