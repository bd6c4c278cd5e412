// Traces whose CUPTI governor turned the copy records off for a while, in a
// streamed report (analyses/stream.h, model::StreamedGpuJoin): they stream,
// and the report equals the one made holding every event, byte for byte,
// the second pass of the join by time (records of copies that raced the
// switch to on, kSwitchLookBack) included, and so is the HTML report, whose
// timeline colours each record by the class of the call it joined.
#include <gtest/gtest.h>

#include "analyzer/model/gpu_join.h"
#include "analyzer/render/html_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::GateReason;
using trace::MemKind;

constexpr uint64_t KiB = 1 << 10, MiB = 1 << 20;

class StreamGovernor : public JobTest {
 protected:
  // A record of CUPTI's (no correlation id: joined by time) for a copy like
  // `e`, starting `after` its entry and lasting `ns`.
  static void record(SyntheticTrace& t, const trace::Event& e, uint64_t after, uint64_t ns, uint64_t bytes = 0) {
    t.gpu(e, ns, bytes);
    trace::GpuRecord& r = t.gpu_records.back();
    r.correlation_id = 0;
    r.start_ns = e.t_enter_ns + after;
    r.end_ns = r.start_ns + ns;
    r.cupti_copy_kind = e.direction == static_cast<uint8_t>(Direction::HtoD) ? 1 : 2;
    r.src_kind = e.src_kind;
    r.dst_kind = e.dst_kind;
    if (e.flags & trace::kFlagStaged) r.src_kind = r.dst_kind = static_cast<uint8_t>(MemKind::Pinned);
  }

  // A training loop under the governor: `stretches` stretches of `copies`
  // copies each, the records on (flagged copies with their records), then
  // off (no flag, no record), and so on; after each change to on, the first
  // `race` copies are not flagged yet have records (their DMAs queued, the
  // later starting first now and then); staged copies (their chunks'
  // records; staged copies the hooks did not flag are never raced); a
  // record of a copy the hooks never saw now and then (it may go to a copy
  // made while off); failed copies; a second thread. `first_on`: the trace
  // begins with the records on.
  static SyntheticTrace governed(uint32_t pid, int stretches, int copies, int race, uint64_t site_base,
                                 bool first_on = true) {
    SyntheticTrace t(pid);
    t.process.trace_name = "gov" + std::to_string(pid);
    t.events_per_block = 97;
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    const uint32_t load = t.site(site_base + 0x1000), step = t.site(site_base + 0x2000),
                   result = t.site(site_base + 0x3000);
    bool on = first_on;
    for (int s = 0; s < stretches; ++s) {
      if (s > 0 || !on) {
        t.cupti_gate.push_back({t.clock_ns - (on ? 0 : 300), on, on ? GateReason::AsyncCopies : GateReason::SyncOnly});
      }
      for (int i = 0; i < copies; ++i) {
        const int kind = (i * 7 + s) % 11;
        trace::Event* e = nullptr;
        if (kind < 5)
          e = &t.copy(Direction::HtoD, MemKind::Pageable, 4 * KiB * (1 + i % 3), 9'000 + i % 13, true, step);
        else if (kind < 8)
          e = &t.copy(Direction::DtoH, MemKind::Pinned, 64 * KiB, 5'000 + i % 7, true, result);
        else if (kind < 10)
          e = &t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 400'000 + i, false, load);
        else
          e = &t.add(trace::EventKind::Memset, "cudaMemsetAsync", Direction::DtoD, MemKind::Device,
                     MemKind::Device, 4 * KiB, 3'000, trace::kFlagAsync, step);
        if (i % 5 == 1) e->thread_id = pid + 1;
        if (i % 37 == 5) e->flags |= trace::kFlagFailed;
        if (kind == 8 && i % 4 == 0) e->flags |= trace::kFlagStaged;
        const bool flagged = on && (s == 0 || i >= race);
        if (flagged) e->flags |= trace::kFlagGpuExpected;
        if (!on || (e->flags & trace::kFlagFailed)) continue;
        if (i % 43 == 9) continue;  // its record lost
        const trace::Event copy = *e;
        if (copy.flags & trace::kFlagStaged) {
          record(t, copy, 200, 20'000, copy.bytes / 2);
          if (i % 8 != 0) record(t, copy, 30'000, 20'000, copy.bytes - copy.bytes / 2);  // a chunk lost
        } else {
          // Queued DMAs of the race: the later copy's starting first now and then.
          const uint64_t after = !flagged && i % 2 == 0 ? 15'000 : 100 + static_cast<uint64_t>(i % 9) * 10;
          record(t, copy, after, 2'000 + static_cast<uint64_t>(i % 17) * 100);
        }
        if (i % 23 == 11) {
          // A copy the hooks never saw, of a size copies made while off have.
          record(t, copy, 600, 999, 4 * KiB * (1 + (i / 23) % 3));
          trace::GpuRecord& u = t.gpu_records.back();
          u.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
          u.cupti_copy_kind = 1;
          u.src_kind = static_cast<uint8_t>(MemKind::Pageable);
          u.dst_kind = static_cast<uint8_t>(MemKind::Device);
        }
      }
      on = !on;
    }
    // CUPTI hands the records over in start order within a buffer, not across them.
    std::stable_sort(t.gpu_records.begin(), t.gpu_records.end(),
                     [](const trace::GpuRecord& a, const trace::GpuRecord& b) { return a.start_ns < b.start_ns; });
    return t;
  }

  // Both ways of making the report, after checking the whole one's second
  // pass gave records to copies no hook flagged.
  void expect_streamed_equals_whole(const std::vector<std::string>& paths) {
    const model::Job job = load_paths(paths);
    size_t raced = 0;
    for (const model::Call& c : job.calls)
      raced += c.has_gpu_time() && !(c.event->flags & trace::kFlagGpuExpected);
    ASSERT_GT(raced, 0u) << "the traces lost their point: no copy raced a switch";
    const analyses::Report whole = analyses::analyze(job);
    analyses::CopyPlots plots;
    const std::optional<analyses::Report> streamed = streamed_report(paths, &plots);
    ASSERT_TRUE(streamed);
    EXPECT_EQ(render_json_and_text(*streamed), render_json_and_text(whole));
    // The HTML timeline colours each record by the call either join gave it.
    EXPECT_EQ(render::render_html(*streamed, plots, nullptr), render::render_html(whole, job, nullptr));
  }
};

TEST_F(StreamGovernor, OneProcessWithSeveralSwitchesStreamsAndEqualsTheWholeReport) {
  // Races shorter than the second pass's look-back, and longer.
  for (int race : {6, 300}) {
    SCOPED_TRACE(race);
    expect_streamed_equals_whole({write(governed(4242, 7, 700, race, 0x400000), "gov" + std::to_string(race) + ".trace")});
  }
}

TEST_F(StreamGovernor, TraceThatBeginsWithTheRecordsOff) {
  expect_streamed_equals_whole({write(governed(4243, 4, 500, 20, 0x400000, /*first_on=*/false), "off.trace")});
}

TEST_F(StreamGovernor, ProcessesWithTheirOwnSwitches) {
  // Three processes, their switches at different times, one never governed.
  SyntheticTrace plain = governed(300, 1, 400, 0, 0x600000);
  const std::vector<std::string> paths = {write(governed(100, 5, 300, 10, 0x400000), "a.trace"),
                                          write(governed(200, 9, 150, 40, 0x500000), "b.trace"),
                                          write(plain, "c.trace")};
  expect_streamed_equals_whole(paths);
}

// A governed trace is no longer one whose report needs its events.
TEST_F(StreamGovernor, NeedsEventsNoLongerNamesTheGovernor) {
  const std::vector<std::string> paths = {write(governed(4244, 3, 200, 8, 0x400000), "gov.trace")};
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errs;
  auto headers = model::read_traces(paths, errs, skip);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_FALSE(analyses::needs_events(headers[0]));
  auto sym = symbolize::make_symbolizer(false);
  const model::Job frame = model::build_job(std::move(headers), *sym);
  EXPECT_FALSE(analyses::needs_events(frame));
  EXPECT_TRUE(model::calls_stream(frame.processes[0]));
}

}  // namespace
}  // namespace cuxfer::testing
