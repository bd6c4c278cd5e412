// The model: classification, the CPU/GPU timing join, several processes,
// partial and unusable traces.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

trace::Event event(Direction d, MemKind src, MemKind dst, uint8_t flags = 0) {
  trace::Event e{};
  e.direction = static_cast<uint8_t>(d);
  e.src_kind = static_cast<uint8_t>(src);
  e.dst_kind = static_cast<uint8_t>(dst);
  e.flags = flags;
  return e;
}

TEST(Classify, HostSideKindByDirection) {
  using model::classify;
  using model::TransferClass;
  EXPECT_EQ(classify(event(Direction::HtoD, MemKind::Pageable, MemKind::Device)),
            (TransferClass{Direction::HtoD, MemKind::Pageable}));
  EXPECT_EQ(classify(event(Direction::DtoH, MemKind::Device, MemKind::Pinned)),
            (TransferClass{Direction::DtoH, MemKind::Pinned}));
  EXPECT_EQ(classify(event(Direction::DtoH, MemKind::Device, MemKind::Managed)),
            (TransferClass{Direction::DtoH, MemKind::Managed}));
  EXPECT_EQ(classify(event(Direction::DtoD, MemKind::Device, MemKind::Device)),
            (TransferClass{Direction::DtoD, MemKind::Device}));
  EXPECT_EQ(classify(event(Direction::Peer, MemKind::Device, MemKind::Device)),
            (TransferClass{Direction::Peer, MemKind::Device}));
  EXPECT_EQ(classify(event(Direction::HtoD, MemKind::Array, MemKind::Device)).memory, MemKind::Array);
  // H2H: pageable if either side is, else the source's kind.
  EXPECT_EQ(classify(event(Direction::HtoH, MemKind::Pinned, MemKind::Pageable)).memory, MemKind::Pageable);
  EXPECT_EQ(classify(event(Direction::HtoH, MemKind::Registered, MemKind::Pinned)).memory,
            MemKind::Registered);
  EXPECT_EQ(classify(event(Direction::Unknown, MemKind::Pinned, MemKind::Device)).memory, MemKind::Unknown);
  // Values from a newer writer are not trusted as enum values.
  auto odd = event(static_cast<Direction>(40), MemKind::Pinned, MemKind::Device);
  EXPECT_EQ(classify(odd).direction, Direction::Unknown);
}

TEST(Classify, WhenCpuTimeMeasuresTheTransfer) {
  auto yes = [](trace::Event e) { return model::cpu_time_measures_transfer(e, model::classify(e)); };
  EXPECT_TRUE(yes(event(Direction::HtoD, MemKind::Pinned, MemKind::Device)));
  EXPECT_TRUE(yes(event(Direction::HtoD, MemKind::Pageable, MemKind::Device, trace::kFlagAsync)));
  EXPECT_FALSE(yes(event(Direction::HtoD, MemKind::Pinned, MemKind::Device, trace::kFlagAsync)));
  EXPECT_FALSE(yes(event(Direction::DtoD, MemKind::Device, MemKind::Device)));
}

class Model : public JobTest {};

TEST_F(Model, GpuRecordsJoinOnCorrelationIdAndSum) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  auto& a = t.copy(Direction::HtoD, MemKind::Pinned, 8 << 20, 200'000);
  t.gpu(a, 100'000, 4 << 20);  // a 2D copy: two GPU records, one event
  t.gpu(a, 60'000, 4 << 20);
  t.copy(Direction::DtoH, MemKind::Pinned, 1 << 20, 30'000);  // its record was lost
  trace::GpuRecord stray{};
  stray.correlation_id = 999;
  stray.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
  stray.end_ns = 10;
  t.gpu_records.push_back(stray);
  model::Job job = load(t);
  ASSERT_EQ(job.calls.size(), 2u);
  EXPECT_EQ(job.calls[0].gpu_ns, 160'000u);
  EXPECT_EQ(job.calls[0].gpu_records, 2u);
  EXPECT_FALSE(job.calls[1].has_gpu_time());
  EXPECT_EQ(job.processes[0].gpu_records_unmatched, 1u);

  analyses::Report r = analyses::analyze(job);
  EXPECT_EQ(r.timing, "gpu");
  const auto* h2d = testing::find_class(r, Direction::HtoD, MemKind::Pinned);
  ASSERT_TRUE(h2d);
  ASSERT_TRUE(h2d->gpu_ns);
  EXPECT_EQ(*h2d->gpu_ns, 160'000u);
  EXPECT_EQ(h2d->gbps_basis, "gpu");
  EXPECT_DOUBLE_EQ(*h2d->gbps, (8 << 20) / 160'000.0);
  const auto* d2h = testing::find_class(r, Direction::DtoH, MemKind::Pinned);
  ASSERT_TRUE(d2h);
  EXPECT_FALSE(d2h->gpu_ns);
  EXPECT_EQ(d2h->gbps_basis, "cpu");  // synchronous: CPU-blocked time stands in
  EXPECT_DOUBLE_EQ(*d2h->gbps, (1 << 20) / 30'000.0);
}

TEST_F(Model, GpuRecordsIgnoredWhenCuptiUnavailable) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Unavailable;
  t.status.cupti_reason = "simulated CUDA";
  t.status.simulated = true;
  auto& a = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);
  t.gpu(a, 10);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_EQ(r.timing, "cpu");
  EXPECT_TRUE(r.simulated);
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_FALSE(r.classes[0].gpu_ns);
  EXPECT_DOUBLE_EQ(*r.classes[0].gbps, (1 << 20) / 100'000.0);
  ASSERT_EQ(r.processes.size(), 1u);
  EXPECT_EQ(r.processes[0].cupti_state, "unavailable");
  EXPECT_EQ(r.processes[0].cupti_reason, "simulated CUDA");
}

// The app's profiler took CUPTI over between the two copies: the first keeps
// its GPU time, the second is not counted as a lost record, and the report
// says when CUPTI changed hands.
TEST_F(Model, GpuRecordsEndAtACuptiHandover) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  auto& a = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);
  a.flags |= trace::kFlagGpuExpected;
  t.gpu(a, 50'000);
  const uint64_t handover_ns = t.clock_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000).flags |= trace::kFlagGpuExpected;
  SyntheticTrace without = t;

  t.handover = trace::CuptiHandover{handover_ns, "cuptiActivityRegisterCallbacks from libtorch_cuda.so"};
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.processes.size(), 1u);
  const auto& p = r.processes[0];
  EXPECT_EQ(p.cupti_state, "active");
  EXPECT_DOUBLE_EQ(p.cupti_handover_s, (handover_ns - t.process.start_monotonic_ns) / 1e9);
  EXPECT_EQ(p.cupti_handover_reason, "cuptiActivityRegisterCallbacks from libtorch_cuda.so");
  EXPECT_EQ(p.events_without_gpu, 0u);
  // The class has GPU time for one call of two: CPU time stands in.
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_EQ(r.classes[0].gpu_calls, 1u);
  EXPECT_EQ(r.classes[0].gbps_basis, "cpu");

  analyses::Report no_handover = analyses::analyze(load(without));
  EXPECT_LT(no_handover.processes[0].cupti_handover_s, 0);
  EXPECT_EQ(no_handover.processes[0].events_without_gpu, 1u);  // a record really was lost
}

TEST(GateTimeline, OnThroughoutAndOnTime) {
  using trace::GateReason;
  model::GateTimeline none;
  EXPECT_FALSE(none.governed());
  EXPECT_TRUE(none.on_throughout(5, 10));
  EXPECT_EQ(none.on_ns(0, 100), 100u);
  // Given out of order: sorted. On until 100, off 100-200, on from 200 (a sample), off from 300.
  model::GateTimeline g({{200, true, GateReason::Sample}, {100, false, GateReason::SyncOnly},
                         {300, false, GateReason::SyncOnly}});
  EXPECT_TRUE(g.governed());
  EXPECT_EQ(g.changes(), 3u);
  EXPECT_EQ(g.samples(), 1u);
  EXPECT_TRUE(g.on_throughout(10, 99));
  EXPECT_FALSE(g.on_throughout(10, 100)) << "turned off while the call ran";
  EXPECT_FALSE(g.on_throughout(150, 160));
  EXPECT_FALSE(g.on_throughout(150, 250)) << "turned on while it ran: its record may be missing";
  EXPECT_TRUE(g.on_throughout(200, 250)) << "an on change at the call's start counts as on";
  EXPECT_FALSE(g.on_throughout(350, 400));
  EXPECT_EQ(g.on_ns(0, 400), 100u + 100u);
  EXPECT_EQ(g.on_ns(150, 250), 50u);
  EXPECT_EQ(g.on_ns(100, 100), 0u);
}

// The governor had the records off for the middle copy: it has no GPU time
// and is not a lost record; a record of the third copy goes to the third
// copy, not to the unflagged second one of the same size.
TEST_F(Model, CopiesIssuedWhileTheGovernorHadRecordsOffAreNotLostRecords) {
  using trace::GateReason;
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  auto& a = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);
  a.flags |= trace::kFlagGpuExpected;
  t.gpu(a, 50'000);
  const uint64_t off = t.clock_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);  // not flagged: records off
  t.copy(Direction::DtoH, MemKind::Pageable, 1 << 20, 100'000, /*async=*/true);
  const uint64_t on = t.clock_ns;
  auto& c = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);
  c.flags |= trace::kFlagGpuExpected;
  trace::GpuRecord r{};  // without a correlation id: joined by time
  r.start_ns = c.t_enter_ns + 1000;
  r.end_ns = r.start_ns + 40'000;
  r.bytes = c.bytes;
  r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
  r.cupti_copy_kind = 1;
  r.src_kind = static_cast<uint8_t>(MemKind::Pageable);
  t.gpu_records.push_back(r);
  auto& d = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 100'000);  // flagged, its record lost
  d.flags |= trace::kFlagGpuExpected;
  t.cupti_gate = {{off, false, GateReason::SyncOnly}, {on, true, GateReason::AsyncCopies}};
  model::Job job = load(t);
  ASSERT_EQ(job.processes.size(), 1u);
  const model::Process& p = job.processes[0];
  EXPECT_EQ(p.events_without_gpu, 1u);  // d only
  EXPECT_TRUE(p.gate.governed);
  EXPECT_EQ(p.gate.calls, 5u);
  EXPECT_EQ(p.gate.timed, 2u);
  EXPECT_EQ(p.gate.untimed_sync, 1u);
  EXPECT_EQ(p.gate.untimed_async, 1u);
  EXPECT_GT(p.gate.on_share, 0.5);
  EXPECT_LT(p.gate.on_share, 0.7);
  ASSERT_EQ(job.calls.size(), 5u);
  EXPECT_FALSE(job.calls[1].has_gpu_time());
  EXPECT_TRUE(job.calls[3].has_gpu_time()) << "the record went to an unflagged copy";
  analyses::Report rep = analyses::analyze(job);
  EXPECT_EQ(rep.processes[0].cupti_gate.untimed_sync, 1u);
}

// The governor turns the records on before the hooks expect them: copies
// whose hooks looked while the enable ran are unflagged yet timed. Their
// records go to them, in issue order even when the DMAs queued behind each
// other; the copy made before the enable (records off) stays untimed.
TEST_F(Model, RecordsOfCopiesRacingTheSwitchToOnGoToThem) {
  using trace::GateReason;
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  constexpr uint64_t kBytes = 4096;
  auto record = [&](uint64_t start, uint64_t ns) {
    trace::GpuRecord r{};  // without a correlation id: joined by time
    r.start_ns = start;
    r.end_ns = start + ns;
    r.bytes = kBytes;
    r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    r.cupti_copy_kind = 1;
    r.src_kind = static_cast<uint8_t>(MemKind::Pageable);
    t.gpu_records.push_back(r);
  };
  const uint64_t off = t.clock_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, kBytes, 10'000, /*async=*/true);  // records off: none
  t.copy(Direction::HtoD, MemKind::Pageable, kBytes, 10'000, /*async=*/true);  // y: enable running
  const uint64_t z_exit = t.copy(Direction::HtoD, MemKind::Pageable, kBytes, 10'000, /*async=*/true).t_exit_ns;
  record(z_exit + 1000, 3000);  // y's DMA, queued: it starts after z was issued
  record(z_exit + 5000, 7000);  // z's
  t.clock_ns = z_exit + 20'000;
  const uint64_t on = t.clock_ns;
  auto& w = t.copy(Direction::HtoD, MemKind::Pageable, kBytes, 10'000, /*async=*/true);
  w.flags |= trace::kFlagGpuExpected;
  record(w.t_exit_ns + 1000, 2000);
  t.cupti_gate = {{off, false, GateReason::Repeats}, {on, true, GateReason::AsyncCopies}};
  model::Job job = load(t);
  ASSERT_EQ(job.calls.size(), 4u);
  const model::Process& p = job.processes[0];
  EXPECT_EQ(p.gpu_records_unmatched, 0u);
  EXPECT_EQ(p.gate.timed, 3u);
  EXPECT_FALSE(job.calls[0].has_gpu_time()) << "a copy made while the records were off got one";
  EXPECT_EQ(job.calls[1].gpu_ns, 3000u);
  EXPECT_EQ(job.calls[2].gpu_ns, 7000u);
  EXPECT_EQ(job.calls[3].gpu_ns, 2000u);
  EXPECT_EQ(p.events_without_gpu, 0u);
}

TEST_F(Model, AsyncPinnedCopiesHaveNoCpuBandwidth) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pinned, 64 << 20, 3000, /*async=*/true);
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_FALSE(r.classes[0].gbps);  // 22 TB/s from a 3 us return would be nonsense
  EXPECT_EQ(r.classes[0].gbps_basis, "");
}

TEST_F(Model, SeveralProcessesMakeOneJob) {
  SyntheticTrace parent(100, 1, "/opt/app/launch");
  parent.copy(Direction::HtoD, MemKind::Pageable, 1000, 10'000);
  SyntheticTrace child(101, 100, "/opt/app/worker");
  child.process.start_realtime_ns = parent.process.start_realtime_ns + 5'000'000;
  child.copy(Direction::HtoD, MemKind::Pageable, 3000, 20'000);
  child.copy(Direction::DtoH, MemKind::Pinned, 500, 5'000);
  analyses::Report r = analyses::analyze(load({child, parent}));
  ASSERT_EQ(r.processes.size(), 2u);
  EXPECT_EQ(r.program, "/opt/app/launch");  // the root of the fork tree
  EXPECT_EQ(r.totals.calls, 3u);
  EXPECT_EQ(r.totals.bytes, 4500u);
  EXPECT_EQ(r.totals.cpu_blocked_ns, 35'000u);
  const auto* h2d = testing::find_class(r, Direction::HtoD, MemKind::Pageable);
  ASSERT_TRUE(h2d);
  EXPECT_EQ(h2d->calls, 2u);
  EXPECT_EQ(h2d->bytes, 4000u);
  EXPECT_EQ(r.processes[0].pid, 101u);
  EXPECT_EQ(r.processes[0].copies, 2u);
  EXPECT_EQ(r.processes[1].copies, 1u);
  // Span: parent start to the child's last call (its clock anchored to its own start).
  const auto& last = child.events.back();
  EXPECT_EQ(r.span_ns, 5'000'000 + (last.t_exit_ns - child.process.start_monotonic_ns));
}

TEST_F(Model, PartialTraceIsReportedWithWhatIsComplete) {
  SyntheticTrace t;
  t.write_end = false;
  t.copy(Direction::HtoD, MemKind::Pageable, 1000, 10'000);
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.processes.size(), 1u);
  EXPECT_FALSE(r.processes[0].complete);
  EXPECT_NE(r.processes[0].cut_reason.find("did not shut down cleanly"), std::string::npos);
  EXPECT_EQ(r.totals.calls, 1u);
}

TEST_F(Model, UnusableFilesAreSkippedWithOneLineEach) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, 1000, 10'000);
  std::string good = write(t, "good.trace");
  std::ofstream(path("foreign.txt")) << "not a trace\n";
  std::ofstream(path("empty.trace")).flush();
  model::Job job = load_paths({path("missing.trace"), good, path("foreign.txt"), path("empty.trace")});
  EXPECT_EQ(job.processes.size(), 1u);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("missing.trace: cannot open"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("foreign.txt: not a cuxfer trace"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("empty.trace: empty file"), std::string::npos) << errors[2];
  for (const auto& e : errors) EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST_F(Model, StacksWithTheSameUserFrameShareASite) {
  SyntheticTrace t;
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  t.modules.push_back({0x7f0000000000, 0x7f0000000000, 0x7f0000100000, "/usr/lib/libcudart.so.13", ""});
  t.callsites.push_back({1, {0x7f0000001000, 0x401000}});
  t.callsites.push_back({2, {0x7f0000002000, 0x401000}});  // another cudart path, same user line
  t.callsites.push_back({3, {0x7f0000002000, 0x402000}});
  t.copy(Direction::HtoD, MemKind::Pageable, 10, 100, false, 1);
  t.copy(Direction::HtoD, MemKind::Pageable, 20, 100, false, 2);
  t.copy(Direction::HtoD, MemKind::Pageable, 40, 500, false, 3);
  t.copy(Direction::HtoD, MemKind::Pageable, 80, 100, false, 0);    // no stack
  t.copy(Direction::HtoD, MemKind::Pageable, 160, 100, false, 77);  // id not in the table
  model::Job job = load(t);
  ASSERT_EQ(job.sites.size(), 2u);
  EXPECT_EQ(job.sites[0].frame.module, "/opt/app/train");
  EXPECT_EQ(job.sites[0].frame.offset, 0x1000u);
  EXPECT_EQ(job.sites[0].stack.size(), 2u);
  EXPECT_EQ(job.calls[0].site, job.calls[1].site);
  EXPECT_NE(job.calls[0].site, job.calls[2].site);
  EXPECT_EQ(job.calls[3].site, model::kNoSite);
  EXPECT_EQ(job.calls[4].site, model::kNoSite);

  analyses::Report r = analyses::analyze(job);
  ASSERT_EQ(r.callsites.size(), 2u);
  EXPECT_EQ(r.callsites[0].cpu_blocked_ns, 500u);  // most CPU-blocked time first
  EXPECT_EQ(r.callsites[0].frame.offset, 0x2000u);
  EXPECT_EQ(r.callsites[1].calls, 2u);
  EXPECT_EQ(r.callsites[1].bytes, 30u);
  EXPECT_EQ(r.callsites[1].pid, t.process.pid);
  EXPECT_EQ(r.callsites[1].main_class, "H2D pageable");
  EXPECT_EQ(r.calls_without_site, 2u);
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer {
namespace {

class GpuJoinByTime : public testing::JobTest {};

TEST_F(GpuJoinByTime, RecordsWithoutCorrelationIdJoinByTimeAndSize) {
  testing::SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  // (gpu() right after each copy(): the references do not survive the next copy.)
  t.gpu(t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 400'000), 200'000);
  t.gpu(t.copy(Direction::DtoH, MemKind::Pageable, 1 << 20, 300'000), 150'000);
  t.gpu(t.copy(Direction::HtoD, MemKind::Pinned, 4096, 5'000, /*async=*/true), 3'000);
  trace::GpuRecord late = t.gpu_records[2];
  late.start_ns = t.events[2].t_exit_ns + 50'000;  // an async copy's DMA starts after it returned
  late.end_ns = late.start_ns + 3'000;
  t.gpu_records[2] = late;
  trace::GpuRecord stray = t.gpu_records[0];
  stray.bytes = 12345;  // no call of this size
  t.gpu_records.push_back(stray);
  for (auto& r : t.gpu_records) r.correlation_id = 0;
  model::Job job = load(t);
  EXPECT_EQ(job.calls[0].gpu_ns, 200'000u);
  EXPECT_EQ(job.calls[1].gpu_ns, 150'000u);
  EXPECT_EQ(job.calls[2].gpu_ns, 3'000u);
  EXPECT_EQ(job.processes[0].gpu_records_joined_by_time, 3u);
  EXPECT_EQ(job.processes[0].gpu_records_unmatched, 1u);
  ASSERT_FALSE(job.notes.empty());
  EXPECT_NE(job.notes.back().find("joined to calls by time, size and kind"), std::string::npos);
}

// Two async copies of the same size, one pinned and one pageable, queued
// before either DMA starts, and a second pinned copy queued behind the first:
// kind and issue order decide, not proximity in time.
TEST_F(GpuJoinByTime, KindAndIssueOrderDecideBetweenEqualSizes) {
  testing::SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  constexpr uint64_t kSize = 64 << 20;
  t.copy(Direction::HtoD, MemKind::Pinned, kSize, 3'000, /*async=*/true);
  t.copy(Direction::HtoD, MemKind::Pageable, kSize, 9'000'000, /*async=*/true);
  t.copy(Direction::HtoD, MemKind::Pinned, kSize, 3'000, /*async=*/true);
  const uint64_t after_all = t.clock_ns;
  auto record = [&](uint64_t start, uint64_t ns, trace::MemKind host) {
    trace::GpuRecord r{};
    r.start_ns = start;
    r.end_ns = start + ns;
    r.bytes = kSize;
    r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    r.cupti_copy_kind = 1;  // HtoD
    r.src_kind = static_cast<uint8_t>(host);
    r.dst_kind = static_cast<uint8_t>(MemKind::Device);
    t.gpu_records.push_back(r);
  };
  record(after_all + 100, 1'200'000, MemKind::Pinned);     // first pinned copy
  record(after_all + 200, 8'000'000, MemKind::Pageable);   // the pageable one, on another stream
  record(after_all + 1'300'000, 1'100'000, MemKind::Pinned);  // second pinned copy
  model::Job job = load(t);
  EXPECT_EQ(job.calls[0].gpu_ns, 1'200'000u);
  EXPECT_EQ(job.calls[1].gpu_ns, 8'000'000u);
  EXPECT_EQ(job.calls[2].gpu_ns, 1'100'000u);
  EXPECT_EQ(job.processes[0].gpu_records_joined_by_time, 3u);
}

TEST_F(GpuJoinByTime, NotWithoutCupti) {
  testing::SyntheticTrace t;
  auto& a = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 400'000);
  t.gpu(a, 200'000);
  t.gpu_records[0].correlation_id = 0;
  model::Job job = load(t);
  EXPECT_FALSE(job.calls[0].has_gpu_time());
  EXPECT_TRUE(job.notes.empty());
}

}  // namespace
}  // namespace cuxfer
