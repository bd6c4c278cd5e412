// NVTX ranges in a streamed report (analyses/stream.h): a job whose processes
// pushed ranges streams, and its range table (and the rest of the report)
// equals the one made holding every event, byte for byte: the ranges are
// replayed per thread as the calls are made (model::CallFeed), follow the
// calls through the streamed GPU join, and are summed per (range stack, call
// site, class) in the tally (RangeTally), merged across processes as the
// sites are.
#include <gtest/gtest.h>

#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

class StreamRanges : public JobTest {
 protected:
  // A process with ranges nested on two threads whose events interleave,
  // findings' copies inside them (a tiny storm, async and large pageable
  // copies), failed copies and copies in no range; with `gpu`, CUPTI's
  // records without correlation ids (joined by time), after the events.
  static SyntheticTrace with_ranges(uint32_t pid, bool gpu, const std::string& outer) {
    SyntheticTrace t(pid);
    t.process.trace_name = "nvtx" + std::to_string(pid);
    t.events_per_block = 97;
    const uint32_t a = t.site(0x401000), b = t.site(0x402000), c = t.site(0x403000);
    const uint32_t loader = pid + 1;
    const uint32_t step = t.nvtx_stack({outer}), forward = t.nvtx_stack({outer, "forward"}),
                   load = t.nvtx_stack({outer, "forward", "load"}), eval = t.nvtx_stack({"eval"});
    for (int s = 0; s < 5; ++s) {
      t.nvtx_ranges(pid, step);
      t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 400'000, true, b);
      t.nvtx_ranges(pid, forward);
      t.nvtx_ranges(loader, load);
      for (int i = 0; i < 250; ++i) {
        t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000 + i % 7, false, a);
        if (i % 50 == 0)
          t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 3'000'000, true, c).thread_id = loader;
      }
      auto& failed = t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 900'000, false, c);
      failed.thread_id = loader;
      failed.flags |= trace::kFlagFailed;
      t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 1'900'000, false, b);
      t.nvtx_ranges(loader, 0);
      t.copy(Direction::DtoH, MemKind::Pinned, 4 * MiB, 300'000, true, c).thread_id = loader;
      t.nvtx_ranges(pid, 0);
      t.copy(Direction::DtoH, MemKind::Pageable, 64, 8'000, false, a);
      t.nvtx_ranges(pid, eval);
      t.copy(Direction::DtoD, MemKind::Device, 32 * MiB, 50'000, true, b);
      t.copy(Direction::DtoH, MemKind::Pageable, 1 * MiB, 700'000, false);
    }
    if (gpu) t.time_copies_on_gpu(2);
    return t;
  }

  // The report holding every event (`cuxfer report --html`'s way).
  std::string whole(const std::vector<std::string>& paths) {
    const model::Job job = load_paths(paths);
    EXPECT_FALSE(job.call_ranges.empty());
    return render_json_and_text(analyses::analyze(job));
  }

  // The streamed report (cli/report_command.cpp, stream_job), or "" where
  // the job needs its events.
  std::string streamed(const std::vector<std::string>& paths) {
    const std::optional<analyses::Report> r = streamed_report(paths);
    if (!r) return "";
    EXPECT_FALSE(r->ranges.empty());
    return render_json_and_text(*r);
  }
};

TEST_F(StreamRanges, OneProcessStreamsAndEqualsTheWholeReport) {
  for (bool gpu : {false, true}) {
    const std::vector<std::string> paths = {
        write(with_ranges(4242, gpu, "step"), gpu ? "gpu.trace" : "cpu.trace")};
    const std::string w = whole(paths);
    EXPECT_NE(w.find("\"ranges\""), std::string::npos);
    EXPECT_NE(w.find("tiny_storm"), std::string::npos);
    EXPECT_EQ(streamed(paths), w) << (gpu ? "with GPU records" : "without GPU records");
  }
}

TEST_F(StreamRanges, ProcessesShareRangeStacksAndTheirSitesStayApart) {
  // The same stacks in two processes (one range table entry each), a third
  // with an outer range of its own; one with GPU records, two without.
  const std::vector<std::string> paths = {write(with_ranges(100, false, "step"), "a.trace"),
                                          write(with_ranges(200, true, "step"), "b.trace"),
                                          write(with_ranges(300, false, "train"), "c.trace")};
  const std::string w = whole(paths);
  EXPECT_NE(w.find("train / forward / load"), std::string::npos);
  EXPECT_EQ(streamed(paths), w);
}

TEST_F(StreamRanges, TallyOfTheWholeJobCountsEachCopyOnceInEveryEnclosingRange) {
  const model::Job job = load(with_ranges(4242, false, "step"));
  const analyses::Report r = analyses::analyze(job);
  // Paths in path order: eval, step, step / forward, step / forward / load.
  ASSERT_EQ(r.ranges.size(), 4u);
  const analyses::RangeTotals& step = r.ranges[1];
  EXPECT_EQ(step.path, "step");
  // Per step: 1 pinned, 250 tiny, 5 async pageable (loader), 1 large
  // pageable; the failed copy counts apart.
  EXPECT_EQ(step.calls, 5u * (1 + 250 + 5 + 1));
  EXPECT_EQ(step.failed_calls, 5u);
  const analyses::RangeTotals& load = r.ranges[3];
  EXPECT_EQ(load.path, "step / forward / load");
  EXPECT_EQ(load.depth, 3u);
  EXPECT_EQ(load.calls, 5u * 5);
  EXPECT_EQ(load.failed_calls, 5u);
  EXPECT_EQ(load.bytes, 5u * 5 * 8 * MiB);
}

}  // namespace
}  // namespace cuxfer::testing
