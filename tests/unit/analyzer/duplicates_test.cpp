// duplicate_uploads and round_trips from fingerprint events, on synthetic traces.
#include <gtest/gtest.h>

#include "analyzer/analyses/report.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using testing::find_finding;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

class Duplicates : public JobTest {};

// A copy plus its fingerprint event (as the shim writes them).
void copy_with_print(SyntheticTrace& t, Direction dir, uint64_t device_ptr, uint64_t hash, uint32_t site) {
  trace::Event& c = t.copy(dir, MemKind::Pageable, 2 * MiB, 200'000, false, site);
  const uint32_t corr = c.correlation_id;
  trace::Event& f = t.add(trace::EventKind::Fingerprint, "cuxfer:fingerprint", dir, MemKind::Unknown,
                          MemKind::Unknown, 2 * MiB, 300);
  f.correlation_id = corr;
  f.address = hash;
  f.stream = device_ptr;
}

TEST_F(Duplicates, UploadOfWhatTheDeviceHoldsAndRoundTrip) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  copy_with_print(t, Direction::HtoD, 0xd000, 111, s);  // first upload
  copy_with_print(t, Direction::HtoD, 0xd000, 111, s);  // same bytes again: duplicate
  copy_with_print(t, Direction::HtoD, 0xd000, 222, s);  // new bytes
  copy_with_print(t, Direction::DtoH, 0xe000, 333, s);  // download
  copy_with_print(t, Direction::HtoD, 0xf000, 333, s);  // uploaded back unchanged: round trip
  copy_with_print(t, Direction::HtoD, 0xe000, 333, s);  // to where it came from: the device holds it
  analyses::Report r = analyses::analyze(load(t));
  const analyses::Finding* dup = find_finding(r, "duplicate_uploads");
  const analyses::Finding* trip = find_finding(r, "round_trips");
  ASSERT_TRUE(dup);
  ASSERT_TRUE(trip);
  EXPECT_EQ(dup->calls, 2u);   // the repeat to 0xd000 and the upload back to 0xe000
  EXPECT_EQ(trip->calls, 1u);  // 0xf000
  EXPECT_EQ(dup->estimated_recoverable_ns.value_or(0), 400'000u);
  // Fingerprint events are the shim's: they are not copies in any total.
  EXPECT_EQ(r.totals.calls, 6u);
}

TEST_F(Duplicates, NothingWithoutFingerprints) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  for (int i = 0; i < 3; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 200'000, false, s);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_FALSE(find_finding(r, "duplicate_uploads"));
  EXPECT_FALSE(find_finding(r, "round_trips"));
}

}  // namespace
}  // namespace cuxfer
