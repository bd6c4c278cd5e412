// Content fingerprints in a streamed report (analyses/stream.h,
// analyses/duplicates.h): a job whose copies carry the shim's fingerprints
// streams, and its duplicate_uploads and round_trips (and the rest of the
// report) equal the ones made holding every event, byte for byte: the first
// pass gathers each process's fingerprints, the tally's pass keeps the
// fingerprinted copies as the GPU join hands them out, and each process's
// copies that repeat are summed per site and merged as the sites are.
#include <gtest/gtest.h>

#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

class StreamDuplicates : public JobTest {
 protected:
  // The shim's fingerprint of the copy with correlation id `corr`.
  static void print(SyntheticTrace& t, uint32_t corr, Direction dir, uint64_t bytes, uint64_t device_ptr,
                    uint64_t hash) {
    trace::Event& f = t.add(trace::EventKind::Fingerprint, trace::kFingerprintApiName, dir, MemKind::Unknown,
                            MemKind::Unknown, bytes, 300);
    f.correlation_id = corr;
    f.address = hash;
    f.stream = device_ptr;
  }

  // A copy and its fingerprint after it, as the shim writes them; the copy's index.
  static size_t copy_with_print(SyntheticTrace& t, Direction dir, MemKind host, uint64_t bytes,
                                uint64_t cpu_ns, bool async, uint32_t site, uint64_t device_ptr,
                                uint64_t hash) {
    const size_t i = t.events.size();
    const uint32_t corr = t.copy(dir, host, bytes, cpu_ns, async, site).correlation_id;
    print(t, corr, dir, bytes, device_ptr, hash);
    return i;
  }

  // A training loop's copies with fingerprints: batches uploaded again to the
  // buffer that holds them (duplicates), results downloaded and uploaded back
  // (round trips), a tiny storm without fingerprints between them; failed
  // copies with a fingerprint, fingerprints of no copy, a fingerprint written
  // before its copy, a copy fingerprinted twice (the last counts), copies
  // without a call site, and a second thread whose copies entered before
  // ones written ahead of them, some at the same nanosecond (`gpu`: not
  // there, the join wants calls in entry order). With `gpu`, CUPTI's records
  // without correlation ids (joined by time), after the events: the copies'
  // time is their GPU time.
  static SyntheticTrace with_prints(uint32_t pid, bool gpu, uint64_t site_base) {
    SyntheticTrace t(pid);
    t.process.trace_name = "fp" + std::to_string(pid);
    t.events_per_block = 61;
    const uint32_t upload = t.site(site_base + 0x1000), result = t.site(site_base + 0x2000),
                   storm = t.site(site_base + 0x3000), back = t.site(site_base + 0x4000);
    const uint32_t loader = pid + 1;
    for (int step = 0; step < 12; ++step) {
      // The batch into one of 2 buffers, the same bytes as two steps before
      // (a duplicate) every other time.
      const uint64_t buffer = 0xd000 + step % 2 * 0x100, batch = 11 + step / 4 % 2;
      copy_with_print(t, Direction::HtoD, MemKind::Pageable, 4 * MiB, 1'500'000 + step, false, upload, buffer,
                      batch);
      for (int i = 0; i < 40; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000 + i % 5, false, storm);
      // A result brought to the host and uploaded back unchanged (every other step), or changed.
      copy_with_print(t, Direction::DtoH, MemKind::Pinned, 2 * MiB, 700'000, false, result, 0xe000,
                      500 + step);
      copy_with_print(t, Direction::HtoD, MemKind::Pinned, 2 * MiB, 650'000 + 10 * step, true, back, 0xf000,
                      step % 2 ? 500 + step : 900 + step);
      // A failed upload of what the buffer holds: no copy, no finding.
      const size_t failed = copy_with_print(t, Direction::HtoD, MemKind::Pageable, 4 * MiB, 80'000, false,
                                            upload, buffer, batch);
      t.events[failed].flags |= trace::kFlagFailed;
      // A fingerprint of no copy (its id is no event's).
      print(t, 900'000 + step, Direction::HtoD, 4 * MiB, 0xd000, 11);
      // Its fingerprint first, then the copy (an upload back without a call site).
      print(t, 0, Direction::HtoD, MiB, 0xa000, 500 + step);
      const size_t late = t.events.size() - 1;
      t.events[late].correlation_id = static_cast<uint32_t>(t.events.size() + 1);
      t.copy(Direction::HtoD, MemKind::Pageable, MiB, 300'000, false);
      // Fingerprinted twice: the first says what its buffer holds (a
      // duplicate), the last, which counts, says new bytes.
      const uint64_t other = 0xb000 + step % 2 * 0x100;
      const size_t twice = copy_with_print(t, Direction::HtoD, MemKind::Pageable, 4 * MiB, 1'400'000, false,
                                           upload, other, 7000 + step - 2);
      print(t, t.events[twice].correlation_id, Direction::HtoD, 4 * MiB, other, 7000 + step);
      if (!gpu) {
        // The loader's download, then its upload back, both entered before
        // the copies above and at the same nanosecond: by entry time, then
        // in trace order, the upload is a duplicate of the download.
        const uint64_t at = t.events[twice].t_enter_ns - 5'000;
        for (Direction dir : {Direction::DtoH, Direction::HtoD}) {
          const size_t i = copy_with_print(t, dir, MemKind::Pageable, 8 * MiB, 2'000'000, false, back, 0xc000,
                                           40 + step % 4);
          t.events[i].thread_id = loader;
          t.events[i].t_enter_ns = at;
          t.events[i].t_exit_ns = at + 2'000'000;
        }
      }
    }
    if (gpu) t.time_copies_on_gpu(3);
    return t;
  }

  // Both ways of making the report, after checking the whole one has both findings.
  void expect_streamed_equals_whole(const std::vector<std::string>& paths) {
    const analyses::Report whole = analyses::analyze(load_paths(paths));
    const analyses::Finding* dup = find_finding(whole, "duplicate_uploads");
    const analyses::Finding* trip = find_finding(whole, "round_trips");
    ASSERT_TRUE(dup && trip) << "the traces lost their point";
    const std::optional<analyses::Report> streamed = streamed_report(paths);
    ASSERT_TRUE(streamed);
    EXPECT_EQ(render_json_and_text(*streamed), render_json_and_text(whole));
  }
};

TEST_F(StreamDuplicates, OneProcessStreamsAndEqualsTheWholeReport) {
  for (bool gpu : {false, true}) {
    SCOPED_TRACE(gpu ? "with GPU records" : "without GPU records");
    expect_streamed_equals_whole({write(with_prints(4242, gpu, 0x400000), gpu ? "gpu.trace" : "cpu.trace")});
  }
}

TEST_F(StreamDuplicates, ProcessesAreWalkedApartAndTheirSitesMerged) {
  // The same contents in three processes (no process repeats another's
  // bytes), one with GPU records; copies without a site in each.
  const std::vector<std::string> paths = {write(with_prints(100, false, 0x400000), "a.trace"),
                                          write(with_prints(200, true, 0x500000), "b.trace"),
                                          write(with_prints(300, false, 0x600000), "c.trace")};
  expect_streamed_equals_whole(paths);
  const analyses::Report whole = analyses::analyze(load_paths(paths));
  const analyses::Finding* dup = find_finding(whole, "duplicate_uploads");
  const analyses::Finding* trip = find_finding(whole, "round_trips");
  ASSERT_TRUE(dup && trip);
  // A site per process at least; the round trips without a site are one
  // entry for the job (site id 0), as the processes' sums are merged.
  EXPECT_GE(dup->callsites.size(), 3u);
  EXPECT_GE(trip->callsites.size(), 3u);
  EXPECT_EQ(std::count_if(trip->sites.begin(), trip->sites.end(),
                          [](const analyses::FindingSite& s) { return s.callsite == 0; }),
            1);
}

TEST_F(StreamDuplicates, FingerprintsOfNoCopyOrOfFailedCopiesOnly) {
  // Fingerprints, but none of a successful copy: no finding either way.
  SyntheticTrace t;
  const uint32_t s = t.site(0x401000);
  for (int i = 0; i < 5; ++i) {
    const size_t c =
        copy_with_print(t, Direction::HtoD, MemKind::Pageable, 4 * MiB, 1'000'000, false, s, 0xd000, 1);
    t.events[c].flags |= trace::kFlagFailed;
    print(t, 777'000 + i, Direction::HtoD, 4 * MiB, 0xd000, 1);
  }
  const std::vector<std::string> paths = {write(t, "none.trace")};
  const analyses::Report whole = analyses::analyze(load_paths(paths));
  EXPECT_FALSE(find_finding(whole, "duplicate_uploads"));
  const std::optional<analyses::Report> streamed = streamed_report(paths);
  ASSERT_TRUE(streamed);
  EXPECT_EQ(render_json_and_text(*streamed), render_json_and_text(whole));
}

}  // namespace
}  // namespace cuxfer::testing
