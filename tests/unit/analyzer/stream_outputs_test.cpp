// `cuxfer report --csv`, `--ranges-csv` and `--html` of streamed traces
// (analyses/stream.h): the call-site table's staged column is the tally's,
// the range table the streamed RangeTally's, and the HTML plots are gathered
// while the traces stream (analyses/copy_plots.h), GPU records included
// (each coloured by the class of the call the streamed join gave it). Each
// equals the output of the report made holding every event, byte for byte,
// also where the timeline shows only its busiest lanes' longest items.
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

// How many times `what` occurs in `text`.
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

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

  // cpu_process with its copies and memsets timed by CUPTI, as on a real
  // GPU (records without a correlation id: joined by time), on `streams`
  // GPU streams: a staged copy's record in two chunks, the second lost now
  // and then (the join then un-joins the copy's chunks: they are drawn
  // grey), and now and then a record no call fits (grey too).
  static SyntheticTrace gpu_process(uint32_t pid, int threads, int copies, int streams) {
    SyntheticTrace t = cpu_process(pid, threads, copies, false);
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    int n = 0;
    for (const trace::Event& e : std::vector<trace::Event>(t.events)) {
      const bool data = e.kind == static_cast<uint8_t>(trace::EventKind::Copy) ||
                        e.kind == static_cast<uint8_t>(trace::EventKind::Memset);
      if (!data || (e.flags & trace::kFlagFailed)) continue;
      const size_t first = t.gpu_records.size();
      // Every other DMA outlasts its call: records among the items the timeline keeps.
      const uint64_t ns = (e.t_exit_ns - e.t_enter_ns) * (n % 2 ? 2 : 1) / 2 * 3;
      if (e.flags & trace::kFlagStaged) {
        t.gpu(e, ns / 2, e.bytes / 2);
        if (n % 3 != 0) {
          t.gpu(e, ns / 2, e.bytes - e.bytes / 2);
          t.gpu_records.back().start_ns += ns / 2;
          t.gpu_records.back().end_ns += ns / 2;
        }
      } else {
        t.gpu(e, ns);
      }
      if (n % 41 == 7) {
        t.gpu(e, ns / 3, 3);  // a DMA no call made
        t.gpu_records.back().start_ns += 10;
      }
      for (size_t k = first; k < t.gpu_records.size(); ++k) {
        t.gpu_records[k].correlation_id = 0;
        t.gpu_records[k].stream_id =
            (e.thread_id + static_cast<uint32_t>(k)) % static_cast<uint32_t>(streams);
      }
      ++n;
    }
    for (trace::Event& e : t.events) e.flags |= trace::kFlagGpuExpected;
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

// The timeline colours each GPU record by the class of the call it joined:
// the streamed join settles each record with that class
// (model::StreamedGpuJoin::keep_settled_records), so the plots stream.
TEST_F(StreamOutputs, HtmlOfTracesWithGpuRecordsEqualsTheWholeRead) {
  // Several processes, past the timeline's cap of items and of lanes (GPU
  // streams beside the threads); one whose CUPTI state the trace does not
  // say: build_job joins none of its records (all grey).
  SyntheticTrace untimed = gpu_process(300, 2, 300, 2);
  untimed.status.cupti = trace::CuptiState::Unknown;
  const std::vector<std::string> paths = {write(gpu_process(100, 12, 3000, 4), "a.trace"),
                                          write(gpu_process(200, 3, 800, 9), "b.trace"),
                                          write(untimed, "c.trace")};
  const model::Job job = load_paths(paths);
  // The traces hold what the test is about: records joined, records no
  // call took, among them the chunks of staged copies the join un-joined.
  size_t joined = 0, unjoined = 0, unjoined_chunks = 0;
  for (const model::Process& p : job.processes)
    for (size_t k = 0; k < p.trace.gpu_records.size(); ++k) {
      const bool j = p.gpu_record_call[k] != model::kNoCall;
      joined += j;
      unjoined += !j;
      unjoined_chunks += !j && p.trace.gpu_records[k].bytes != 3 && p.gpu_timing;
    }
  EXPECT_GT(joined, 4000u);
  EXPECT_GT(unjoined, 300u);
  EXPECT_GT(unjoined_chunks, 10u);
  const Outputs w = whole(paths);
  const Outputs s = streamed(paths);  // fails where a process would need its events
  EXPECT_EQ(s.tables, w.tables);
  EXPECT_EQ(s.html, w.html);
  EXPECT_NE(w.html.find("4000 of 8829 items, 24 of 32 lanes shown"), std::string::npos);
  EXPECT_NE(w.html.find("GPU 0 stream 3"), std::string::npos);
  // Records drawn, coloured by their calls' classes and grey.
  const size_t grey = count(w.html, "fill='#999'><title>DMA"), dma = count(w.html, "><title>DMA");
  EXPECT_GT(grey, 100u);
  EXPECT_GT(dma, grey + 100);
}

TEST_F(StreamOutputs, TimelineColoursEachRecordByTheCallItJoined) {
  // Under the cap: every item drawn. A pinned copy's record (its class's
  // colour), a staged copy whose second chunk was lost (both chunks grey:
  // not joined), a DMA no call made (grey), a memset's.
  SyntheticTrace t(4242);
  t.status.cupti = trace::CuptiState::Active;
  t.status.cupti_reason.clear();
  const uint32_t a = t.site(0x401000);
  const trace::Event pinned = t.copy(Direction::HtoD, MemKind::Pinned, 2 * MiB, 50'000, false, a);
  trace::Event& staged_event = t.copy(Direction::HtoD, MemKind::Pageable, 4 * MiB, 90'000, false, a);
  staged_event.flags |= trace::kFlagStaged;
  const trace::Event staged = staged_event;
  const trace::Event memset = t.add(trace::EventKind::Memset, "cudaMemset", Direction::DtoD, MemKind::Device,
                                    MemKind::Device, MiB, 5'000);
  t.gpu(pinned, 20'000);
  t.gpu(staged, 30'000, MiB);
  t.gpu(pinned, 7'000, 3);
  t.gpu(memset, 1'000);
  for (auto& r : t.gpu_records) r.correlation_id = 0;
  for (auto& e : t.events) e.flags |= trace::kFlagGpuExpected;
  const std::vector<std::string> paths = {write(t, "small.trace")};
  const Outputs s = streamed(paths);
  EXPECT_EQ(s.html, whole(paths).html);
  EXPECT_NE(s.html.find("7 of 7 items"), std::string::npos);
  EXPECT_EQ(count(s.html, "fill='#999'><title>DMA"), 2u);  // the staged copy's chunk, the DMA no call made
  EXPECT_EQ(count(s.html, "><title>DMA"), 4u);
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
