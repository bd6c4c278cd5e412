// HostRanges: which host memory the rewrite may register, and its reuse policy.
#include "memory/host_ranges.h"

#include <gtest/gtest.h>

#include <memory>

namespace cuxfer::shim {
namespace {

constexpr uint64_t MiB = 1 << 20;

std::unique_ptr<HostRanges> fresh() { return std::make_unique<HostRanges>(); }

TEST(HostRanges, TrackAndForgetExactly) {
  auto r = fresh();
  EXPECT_TRUE(r->track(100 * MiB, 4 * MiB, HostSource::Malloc));
  EXPECT_TRUE(r->track(200 * MiB, 4 * MiB, HostSource::Mmap));
  EXPECT_EQ(r->size(), 2u);
  EXPECT_FALSE(r->empty());
  EXPECT_EQ(r->source_of(201 * MiB), HostSource::Mmap);
  EXPECT_EQ(r->source_of(150 * MiB), HostSource{});
  uint64_t end = 0;
  EXPECT_FALSE(r->untrack_exact(100 * MiB + 16, &end));  // interior pointer: not a free of this range
  EXPECT_TRUE(r->untrack_exact(100 * MiB, &end));
  EXPECT_EQ(end, 104 * MiB);
  EXPECT_EQ(r->size(), 1u);
}

TEST(HostRanges, NewRangeReplacesStaleOverlaps) {
  // Memory reused behind the shim's back (e.g. unmapped by a raw syscall)
  // must not keep an old range's counters.
  auto r = fresh();
  r->track(100 * MiB, 8 * MiB, HostSource::Mmap);
  r->note_copy(100 * MiB, 8 * MiB, ~0ull);
  r->track(104 * MiB, 8 * MiB, HostSource::Malloc);
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ(r->source_of(100 * MiB), HostSource{});
  EXPECT_EQ(r->source_of(104 * MiB), HostSource::Malloc);
}

TEST(HostRanges, UntrackOverlappingCoversPartialUnmaps) {
  auto r = fresh();
  r->track(10 * MiB, 2 * MiB, HostSource::Mmap);
  r->track(20 * MiB, 2 * MiB, HostSource::Mmap);
  r->track(30 * MiB, 2 * MiB, HostSource::Mmap);
  uint64_t lo = ~0ull, hi = 0;
  EXPECT_EQ(r->untrack_overlapping(11 * MiB, 21 * MiB, &lo, &hi), 2u);  // touches the first two
  EXPECT_EQ(lo, 10 * MiB);
  EXPECT_EQ(hi, 22 * MiB);
  EXPECT_EQ(r->size(), 1u);
  EXPECT_EQ(r->untrack_overlapping(32 * MiB, 40 * MiB), 0u);  // end is exclusive
}

TEST(HostRanges, RegistersAfterTwiceItsSizeInTwoCopies) {
  auto r = fresh();
  r->track(100 * MiB, 4 * MiB, HostSource::Malloc);
  RegisterVerdict v = r->note_copy(100 * MiB, 4 * MiB, ~0ull);
  EXPECT_TRUE(v.tracked);
  EXPECT_FALSE(v.register_now);  // first use: staged, not pinned
  v = r->note_copy(100 * MiB, 4 * MiB, ~0ull);
  EXPECT_TRUE(v.register_now);
  EXPECT_EQ(v.begin, 100 * MiB);
  EXPECT_EQ(v.end, 104 * MiB);
}

TEST(HostRanges, SlicesCountTowardsTheirRange) {
  auto r = fresh();
  r->track(0x100000000ull, 8 * MiB, HostSource::Malloc);
  int copies = 0;
  RegisterVerdict v;
  do {
    v = r->note_copy(0x100000000ull + (copies % 8) * MiB, MiB, ~0ull);
    ++copies;
  } while (!v.register_now && copies < 100);
  EXPECT_EQ(copies, 16);  // one pass over the buffer is not reuse yet; two are
}

TEST(HostRanges, UntrackedLargerOrForbiddenNeverRegister) {
  auto r = fresh();
  EXPECT_FALSE(r->note_copy(5 * MiB, MiB, ~0ull).tracked);
  r->track(100 * MiB, 4 * MiB, HostSource::Malloc);
  EXPECT_FALSE(r->note_copy(99 * MiB, 2 * MiB, ~0ull).tracked);  // starts before the range
  EXPECT_FALSE(r->note_copy(103 * MiB, 2 * MiB, ~0ull).tracked);  // runs past its end
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(r->note_copy(100 * MiB, 4 * MiB, 2 * MiB).register_now);  // over budget
  r->forbid(101 * MiB, 101 * MiB + 1);
  r->track(200 * MiB, 4 * MiB, HostSource::Malloc);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(r->note_copy(100 * MiB, 4 * MiB, ~0ull).register_now);
  r->note_copy(200 * MiB, 4 * MiB, ~0ull);
  EXPECT_TRUE(r->note_copy(200 * MiB, 4 * MiB, ~0ull).register_now);  // forbid hit only its own range
}

TEST(HostRanges, FullTableRefusesQuietly) {
  auto r = fresh();
  for (uint32_t i = 0; i < HostRanges::kCapacity; ++i) ASSERT_TRUE(r->track(uint64_t(i) * 2 * MiB, MiB, HostSource::Malloc));
  EXPECT_FALSE(r->track(uint64_t(HostRanges::kCapacity) * 2 * MiB, MiB, HostSource::Malloc));
  r->clear();
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace cuxfer::shim
