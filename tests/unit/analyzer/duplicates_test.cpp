// duplicate_uploads and round_trips from fingerprint events, on synthetic traces.
#include <gtest/gtest.h>

#include "analyzer/analyses/duplicates.h"
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

// The walk on its own (analyses/duplicates.h), as both ways of making a
// report use it: one process's fingerprinted copies, in trace order.
trace::Event copy_event(Direction dir, uint64_t t_enter_ns, uint64_t bytes, uint32_t correlation_id) {
  trace::Event e{};
  e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
  e.direction = static_cast<uint8_t>(dir);
  e.src_kind = static_cast<uint8_t>(dir == Direction::HtoD ? MemKind::Pageable : MemKind::Device);
  e.dst_kind = static_cast<uint8_t>(dir == Direction::HtoD ? MemKind::Device : MemKind::Pageable);
  e.t_enter_ns = t_enter_ns;
  e.t_exit_ns = t_enter_ns + 1000;
  e.bytes = bytes;
  e.correlation_id = correlation_id;
  return e;
}
model::Call call_of(const trace::Event& e, uint32_t site, uint64_t gpu_ns = 0) {
  model::Call c;
  c.event = &e;
  c.site = site;
  c.cls = model::classify(e);
  if (gpu_ns) {
    c.gpu_records = 1;
    c.gpu_ns = gpu_ns;
  }
  return c;
}

TEST(RepeatedCopies, OfSeveralFingerprintsOfOneCopyTheLastCounts) {
  analyses::Fingerprints prints;
  prints.add(5, 111, 0xd000);
  prints.add(3, 222, 0xe000);
  prints.add(5, 333, 0xf000);
  prints.finish();
  EXPECT_EQ(prints.size(), 2u);
  ASSERT_NE(prints.find(5), analyses::Fingerprints::kNone);
  EXPECT_EQ(prints[prints.find(5)].hash, 333u);
  EXPECT_EQ(prints[prints.find(5)].device_ptr, 0xf000u);
  EXPECT_EQ(prints[prints.find(3)].hash, 222u);
  EXPECT_EQ(prints.find(4), analyses::Fingerprints::kNone);
  EXPECT_EQ(prints.find(6), analyses::Fingerprints::kNone);
}

TEST(RepeatedCopies, ByEntryTimeThenTraceOrder) {
  analyses::Fingerprints prints;
  for (uint32_t id = 1; id <= 7; ++id)
    prints.add(id, id <= 2 || id == 5 ? 0xA : 0xB, id <= 2 ? 0xd000 : 0xe000);
  prints.add(5, 0xA, 0xf000);  // id 5's last fingerprint: an upload to 0xf000
  prints.finish();
  // In trace order: an upload entered after the download below it (a
  // duplicate once they are taken by entry time); a download and an upload
  // of one buffer at the same nanosecond (in trace order: a duplicate); an
  // upload of what the first download brought to the host (a round trip,
  // timed by its GPU time); a failed upload and one without a fingerprint
  // (not walked).
  const std::vector<trace::Event> events = {
      copy_event(Direction::HtoD, 200, 4 * MiB, 1), copy_event(Direction::DtoH, 100, 4 * MiB, 2),
      copy_event(Direction::DtoH, 300, 2 * MiB, 3), copy_event(Direction::HtoD, 300, 2 * MiB, 4),
      copy_event(Direction::HtoD, 400, 4 * MiB, 5), copy_event(Direction::HtoD, 500, 2 * MiB, 6),
      copy_event(Direction::HtoD, 600, 2 * MiB, 99)};
  std::vector<trace::Event> failed = {copy_event(Direction::HtoD, 550, 2 * MiB, 7)};
  failed[0].flags |= trace::kFlagFailed;
  std::vector<analyses::FingerprintedCopy> copies;
  for (size_t i = 0; i < events.size(); ++i)
    analyses::add_fingerprinted_copy(call_of(events[i], static_cast<uint32_t>(i), i == 4 ? 77'000 : 0),
                                     prints, copies);
  analyses::add_fingerprinted_copy(call_of(failed[0], 9), prints, copies);
  ASSERT_EQ(copies.size(), 6u);  // neither the failed copy nor the one without a fingerprint
  analyses::FindingsTally f;
  analyses::add_repeated_copies(copies, prints, f);
  // Site ids are Call::site + 1.
  ASSERT_EQ(f.duplicate_sites.size(), 7u);  // up to event 5's (0xe000 held 0xB since event 3)
  for (uint32_t id : {1u, 4u, 6u}) {
    EXPECT_EQ(f.duplicate_sites[id].calls, 1u) << id;
    EXPECT_EQ(f.duplicate_sites[id].time_ns, 1000u) << id;
    EXPECT_EQ(f.duplicate_sites[id].recoverable_ns, 1000u) << id;
  }
  EXPECT_EQ(f.duplicate_sites[1].bytes, 4 * MiB);
  EXPECT_EQ(f.duplicate_sites[2].calls + f.duplicate_sites[3].calls + f.duplicate_sites[5].calls, 0u);
  ASSERT_EQ(f.round_trip_sites.size(), 6u);
  EXPECT_EQ(f.round_trip_sites[5].calls, 1u);
  EXPECT_EQ(f.round_trip_sites[5].time_ns, 77'000u);
  EXPECT_EQ(f.round_trip_sites[5].max_ns, 77'000u);

  // The two at the same nanosecond the other way round in the trace: the
  // upload comes first, and repeats nothing.
  std::vector<trace::Event> swapped = {copy_event(Direction::HtoD, 300, 2 * MiB, 4),
                                       copy_event(Direction::DtoH, 300, 2 * MiB, 3)};
  copies.clear();
  for (const trace::Event& e : swapped) analyses::add_fingerprinted_copy(call_of(e, 0), prints, copies);
  analyses::FindingsTally g;
  analyses::add_repeated_copies(copies, prints, g);
  EXPECT_TRUE(g.duplicate_sites.empty());
  EXPECT_TRUE(g.round_trip_sites.empty());
  EXPECT_TRUE(analyses::repeated_copy_findings(g).empty());

  // Many at one nanosecond (more than a sort takes one by one): each
  // download before its upload, as in the trace.
  analyses::Fingerprints many;
  std::vector<trace::Event> pairs;
  for (uint32_t i = 0; i < 40; ++i) {
    many.add(1000 + i, 0x100 + i, 0xd000 + 0x100 * i);
    many.add(2000 + i, 0x100 + i, 0xd000 + 0x100 * i);
  }
  many.finish();
  for (uint32_t i = 0; i < 40; ++i) {
    pairs.push_back(copy_event(Direction::DtoH, 300, MiB, 1000 + i));
    pairs.push_back(copy_event(Direction::HtoD, 300, MiB, 2000 + i));
  }
  copies.clear();
  for (const trace::Event& e : pairs)
    analyses::add_fingerprinted_copy(call_of(e, model::kNoSite), many, copies);
  analyses::FindingsTally h;
  analyses::add_repeated_copies(copies, many, h);
  ASSERT_EQ(h.duplicate_sites.size(), 1u);
  EXPECT_EQ(h.duplicate_sites[0].calls, 40u);

  // The findings from the sums: most recoverable site first.
  const std::vector<analyses::Finding> found = analyses::repeated_copy_findings(f);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].kind, analyses::FindingKind::DuplicateUploads);
  EXPECT_EQ(found[0].calls, 3u);
  EXPECT_EQ(found[0].estimated_recoverable_ns.value_or(0), 3000u);
  EXPECT_EQ(found[1].kind, analyses::FindingKind::RoundTrips);
  EXPECT_EQ(found[1].callsites, std::vector<uint32_t>{5});
}

}  // namespace
}  // namespace cuxfer
