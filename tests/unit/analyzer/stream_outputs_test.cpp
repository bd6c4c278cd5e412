// `cuxfer report --csv`, `--ranges-csv` and `--html` of streamed traces
// (analyses/stream.h): the call-site table's staged column is the tally's,
// the range table the streamed RangeTally's, and the HTML plots are gathered
// while the traces stream (analyses/copy_plots.h). Each equals the output of
// the report made holding every event, byte for byte, also where the
// timeline shows only its busiest lanes' longest items.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyzer/analyses/copy_plots.h"
#include "analyzer/render/html_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::MemKind;

constexpr uint64_t KiB = 1 << 10, MiB = 1 << 20;

class StreamOutputs : public JobTest {
 protected:
  // A process copying on `threads` threads: pageable copies the rewrite
  // staged, pinned and pageable ones both ways, memsets, failed copies,
  // durations that repeat (ties for the timeline's cut); `ranges`: inside
  // NVTX ranges.
  static SyntheticTrace cpu_process(uint32_t pid, int threads, int copies, bool ranges) {
    SyntheticTrace t(pid);
    t.process.trace_name = "cpu" + std::to_string(pid);
    t.events_per_block = 211;
    const uint32_t a = t.site(0x401000), b = t.site(0x402000), c = t.site(0x403000);
    const uint32_t step = ranges ? t.nvtx_stack({"step"}) : 0, load = ranges ? t.nvtx_stack({"step", "load"}) : 0;
    for (int i = 0; i < copies; ++i) {
      const uint32_t tid = pid + static_cast<uint32_t>(i % threads);
      if (ranges && i % 100 == 0) t.nvtx_ranges(tid, i % 200 ? load : step);
      const Direction dir = i % 3 ? Direction::HtoD : Direction::DtoH;
      const MemKind host = i % 4 == 0 ? MemKind::Pinned : MemKind::Pageable;
      trace::Event& e = t.copy(dir, host, (i % 7 + 1) * 64 * KiB * (i % 5 == 0 ? 16 : 1),
                               20'000 + 1'000 * (i % 13) + (i % 3 == 0 ? 0 : pid % 7), i % 2 == 0,
                               i % 3 == 0 ? a : i % 3 == 1 ? b : c);
      e.thread_id = tid;
      if (host == MemKind::Pageable && i % 5 == 1) e.flags |= trace::kFlagStaged;
      if (i % 97 == 0) e.flags |= trace::kFlagFailed;
      if (i % 50 == 0)
        t.add(trace::EventKind::Memset, "cudaMemset", Direction::DtoD, MemKind::Device, MemKind::Device, MiB,
              5'000 + i % 3)
            .thread_id = tid;
    }
    return t;
  }

  struct Outputs {
    std::string tables, html;
  };
  Outputs whole(const std::vector<std::string>& paths) {
    const model::Job job = load_paths(paths);
    const analyses::Report r = analyses::analyze(job);
    return {render_json_and_text(r), render::render_html(r, job, nullptr)};
  }
  Outputs streamed(const std::vector<std::string>& paths) {
    analyses::CopyPlots plots;
    const std::optional<analyses::Report> r = streamed_report(paths, &plots);
    if (!r) return {};
    return {render_json_and_text(*r), render::render_html(*r, plots, nullptr)};
  }
};

TEST_F(StreamOutputs, CsvRangesAndHtmlOfSeveralProcessesEqualTheWholeRead) {
  // 3 x 12 threads: more lanes than the timeline shows, and more items.
  const std::vector<std::string> paths = {write(cpu_process(100, 12, 3000, true), "a.trace"),
                                          write(cpu_process(200, 12, 2500, false), "b.trace"),
                                          write(cpu_process(300, 12, 2000, true), "c.trace")};
  const Outputs w = whole(paths);
  const Outputs s = streamed(paths);
  EXPECT_EQ(s.tables, w.tables);
  EXPECT_EQ(s.html, w.html);
  // The outputs hold what the test is about.
  EXPECT_NE(w.tables.find("path,name,depth"), std::string::npos);
  EXPECT_NE(w.tables.find("step / load,load,2,"), std::string::npos);
  EXPECT_NE(w.html.find("4000 of 7650 items, 24 of 36 lanes shown"), std::string::npos);
  EXPECT_NE(w.html.find("median"), std::string::npos);
}

TEST_F(StreamOutputs, CsvStagedColumnIsTheTallys) {
  const std::vector<std::string> paths = {write(cpu_process(100, 2, 400, false), "a.trace")};
  const model::Job job = load_paths(paths);
  const analyses::Report whole_report = analyses::analyze(job);
  // The staged bytes of each site, from the calls themselves.
  std::vector<uint64_t> staged(job.sites.size(), 0);
  for (const auto& c : job.calls)
    if (c.kind() == trace::EventKind::Copy && c.site != model::kNoSite && !c.failed() && c.staged())
      staged[c.site] += c.bytes();
  uint64_t any = 0;
  for (const auto& site : whole_report.callsites) {
    EXPECT_EQ(site.staged_bytes, staged[site.id - 1]) << site.id;
    any += site.staged_bytes;
  }
  EXPECT_GT(any, 0u);
  const std::optional<analyses::Report> r = streamed_report(paths);
  ASSERT_TRUE(r);
  EXPECT_EQ(render::render_callsites_csv(*r), render::render_callsites_csv(whole_report));
}

TEST_F(StreamOutputs, TimelineUnderTheCapDrawsEveryItemInCallOrder) {
  SyntheticTrace t(4242);
  const uint32_t a = t.site(0x401000);
  t.copy(Direction::HtoD, MemKind::Pageable, 3 * MiB, 9'000, false, a);
  t.copy(Direction::DtoH, MemKind::Pinned, 1 * MiB, 90'000, false, a).thread_id = 7;
  t.copy(Direction::HtoD, MemKind::Pinned, 2 * MiB, 50'000, false, a);
  const std::vector<std::string> paths = {write(t, "small.trace")};
  const Outputs s = streamed(paths);
  EXPECT_EQ(s.html, whole(paths).html);
  const size_t first = s.html.find("H2D pageable 3.00 MiB"), second = s.html.find("D2H pinned 1.00 MiB"),
               third = s.html.find("H2D pinned 2.00 MiB");
  ASSERT_NE(first, std::string::npos);
  ASSERT_NE(second, std::string::npos);
  ASSERT_NE(third, std::string::npos);
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_NE(s.html.find("3 of 3 items, 2 of 2 lanes shown"), std::string::npos);
}

TEST_F(StreamOutputs, PlotsStreamOnlyWithoutGpuRecords) {
  SyntheticTrace gpu = cpu_process(100, 2, 50, false);
  gpu.status.cupti = trace::CuptiState::Active;
  gpu.status.cupti_reason.clear();
  gpu.time_copies_on_gpu(2);
  for (auto& r : gpu.gpu_records) r.correlation_id = 0;
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errs;
  auto sym = symbolize::make_symbolizer(false);
  const model::Job with = model::build_job(model::read_traces({write(gpu, "gpu.trace")}, errs, skip), *sym);
  const model::Job without =
      model::build_job(model::read_traces({write(cpu_process(100, 2, 50, false), "cpu.trace")}, errs, skip), *sym);
  EXPECT_FALSE(analyses::plots_stream(with));
  EXPECT_TRUE(analyses::plots_stream(without));
}

TEST(CopyPlots, BandwidthBinsKeepTheOrderAndSpanAThousandthOfAnOctave) {
  double last = 0;
  for (double g : {1e-7, 0.003, 0.5, 1.0, 1.0009, 1.002, 12.5, 24.99, 25.0, 900.0}) {
    const double mid = analyses::bandwidth_bin_value(analyses::bandwidth_bin(g));
    EXPECT_LE(std::abs(mid - g) / g, 1.0 / 2048) << g;
    EXPECT_GE(mid, last) << g;
    last = mid;
  }
  EXPECT_LT(analyses::bandwidth_bin(1.0), analyses::bandwidth_bin(1.002));
}

TEST(CopyPlots, BandwidthMedianIsTheUpperMiddleCopysBin) {
  trace::Event events[4] = {};
  analyses::BandwidthTally t;
  const uint64_t ns[4] = {1000, 4000, 2000, 8000};
  for (int i = 0; i < 4; ++i) {
    events[i].kind = static_cast<uint8_t>(trace::EventKind::Copy);
    events[i].bytes = 4096;
    model::Call c;
    c.event = &events[i];
    c.cls = {Direction::HtoD, MemKind::Pinned};
    c.gpu_ns = ns[i];
    c.gpu_records = 1;
    c.gpu_end_ns = ns[i];
    t.add(c, i);
  }
  const auto series = t.series();
  ASSERT_EQ(series.size(), 1u);
  ASSERT_EQ(series[0].points.size(), 1u);
  EXPECT_EQ(series[0].points[0].copies, 4u);
  EXPECT_EQ(series[0].points[0].bucket, 12);
  // 4096 B over 1, 2, 4, 8 us: the sorted values' element 2 is 2.048 GB/s.
  EXPECT_NEAR(series[0].points[0].median_gbps, 2.048, 2.048 / 2048);
}

TEST(CopyPlots, TimelineMergedInAnyOrderIsTheSame) {
  // Lanes of three processes, each busier than the last, items of equal length.
  model::Process p;
  std::vector<trace::Event> events(3 * 30 * 200);
  std::vector<analyses::CopyPlots> each(3);
  size_t k = 0;
  for (uint32_t process = 0; process < 3; ++process) {
    std::vector<model::Call> calls;
    for (uint32_t i = 0; i < 30 * 200; ++i) {
      trace::Event& e = events[k++];
      e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
      e.thread_id = i % 30;
      e.t_enter_ns = 1000 * i;
      e.t_exit_ns = 1000 * i + 100 + 10 * process + (i % 30 == 3 ? 50 : 0);
      e.bytes = 64;
      model::Call& c = calls.emplace_back();
      c.event = &e;
      c.process = process;
      c.cls = {Direction::HtoD, MemKind::Pageable};
    }
    uint64_t next = 0;
    each[process].add_calls(p, process, calls, next);
    each[process].timeline.settle();
  }
  auto picture = [&](std::vector<int> order) {
    analyses::CopyPlots job;
    for (int i : order) {
      analyses::CopyPlots copy = each[i];
      job.merge(std::move(copy));
    }
    const auto pic = job.timeline.picture();
    std::string out;
    for (const auto& r : pic.rows) out += r + ";";
    for (const auto& it : pic.items) out += std::to_string(it.order) + "@" + std::to_string(it.row) + ",";
    return out + std::to_string(pic.total_items) + "/" + std::to_string(pic.total_lanes);
  };
  const std::string one = picture({0, 1, 2});
  EXPECT_EQ(picture({2, 0, 1}), one);
  EXPECT_EQ(picture({1, 2, 0}), one);
  EXPECT_NE(one.find("18000/90"), std::string::npos);
}

}  // namespace
}  // namespace cuxfer::testing
