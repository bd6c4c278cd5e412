// CUPTI kernel records in a streamed report (analyses/stream.h,
// KernelOverlapFeed in overlap.h): they stream, and the report equals the one
// made holding every event, byte for byte, in every output: kernels
// overlapping copies on two devices, written in batches after the events
// they overlap, idle gaps, copies before the first and after the last
// kernel, several processes. A kernel record too far out of order is said in
// one line, and the job read whole. Summaries carry the overlap too.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "analyzer/analyses/copy_plots.h"
#include "analyzer/analyses/overlap.h"
#include "analyzer/cli/check_command.h"
#include "analyzer/cli/summarize_command.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/render/html_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::MemKind;

constexpr uint64_t KiB = 1 << 10, MiB = 1 << 20;
constexpr uint64_t us = 1000;

trace::GpuRecord kernel_record(uint32_t device, uint64_t start, uint64_t end) {
  trace::GpuRecord k{};
  k.kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
  k.device = device;
  k.stream_id = 7 + device;
  k.start_ns = start;
  k.end_ns = end;
  return k;
}

class StreamKernels : public JobTest {
 protected:
  // A training step per iteration, alternating between `devices` devices: a
  // kernel, a pinned async copy whose DMA runs under it, a synchronous
  // pageable copy that outlasts it, now and then a second kernel overlapping
  // the first, and every third step an idle gap with a synchronous copy in
  // it. A synchronous copy before the first kernel and one after the last.
  // Every record (the copies' DMA, joined by time, and the kernels) written
  // in batches, `lag` events after the events it overlaps, as the shim's
  // later cycles write CUPTI's buffers.
  static SyntheticTrace training(uint32_t pid, int steps, uint32_t devices, uint64_t site_base, size_t lag = 40) {
    SyntheticTrace t(pid);
    t.process.trace_name = "kernels" + std::to_string(pid);
    t.events_per_block = 17;
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    t.notes.push_back("cupti: kernel records on");
    const uint32_t load = t.site(site_base + 0x1000), prefetch = t.site(site_base + 0x2000),
                   edges = t.site(site_base + 0x3000), gap = t.site(site_base + 0x4000);
    std::vector<std::pair<size_t, trace::GpuRecord>> pending;  // (written after event, record)
    auto due = [&] { return (t.events.size() / 8 + 1) * 8 + lag; };  // a batch, a few cycles later
    auto dma = [&](trace::Event& e, uint32_t device, uint64_t offset, uint64_t ns) {
      e.device = static_cast<int8_t>(device);
      e.flags |= trace::kFlagGpuExpected;
      trace::GpuRecord r{};
      r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
      r.device = device;
      r.start_ns = e.t_enter_ns + offset;
      r.end_ns = r.start_ns + ns;
      r.bytes = e.bytes;
      pending.push_back({due(), r});
    };
    auto sync_copy = [&](uint32_t device, uint64_t bytes, uint64_t cpu, uint32_t site) {
      trace::Event& e = t.copy(Direction::HtoD, MemKind::Pageable, bytes, cpu, false, site);
      dma(e, device, cpu / 4, cpu / 2);
    };
    sync_copy(0, 4 * MiB, 900 * us, edges);  // before any kernel: not idle time
    t.clock_ns += 50 * us;
    for (int i = 0; i < steps; ++i) {
      const uint32_t d = static_cast<uint32_t>(i) % devices;
      const uint64_t k0 = t.clock_ns;
      const uint64_t k_ns = (300 + 37 * (i % 5)) * us;
      trace::Event& async = t.copy(Direction::HtoD, MemKind::Pinned, 2 * MiB, 6 * us, true, prefetch);
      dma(async, d, 10 * us, 120 * us);  // under the kernel
      sync_copy(d, (1 + i % 3) * MiB, (250 + 13 * (i % 7)) * us, load);  // outlasts it by a varying part
      pending.push_back({due(), kernel_record(d, k0, k0 + k_ns)});
      if (i % 7 == 3) pending.push_back({due(), kernel_record(d, k0 + k_ns - 40 * us, k0 + k_ns + 90 * us)});
      if (i % 11 == 5) pending.push_back({due(), kernel_record(d, k0 + 5 * us, k0 + 5 * us)});  // empty: no kernel
      if (i % 3 == 2) {
        t.clock_ns += 100 * us;  // no kernel on the device here
        sync_copy(d, 3 * MiB, 280 * us, gap);
      }
      t.clock_ns = std::max(t.clock_ns, k0 + k_ns + 150 * us);
    }
    t.clock_ns += 2'000 * us;
    sync_copy(1 % devices, 8 * MiB, 700 * us, edges);  // after the last kernel: not idle time
    std::stable_sort(pending.begin(), pending.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [after, r] : pending) {
      t.gpu_records.push_back(r);
      t.gpu_after_events.push_back(after);
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

TEST_F(StreamKernels, KernelTracesNeedNotBeReadWhole) {
  const std::vector<std::string> paths = {write(training(100, 40, 2, 0x400000), "a.trace")};
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errs;
  auto headers = model::read_traces(paths, errs, skip);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_GT(headers[0].gpu_records_passed.kernels, 40u);
  EXPECT_EQ(headers[0].gpu_records_passed.not_joined_by_time, 0u);
  EXPECT_FALSE(analyses::needs_events(headers[0]));
  auto sym = symbolize::make_symbolizer(false);
  EXPECT_FALSE(analyses::needs_events(model::build_job(std::move(headers), *sym)));
}

TEST_F(StreamKernels, ReportOfKernelsOnTwoDevicesEqualsTheWholeRead) {
  const std::vector<std::string> paths = {write(training(100, 300, 2, 0x400000), "a.trace")};
  const Outputs w = whole(paths);
  const Outputs s = streamed(paths);
  EXPECT_EQ(s.tables, w.tables);
  EXPECT_EQ(s.html, w.html);
  // The report holds what the test is about: both devices measured, DMA
  // under kernels, idle time, the finding, and the copies outside the
  // kernels' span left out of it.
  const analyses::Report r = analyses::analyze(load_paths(paths));
  ASSERT_TRUE(r.overlap.kernels_recorded);
  ASSERT_EQ(r.overlap.devices.size(), 2u);
  for (const analyses::DeviceOverlap& d : r.overlap.devices) {
    EXPECT_GT(d.kernels, 100u);
    EXPECT_GT(d.dma_under_kernels_ns, 0u);
    EXPECT_LT(d.dma_under_kernels_ns, d.dma_ns);
    EXPECT_GT(d.sync_copy_idle_ns, 0u);
    EXPECT_LT(d.sync_copy_idle_ns, d.sync_copy_ns);
  }
  const analyses::Finding* f = find_finding(r, "sync_copy_idle");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->sites.size(), 2u);  // the loads and the copies in the gaps; not the edges
  EXPECT_NE(w.tables.find("sync_copy_idle"), std::string::npos);
}

TEST_F(StreamKernels, SeveralProcessesAndOneWithoutKernelsEqualTheWholeRead) {
  SyntheticTrace plain(300);
  plain.process.trace_name = "plain";
  const uint32_t s = plain.site(0x700000);
  for (int i = 0; i < 200; ++i) plain.copy(Direction::DtoH, MemKind::Pageable, 256 * KiB, 90 * us, false, s);
  const std::vector<std::string> paths = {write(training(100, 200, 2, 0x400000), "a.trace"),
                                          write(training(200, 150, 1, 0x500000, 5), "b.trace"),
                                          write(plain, "c.trace")};
  const Outputs w = whole(paths);
  const Outputs st = streamed(paths);
  EXPECT_EQ(st.tables, w.tables);
  EXPECT_EQ(st.html, w.html);
  const analyses::Report r = analyses::analyze(load_paths(paths));
  EXPECT_EQ(r.overlap.devices.size(), 3u);
}

// More kernels than the window holds out of order: the watermark has moved
// past the late record's start, so copies may already be measured without
// it. The process is said in one line and the job read whole.
TEST_F(StreamKernels, AKernelRecordTooLateMakesTheJobReadWhole) {
  SyntheticTrace t(100);
  t.status.cupti = trace::CuptiState::Active;
  t.status.cupti_reason.clear();
  t.notes.push_back("cupti: kernel records on");
  const uint32_t s = t.site(0x401000);
  const uint64_t t0 = t.clock_ns;
  t.clock_ns += 1'000 * us;
  t.copy(Direction::HtoD, MemKind::Pageable, MiB, 500 * us, false, s);
  const size_t kernels = analyses::KernelOverlapFeed::Window{}.kernel_lag + 1000;
  t.gpu_records.push_back(kernel_record(0, t0, t0 + 100 * us));
  for (size_t i = 0; i < kernels; ++i) {
    const uint64_t b = t0 + 2'000 * us + i * 10 * us;
    t.gpu_records.push_back(kernel_record(0, b, b + 5 * us));
  }
  t.gpu_records.push_back(kernel_record(0, t0 + 1'100 * us, t0 + 1'200 * us));  // under the copy, too late
  const std::vector<std::string> paths = {write(t, "late.trace")};
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errs;
  auto sym = symbolize::make_symbolizer(false);
  const model::Job frame = model::build_job(model::read_traces(paths, errs, skip), *sym);
  ASSERT_FALSE(analyses::needs_events(frame));
  std::string why;
  std::optional<analyses::FirstPass> first = analyses::stream_references(frame, 0, {}, &why);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kernels.at(0).kernels, kernels + 2);
  analyses::Thresholds::RunReferences known;
  analyses::Thresholds t_known;
  t_known.known = &known;
  uint64_t bytes = 0;
  EXPECT_FALSE(analyses::stream_process(frame, 0, t_known, &first->fingerprints, bytes, &why, nullptr,
                                        &first->kernels));
  EXPECT_NE(why.find("late.trace (pid 100): a kernel record starts before copies already measured"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("the report is made holding the events"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  // The whole read measures the copy against it: 100 us of 500 under a kernel.
  const analyses::Report r = analyses::analyze(load_paths(paths));
  ASSERT_EQ(r.overlap.devices.size(), 1u);
  EXPECT_EQ(r.overlap.devices[0].sync_copy_idle_ns, 400 * us);
}

// A summary carries the overlap sums and the sync_copy_idle sites: streamed
// and read whole it is the same text, and the report of summaries has the
// direct report's Overlap table and finding.
TEST_F(StreamKernels, SummariesCarryTheOverlapAndEqualTheWholeRead) {
  const std::vector<std::string> paths = {write(training(100, 200, 2, 0x400000), "a.trace"),
                                          write(training(200, 120, 1, 0x500000), "b.trace")};
  cli::SymbolOptions symbols;
  symbols.enabled = false;
  for (const auto& p : paths) EXPECT_TRUE(cli::summarize_streamed(p, symbols)) << p;
  std::vector<std::string> errors;
  analyses::SummaryHeader header;
  header.symbols = "off";
  auto records = cli::summarize_traces(paths, symbols, 2, errors);
  const std::string streamed_text = analyses::write_summary(header, records);
  const std::string whole_text =
      analyses::write_summary(header, cli::summarize_traces(paths, symbols, 2, errors, /*stream=*/false));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(streamed_text, whole_text);
  EXPECT_NE(whole_text.find("\"sync_copy_idle_sites\""), std::string::npos);
  std::vector<analyses::ProcessRecord> back;
  std::string error;
  ASSERT_TRUE(analyses::read_summary(whole_text, header, back, error)) << error;
  analyses::MergedJob m = analyses::merge_records(std::move(back));
  const analyses::Report of_summaries = analyses::analyze_tally(m.job, m.tally, {}, false);
  const analyses::Report direct = analyses::analyze(load_paths(paths));
  ASSERT_EQ(of_summaries.overlap.devices.size(), 3u);
  render::TextOptions to;
  to.width = 120;
  EXPECT_EQ(render::render_text(of_summaries, to), render::render_text(direct, to));
  EXPECT_EQ(render::render_json(of_summaries, {}), render::render_json(direct, {}));
  // A damaged overlap part is refused in one line, never summed.
  const nlohmann::json good = nlohmann::json::parse(whole_text);
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> damages = {
      {"a device twice", [](nlohmann::json& o) { o["devices"].push_back(o["devices"][0]); }},
      {"more DMA under kernels than DMA", [](nlohmann::json& o) { o["devices"][0][5] = o["devices"][0][4].get<uint64_t>() + 1; }},
      {"more idle than blocked", [](nlohmann::json& o) { o["devices"][0][7] = o["devices"][0][6].get<uint64_t>() + 1; }},
      {"an idle site twice", [](nlohmann::json& o) { o["sync_copy_idle_sites"].push_back(o["sync_copy_idle_sites"][0]); }},
      {"an idle site of no copy", [](nlohmann::json& o) { o["sync_copy_idle_sites"][0][1] = 0; }},
      {"an idle copy longer than all", [](nlohmann::json& o) { o["sync_copy_idle_sites"][0][4] = o["sync_copy_idle_sites"][0][3].get<uint64_t>() + 1; }},
  };
  for (const auto& [what, damage] : damages) {
    nlohmann::json bad = good;
    nlohmann::json* overlap = nullptr;
    for (nlohmann::json& process : bad.at("processes"))
      if (process.at("tally").contains("overlap") && !process["tally"]["overlap"]["sync_copy_idle_sites"].empty()) {
        overlap = &process["tally"]["overlap"];
        break;
      }
    ASSERT_NE(overlap, nullptr);
    damage(*overlap);
    back.clear();
    EXPECT_FALSE(analyses::read_summary(bad.dump(), header, back, error)) << what;
    EXPECT_EQ(error.rfind("damaged summary: ", 0), 0u) << what << ": " << error;
  }
  // A summary written before summaries kept the overlap still reads: its
  // report has no Overlap table and no sync_copy_idle, as before.
  nlohmann::json old = nlohmann::json::parse(whole_text);
  for (nlohmann::json& process : old.at("processes")) process.at("tally").erase("overlap");
  back.clear();
  ASSERT_TRUE(analyses::read_summary(old.dump(), header, back, error)) << error;
  analyses::MergedJob o = analyses::merge_records(std::move(back));
  const analyses::Report of_old = analyses::analyze_tally(o.job, o.tally, {}, false);
  EXPECT_FALSE(of_old.overlap.kernels_recorded);
  EXPECT_FALSE(find_finding(of_old, "sync_copy_idle"));
  EXPECT_TRUE(find_finding(direct, "sync_copy_idle"));
}

// A damaged trace that names many devices: past max_devices the feed says it
// cannot measure a block at a time (the job is then read whole) instead of
// keeping a window per device id.
TEST(KernelOverlapFeed, MoreDevicesThanTheCapSayInexact) {
  std::vector<trace::GpuRecord> kernels;
  const analyses::KernelOverlapFeed::Window window;
  for (uint32_t d = 0; d < window.max_devices; ++d) kernels.push_back(kernel_record(d, d * us, (d + 1) * us));
  analyses::KernelExtents extents;
  analyses::add_kernel_extents(extents, kernels);
  analyses::KernelOverlapFeed feed(7, extents, window);
  feed.add_kernels(kernels);
  EXPECT_FALSE(feed.inexact());  // as many as the cap: measured
  const trace::GpuRecord one_more = kernel_record(static_cast<uint32_t>(window.max_devices), 0, us);
  feed.add_kernels({&one_more, 1});
  ASSERT_TRUE(feed.inexact());
  EXPECT_EQ(feed.why_inexact(), analyses::KernelOverlapFeed::Inexact::ManyDevices);
  EXPECT_NE(analyses::kernel_window_reason(feed.why_inexact()).find("more than 64 devices"), std::string::npos);
}

// `cuxfer check` of summaries answers sync_copy_idle as of the traces (a
// summary keeps the overlap); an older summary of a process that recorded
// kernels, without it, leaves the finding unchecked rather than passing it.
TEST_F(StreamKernels, CheckOfSummariesAnswersSyncCopyIdle) {
  const std::string trace = write(training(100, 200, 2, 0x400000), "a.trace");
  const std::string summary = path("a.summary.json"), budget = path("budget.json");
  ASSERT_EQ(cli::run_summarize({"--no-symbols", "-o", summary, trace}), 0);
  {
    std::ofstream b(budget);
    b << R"({"schema": "cuxfer.budget/1", "entries": [{"forbid_findings": ["sync_copy_idle"]}]})";
  }
  // The trace raises it (SummariesCarryTheOverlapAndEqualTheWholeRead): a violation, exit 1.
  EXPECT_EQ(cli::run_check({"--any-program", "--no-symbols", "--budget", budget, trace}), 1);
  EXPECT_EQ(cli::run_check({"--any-program", "--no-symbols", "--budget", budget, summary}), 1);
  nlohmann::json older;
  {
    std::ifstream in(summary);
    older = nlohmann::json::parse(in);
  }
  for (nlohmann::json& process : older.at("processes")) process.at("tally").erase("overlap");
  const std::string older_path = path("older.summary.json");
  {
    std::ofstream out(older_path);
    out << older.dump();
  }
  EXPECT_EQ(cli::run_check({"--any-program", "--no-symbols", "--budget", budget, older_path}), 0);
}

// The feed with small windows against the feed that holds everything: on
// records and copies in random near-order, the sums are the same, or the
// feed says it cannot make them (never other sums).
TEST(KernelOverlapFeed, SmallWindowsGiveTheSameSumsOrSayInexact) {
  std::mt19937_64 rng(11);
  int exact = 0, inexact = 0;
  for (int round = 0; round < 300; ++round) {
    // Kernels and copies on two devices over 200 ms; each record written
    // some time after it ends, each copy when it returns.
    std::vector<trace::GpuRecord> kernels;
    std::vector<trace::Event> events;
    std::vector<model::Call> calls;
    const uint64_t span = 200'000 * us;
    for (int i = 0; i < 400; ++i) {
      const uint64_t b = rng() % span;
      kernels.push_back(kernel_record(static_cast<uint32_t>(rng() % 2), b, b + rng() % (600 * us)));
    }
    events.resize(300);
    for (auto& e : events) {
      e = {};
      e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
      e.direction = static_cast<uint8_t>(Direction::HtoD);
      e.src_kind = static_cast<uint8_t>(rng() % 2 ? MemKind::Pageable : MemKind::Pinned);
      e.dst_kind = static_cast<uint8_t>(MemKind::Device);
      e.flags = rng() % 2 ? trace::kFlagAsync : 0;
      e.device = static_cast<int8_t>(rng() % 2);
      e.bytes = MiB;
      e.t_enter_ns = rng() % span;
      e.t_exit_ns = e.t_enter_ns + rng() % (400 * us);
    }
    for (auto& e : events) {
      model::Call c;
      c.event = &e;
      c.cls = model::classify(e);
      c.site = static_cast<uint32_t>(rng() % 4);
      if (rng() % 3) {
        c.gpu_records = 1;
        c.gpu_begin_ns = e.t_enter_ns + rng() % (50 * us);
        c.gpu_end_ns = c.gpu_begin_ns + rng() % (300 * us);
        c.gpu_ns = c.gpu_end_ns - c.gpu_begin_ns;
      }
      calls.push_back(c);
    }
    analyses::KernelExtents extents;
    analyses::add_kernel_extents(extents, kernels);
    // File order: by the time each is written (a kernel a while after it
    // ends, a copy as it returns), with some jitter.
    struct Item {
      uint64_t written;
      bool kernel;
      size_t index;
    };
    std::vector<Item> order;
    for (size_t i = 0; i < kernels.size(); ++i) order.push_back({kernels[i].end_ns + rng() % (3'000 * us), true, i});
    for (size_t i = 0; i < calls.size(); ++i) order.push_back({events[i].t_exit_ns, false, i});
    std::sort(order.begin(), order.end(), [](const Item& a, const Item& b) { return a.written < b.written; });
    analyses::KernelOverlapFeed::Window small;
    small.kernel_lag = 1 + rng() % 40;
    small.max_waiting_copies = 2 + rng() % 30;
    small.keep_kernels = 1 + rng() % 20;
    small.max_kernels = 10'000;
    analyses::KernelOverlapFeed all(7, extents, analyses::KernelOverlapFeed::unbounded());
    analyses::KernelOverlapFeed windowed(7, extents, small);
    all.add_kernels(kernels);
    all.finish_kernels();
    all.add_copies(calls);
    for (const Item& it : order) {
      if (it.kernel)
        windowed.add_kernels({&kernels[it.index], 1});
      else
        windowed.add_copy(calls[it.index]);
    }
    windowed.finish_kernels();
    if (windowed.inexact()) {
      ++inexact;
      continue;
    }
    ++exact;
    std::vector<analyses::DeviceOverlap> a, b;
    std::vector<analyses::FindingsTally::SiteSum> sa, sb;
    all.take(a, sa);
    windowed.take(b, sb);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].kernels, b[i].kernels);
      EXPECT_EQ(a[i].kernel_busy_ns, b[i].kernel_busy_ns);
      EXPECT_EQ(a[i].dma_ns, b[i].dma_ns);
      EXPECT_EQ(a[i].dma_under_kernels_ns, b[i].dma_under_kernels_ns);
      EXPECT_EQ(a[i].sync_copy_ns, b[i].sync_copy_ns);
      EXPECT_EQ(a[i].sync_copy_idle_ns, b[i].sync_copy_idle_ns);
    }
    sa.resize(std::max(sa.size(), sb.size()));
    sb.resize(sa.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].calls, sb[i].calls);
      EXPECT_EQ(sa[i].recoverable_ns, sb[i].recoverable_ns);
      EXPECT_EQ(sa[i].max_ns, sb[i].max_ns);
    }
  }
  // Both outcomes occur: the property is tested, not vacuous.
  EXPECT_GT(exact, 30);
  EXPECT_GT(inexact, 0);
}

}  // namespace
}  // namespace cuxfer::testing
