// Totals and findings on traces with known answers, each finding next to a
// clean twin on which it must not fire.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "analyzer/analyses/tally.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "trace/python_frame.h"

namespace cuxfer {
namespace {

using testing::find_class;
using testing::find_finding;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::EventKind;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;

class Analyses : public JobTest {};

TEST_F(Analyses, ClassesPageableShareAndFailedCalls) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, 3 * MiB, 300'000);
  t.copy(Direction::HtoD, MemKind::Pageable, 1 * MiB, 100'000);
  t.copy(Direction::HtoD, MemKind::Pinned, 4 * MiB, 80'000);
  t.copy(Direction::DtoH, MemKind::Registered, 2 * MiB, 40'000);
  t.copy(Direction::DtoD, MemKind::Device, 16 * MiB, 5'000);
  t.copy(Direction::HtoH, MemKind::Pageable, 100, 1'000);
  auto& failed = t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 2'000);
  failed.flags |= trace::kFlagFailed;
  failed.result = 1;

  analyses::Report r = analyses::analyze(load(t));
  EXPECT_EQ(r.totals.calls, 6u);
  EXPECT_EQ(r.totals.bytes, 26 * MiB + 100);
  EXPECT_EQ(r.totals.cpu_blocked_ns, 526'000u);
  EXPECT_EQ(r.totals.failed_calls, 1u);
  ASSERT_EQ(r.classes.size(), 5u);
  const auto* pageable = find_class(r, Direction::HtoD, MemKind::Pageable);
  ASSERT_TRUE(pageable);
  EXPECT_EQ(pageable->calls, 2u);
  EXPECT_EQ(pageable->bytes, 4 * MiB);  // the failed 8 MiB moved nothing
  EXPECT_EQ(pageable->failed_calls, 1u);
  EXPECT_EQ(pageable->cpu_blocked_ns, 400'000u);
  EXPECT_DOUBLE_EQ(*pageable->gbps, 4.0 * MiB / 400'000);
  const auto* d2d = find_class(r, Direction::DtoD, MemKind::Device);
  ASSERT_TRUE(d2d);
  EXPECT_FALSE(d2d->gbps);  // cudaMemcpy D2D does not block for the copy
  ASSERT_TRUE(find_class(r, Direction::HtoH, MemKind::Pageable));
  // Classes come in direction order: H2D before D2H before D2D before H2H.
  EXPECT_EQ(r.classes.front().cls.direction, Direction::HtoD);
  EXPECT_EQ(r.classes.back().cls.direction, Direction::HtoH);

  // Pageable share counts host<->device bytes only (not D2D, not H2H).
  EXPECT_EQ(r.pageable_share.host_bytes, 10 * MiB);
  EXPECT_EQ(r.pageable_share.pageable_bytes, 4 * MiB);
  EXPECT_DOUBLE_EQ(r.pageable_share.fraction, 0.4);
}

// A crafted trace whose copies claim 2^64-1 bytes each: summed they wrapped
// around to "16 copies, 16384 PiB". Impossible sizes count as 0 bytes, and a
// note says so; the possible copies' bytes stay exact.
TEST_F(Analyses, ImpossibleSizesAreNotedNotSummed) {
  SyntheticTrace t;
  for (int i = 0; i < 16; ++i) t.copy(Direction::HtoD, MemKind::Pageable, UINT64_MAX, 1'000);
  t.copy(Direction::HtoD, MemKind::Pageable, 3 * MiB, 300'000);
  model::Job job = load(t);
  analyses::Report r = analyses::analyze(job);
  EXPECT_EQ(r.totals.calls, 17u);
  EXPECT_EQ(r.totals.bytes, 3 * MiB);
  const auto* pageable = find_class(r, Direction::HtoD, MemKind::Pageable);
  ASSERT_TRUE(pageable);
  EXPECT_EQ(pageable->bytes, 3 * MiB);
  bool noted = false;
  for (const auto& n : job.notes)
    noted = noted || n.find("16 events claim impossible sizes") != std::string::npos;
  EXPECT_TRUE(noted) << "no note of the impossible sizes";
}

// Each under a PiB, but 20,000 of 2^49 bytes would pass 2^64 in all: those
// past 2^63 bytes count as 0 bytes and are noted; no total wraps.
TEST_F(Analyses, ImpossibleTotalsAreNotedNotWrapped) {
  SyntheticTrace t;
  constexpr uint64_t kHuge = 1ull << 49;
  for (int i = 0; i < 20000; ++i) t.copy(Direction::HtoD, MemKind::Pageable, kHuge, 1'000);
  model::Job job = load(t);
  analyses::Report r = analyses::analyze(job);
  EXPECT_EQ(r.totals.calls, 20000u);
  EXPECT_EQ(r.totals.bytes, (1ull << 63));  // 2^14 copies fit exactly; the rest are noted
  bool noted = false;
  for (const auto& n : job.notes)
    noted = noted || n.find(std::to_string(20000 - (1 << 14)) + " events claim impossible sizes") != std::string::npos;
  EXPECT_TRUE(noted) << "no note of the impossible sizes";
}

TEST_F(Analyses, MemsetsAllocationsAndApis) {
  SyntheticTrace t;
  t.add(EventKind::Memset, "cudaMemset", Direction::Unknown, MemKind::Unknown, MemKind::Device, 4096, 100);
  t.add(EventKind::Memset, "cudaMemset", Direction::Unknown, MemKind::Unknown, MemKind::Device, 1024, 100);
  t.add(EventKind::DeviceAlloc, "cudaMalloc", Direction::Unknown, MemKind::Unknown, MemKind::Device, 1 * MiB,
        5'000);
  t.add(EventKind::DeviceFree, "cudaFree", Direction::Unknown, MemKind::Unknown, MemKind::Device, 0, 1'000);
  t.add(EventKind::ManagedAlloc, "cudaMallocManaged", Direction::Unknown, MemKind::Unknown, MemKind::Managed,
        2 * MiB, 5'000);
  t.add(EventKind::HostAlloc, "cudaMallocHost", Direction::Unknown, MemKind::Unknown, MemKind::Pinned,
        3 * MiB, 50'000);
  t.add(EventKind::HostRegister, "cudaHostRegister", Direction::Unknown, MemKind::Unknown,
        MemKind::Registered, 5 * MiB, 70'000);
  auto& bad = t.add(EventKind::HostRegister, "cudaHostRegister", Direction::Unknown, MemKind::Unknown,
                    MemKind::Registered, 7 * MiB, 70'000);
  bad.flags |= trace::kFlagFailed;
  t.copy(Direction::HtoD, MemKind::Pinned, 100, 1'000);

  analyses::Report r = analyses::analyze(load(t));
  EXPECT_EQ(r.memsets.calls, 2u);
  EXPECT_EQ(r.memsets.bytes, 5120u);
  EXPECT_EQ(r.allocations.device.calls, 1u);
  EXPECT_EQ(r.allocations.device.bytes, 1 * MiB);
  EXPECT_EQ(r.allocations.device.frees, 1u);
  EXPECT_EQ(r.allocations.managed.bytes, 2 * MiB);
  EXPECT_EQ(r.allocations.host_pinned.bytes, 3 * MiB);
  EXPECT_EQ(r.allocations.host_registered.calls, 1u);
  EXPECT_EQ(r.allocations.host_registered.bytes, 5 * MiB);
  EXPECT_EQ(r.totals.calls, 1u);  // memsets and allocations are not copies

  std::map<std::string, analyses::ApiTotals> apis;
  for (const auto& a : r.apis) apis[a.name] = a;
  EXPECT_EQ(apis["cudaMemset"].calls, 2u);
  EXPECT_EQ(apis["cudaHostRegister"].calls, 1u);
  EXPECT_EQ(apis["cudaHostRegister"].failed_calls, 1u);
  EXPECT_EQ(apis["cudaHostRegister"].bytes, 5 * MiB);
  EXPECT_EQ(apis["cudaMemcpy"].bytes, 100u);
  EXPECT_EQ(r.apis.front().name, "cudaHostRegister");  // most CPU-blocked time first
}

TEST_F(Analyses, AsyncPageableFiresWithNominalReturnTime) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  for (int i = 0; i < 3; ++i) t.copy(Direction::HtoD, MemKind::Pageable, MiB, 100'000, true, s);
  t.copy(Direction::DtoH, MemKind::Pageable, 1000, 20'000, true);      // no call site
  t.copy(Direction::HtoD, MemKind::Pageable, MiB, 100'000, false, s);  // synchronous: not this finding
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "async_pageable");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 4u);
  EXPECT_EQ(f->bytes, 3 * MiB + 1000);
  EXPECT_EQ(f->time_ns, 320'000u);
  EXPECT_EQ(f->max_ns, 100'000u);
  ASSERT_TRUE(f->estimated_recoverable_ns);
  EXPECT_EQ(*f->estimated_recoverable_ns, 3 * (100'000u - 3000) + (20'000 - 3000));
  EXPECT_EQ(f->callsites, (std::vector<uint32_t>{1}));
  ASSERT_EQ(f->sites.size(), 2u);
  EXPECT_EQ(f->sites[0].callsite, 1u);
  EXPECT_EQ(f->sites[0].calls, 3u);
  EXPECT_EQ(f->sites[1].callsite, 0u);  // the copy without a stack is counted, not listed
  EXPECT_NE(f->reference_source.find("nominal"), std::string::npos);
  EXPECT_FALSE(f->advice.empty());
}

TEST_F(Analyses, AsyncPageableUsesTheRunsPinnedReturnTime) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, MiB, 100'000, true);
  for (uint64_t ns : {2'000, 5'000, 9'000}) t.copy(Direction::HtoD, MemKind::Pinned, MiB, ns, true);
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "async_pageable");
  ASSERT_TRUE(f);
  EXPECT_EQ(*f->estimated_recoverable_ns, 100'000u - 5'000u);  // the median
  EXPECT_NE(f->reference_source.find("this run"), std::string::npos);
}

TEST_F(Analyses, AsyncPageableCleanTwin) {
  SyntheticTrace t;
  for (int i = 0; i < 3; ++i) t.copy(Direction::HtoD, MemKind::Pinned, MiB, 3'000, true);
  for (int i = 0; i < 3; ++i) t.copy(Direction::HtoD, MemKind::Registered, MiB, 3'000, true);
  t.copy(Direction::DtoD, MemKind::Device, MiB, 3'000, true);
  auto& failed = t.copy(Direction::HtoD, MemKind::Pageable, MiB, 3'000, true);
  failed.flags |= trace::kFlagFailed;
  EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "async_pageable"));
}

TEST_F(Analyses, LargePageableAgainstNominalPinned) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, false, s);  // 6.7 GB/s
  t.copy(Direction::HtoD, MemKind::Pageable, MiB - 1, 1'000'000, false, s);    // too small
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "large_pageable");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 1u);
  EXPECT_EQ(f->bytes, 64 * MiB);
  EXPECT_EQ(f->time_ns, 10'000'000u);
  EXPECT_EQ(f->time_basis, "cpu_blocked");
  EXPECT_DOUBLE_EQ(*f->achieved_gbps, 64.0 * MiB / 10'000'000);
  EXPECT_DOUBLE_EQ(*f->reference_gbps, 50.0);
  EXPECT_NE(f->reference_source.find("nominal"), std::string::npos);
  const uint64_t pinned_ns = static_cast<uint64_t>(64.0 * MiB / 50.0);
  EXPECT_EQ(*f->estimated_recoverable_ns, 10'000'000u - pinned_ns);
  EXPECT_EQ(f->callsites, (std::vector<uint32_t>{1}));
}

TEST_F(Analyses, LargePageableAgainstPinnedMeasuredInTheRun) {
  SyntheticTrace t;
  t.copy(Direction::DtoH, MemKind::Pageable, 16 * MiB, 4'000'000);
  t.copy(Direction::DtoH, MemKind::Pinned, 16 * MiB, 400'000);  // 41.9 GB/s
  t.copy(Direction::DtoH, MemKind::Pinned, 1000, 10);           // too small to be a reference
  t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 100'000);  // other direction: not used
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "large_pageable");
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ(*f->reference_gbps, 16.0 * MiB / 400'000);
  EXPECT_NE(f->reference_source.find("measured"), std::string::npos);
  EXPECT_EQ(*f->estimated_recoverable_ns, 4'000'000u - 400'000u);
}

TEST_F(Analyses, LargePageableUsesGpuTimeWhenPresent) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  auto& e = t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 2'000'000);
  t.gpu(e, 1'500'000);
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "large_pageable");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->time_basis, "gpu");
  EXPECT_EQ(f->time_ns, 1'500'000u);
}

TEST_F(Analyses, LargePageableCleanTwin) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'200'000);
  t.copy(Direction::DtoH, MemKind::Registered, 64 * MiB, 1'200'000);
  t.copy(Direction::DtoD, MemKind::Device, 64 * MiB, 1'200'000);
  t.copy(Direction::HtoD, MemKind::Managed, 64 * MiB, 1'200'000);
  t.copy(Direction::HtoD, MemKind::Pageable, MiB - 1, 100'000);
  EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "large_pageable"));
}

TEST_F(Analyses, TinyStormFiresAtAThousandFromOneSite) {
  SyntheticTrace t;
  uint32_t hot = t.site(0x401000);
  for (int i = 0; i < 1000; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, hot);
  analyses::Report r = analyses::analyze(load(t));
  const auto* f = find_finding(r, "tiny_storm");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 1000u);
  EXPECT_EQ(f->bytes, 4000u);
  EXPECT_EQ(f->time_ns, 9'000'000u);
  EXPECT_FALSE(f->estimated_recoverable_ns);
  ASSERT_EQ(f->sites.size(), 1u);
  // One call every 10 us (9 us inside, 1 us between): 100,000 calls/s.
  ASSERT_TRUE(f->sites[0].calls_per_second);
  EXPECT_NEAR(*f->sites[0].calls_per_second, 100'000.0, 1e-6);
  EXPECT_NEAR(*f->calls_per_second, 100'000.0, 1e-6);
}

TEST_F(Analyses, TinyStormCleanTwins) {
  {
    SyntheticTrace t;  // 999 from one site
    uint32_t s = t.site(0x401000);
    for (int i = 0; i < 999; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 4, 9'000, false, s);
    EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "tiny_storm"));
  }
  {
    SyntheticTrace t;  // 1000 split over two sites
    uint32_t a = t.site(0x401000), b = t.site(0x402000);
    for (int i = 0; i < 1000; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 4, 9'000, false, i % 2 ? a : b);
    EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "tiny_storm"));
  }
  {
    SyntheticTrace t;  // 1000 of 4 KiB + 1
    uint32_t s = t.site(0x401000);
    for (int i = 0; i < 1000; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 4097, 9'000, false, s);
    EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "tiny_storm"));
  }
  {
    SyntheticTrace t;  // 1000 with no call site: "one call site" is unknown
    for (int i = 0; i < 1000; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 4, 9'000);
    EXPECT_FALSE(find_finding(analyses::analyze(load(t)), "tiny_storm"));
  }
}

TEST_F(Analyses, CleanRunHasNoFindings) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  for (int i = 0; i < 10; ++i) t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'200'000, true, s);
  for (int i = 0; i < 10; ++i) t.copy(Direction::DtoH, MemKind::Pinned, 4, 8'000, false, s);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_TRUE(r.findings.empty());
  EXPECT_DOUBLE_EQ(r.pageable_share.fraction, 0.0);
}

TEST_F(Analyses, FindingsAreOrderedByWhatTheyCanRecover) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  for (int i = 0; i < 1000; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, s);
  t.copy(Direction::HtoD, MemKind::Pageable, 256 * MiB, 40'000'000, true, s);
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.findings.size(), 4u);
  EXPECT_EQ(r.findings[0].kind, analyses::FindingKind::AsyncPageable);      // ~40 ms recoverable
  EXPECT_EQ(r.findings[1].kind, analyses::FindingKind::LargePageable);      // ~34.6 ms
  EXPECT_EQ(r.findings[2].kind, analyses::FindingKind::RewriteCandidates);  // staged at 35 GB/s: ~32.3 ms
  EXPECT_EQ(r.findings[3].kind, analyses::FindingKind::TinyStorm);          // 9 ms, no estimate
}

// The rewrite what-if follows the shim's rules: a reused buffer of >= 1 MiB
// runs in place from its second copy; a first use >= the staging threshold
// is staged; smaller ones pass through (no prediction); a process recorded
// with the rewrite on is left to `cuxfer diff`.
TEST_F(Analyses, RewriteWhatIfFollowsTheShimsRules) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  // 4 copies of one 4 MiB buffer at 10 GB/s (419 us each): 3 in place at 50 GB/s.
  for (int i = 0; i < 4; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 4 * MiB, 419'430, false, s).address = 0x7000'0000;
  // one 16 MiB first-use copy at 8 GB/s: staged at 35 GB/s.
  t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 2'097'152, false, s).address = 0x9000'0000;
  // 64 KiB copies, not reused: below every threshold.
  for (int i = 0; i < 5; ++i)
    t.copy(Direction::HtoD, MemKind::Pageable, 64 * 1024, 20'000, false, s).address = 0xa000'0000 + i * 0x100000;
  analyses::Report r = analyses::analyze(load(t));
  const analyses::Finding* f = find_finding(r, "rewrite_candidates");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 4u);  // 3 registered + 1 staged; the first 4 MiB use is below the H2D threshold
  EXPECT_NE(f->advice.find("3 of these copies reuse a buffer"), std::string::npos) << f->advice;
  EXPECT_NE(f->advice.find("1 would be staged"), std::string::npos) << f->advice;
  const double in_place = 4.0 * MiB / 50.0, staged = 16.0 * MiB / 35.0;
  const double want = 3 * 419'430 + 2'097'152 - (3 * in_place + staged);
  ASSERT_TRUE(f->estimated_recoverable_ns);
  EXPECT_NEAR(static_cast<double>(*f->estimated_recoverable_ns), want, 4.0);
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer {
namespace {

// Kernel records (`cuxfer record --kernels`): DMA under kernels, and a
// synchronous copy that left the GPU idle between two kernels.
TEST_F(Analyses, OverlapFromKernelRecords) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  t.notes.push_back("cupti: kernel records on");
  uint32_t s = t.site(0x401000);
  auto kernel = [&](uint64_t b, uint64_t e) {
    trace::GpuRecord k{};
    k.kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
    k.start_ns = b;
    k.end_ns = e;
    k.stream_id = 7;
    t.gpu_records.push_back(k);
  };
  const uint64_t t0 = t.clock_ns;
  kernel(t0, t0 + 10'000'000);  // A: 0..10 ms
  t.clock_ns = t0 + 10'000'000;
  trace::Event& sync = t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 20'000'000, false, s);  // 10..30 ms
  t.gpu(sync, 8'000'000);
  kernel(t0 + 31'000'000, t0 + 41'000'000);  // B: 31..41 ms
  t.clock_ns = t0 + 32'000'000;
  trace::Event& async = t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 3'000, true, s);
  t.gpu(async, 2'000'000);  // DMA 32..34 ms, under B
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_TRUE(r.overlap.kernels_recorded);
  ASSERT_EQ(r.overlap.devices.size(), 1u);
  const auto& d = r.overlap.devices[0];
  EXPECT_EQ(d.kernels, 2u);
  EXPECT_EQ(d.kernel_busy_ns, 20'000'000u);
  EXPECT_EQ(d.dma_ns, 10'000'000u);
  EXPECT_EQ(d.dma_under_kernels_ns, 2'000'000u);
  EXPECT_EQ(d.sync_copy_ns, 20'000'000u);
  EXPECT_EQ(d.sync_copy_idle_ns, 20'000'000u);
  const analyses::Finding* f = find_finding(r, "sync_copy_idle");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 1u);
  EXPECT_EQ(f->estimated_recoverable_ns.value_or(0), 20'000'000u);
}

TEST_F(Analyses, NoOverlapAnalysisWithoutKernelRecords) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 20'000'000, false, s);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_FALSE(r.overlap.kernels_recorded);
  EXPECT_FALSE(find_finding(r, "sync_copy_idle"));
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer {
namespace {

TEST_F(Analyses, PerDeviceTotalsSplitByProcessAndDevice) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, 1 * MiB, 1000).device = 0;
  t.copy(Direction::DtoH, MemKind::Pinned, 2 * MiB, 1000).device = 1;
  t.copy(Direction::Peer, MemKind::Device, 4 * MiB, 1000).device = 1;
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].device, 0);
  EXPECT_EQ(r.devices[0].h2d_bytes, 1 * MiB);
  EXPECT_EQ(r.devices[0].pageable_bytes, 1 * MiB);
  EXPECT_EQ(r.devices[1].device, 1);
  EXPECT_EQ(r.devices[1].calls, 2u);
  EXPECT_EQ(r.devices[1].d2h_bytes, 2 * MiB);
  EXPECT_EQ(r.devices[1].peer_bytes, 4 * MiB);
  EXPECT_EQ(r.devices[1].pageable_bytes, 0u);
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer {
namespace {

// Per-device totals come from the one pass with a cached slot per (process,
// device): switching devices back and forth, an unknown device (-1) and a
// failed copy must give what a map per (process, device) gave.
TEST_F(Analyses, PerDeviceTotalsInDeviceOrderAcrossSwitches) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pinned, 1 * MiB, 1000).device = 2;
  t.copy(Direction::DtoH, MemKind::Pageable, 2 * MiB, 1000).device = -1;
  t.copy(Direction::DtoD, MemKind::Device, 4 * MiB, 1000).device = 0;
  t.copy(Direction::DtoH, MemKind::Pageable, 8 * MiB, 1000).device = 2;
  auto& failed = t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 1000);
  failed.device = 3;
  failed.flags |= trace::kFlagFailed;
  failed.result = 1;
  analyses::Report r = analyses::analyze(load(t));
  ASSERT_EQ(r.devices.size(), 3u);  // the failed copy's device has no row
  EXPECT_EQ(r.devices[0].device, -1);
  EXPECT_EQ(r.devices[0].d2h_bytes, 2 * MiB);
  EXPECT_EQ(r.devices[1].device, 0);
  EXPECT_EQ(r.devices[1].d2d_bytes, 4 * MiB);
  EXPECT_EQ(r.devices[2].device, 2);
  EXPECT_EQ(r.devices[2].calls, 2u);
  EXPECT_EQ(r.devices[2].bytes, 9 * MiB);
  EXPECT_EQ(r.devices[2].h2d_bytes, 1 * MiB);
  EXPECT_EQ(r.devices[2].d2h_bytes, 8 * MiB);
  EXPECT_EQ(r.devices[2].pageable_bytes, 8 * MiB);
  EXPECT_EQ(r.devices[2].cpu_blocked_ns, 2000u);
  EXPECT_FALSE(r.devices[2].gpu_ns);
}

// The what-if's reuse rule in one pass: a buffer is (address, size), and only
// copies the what-if counts make it "copied before" (not a failed one).
TEST_F(Analyses, RewriteWhatIfReuseIsPerAddressAndSize) {
  SyntheticTrace t;
  uint32_t s = t.site(0x401000);
  auto copy = [&](uint64_t bytes, uint64_t address) -> trace::Event& {
    trace::Event& e = t.copy(Direction::HtoD, MemKind::Pageable, bytes, bytes / 10, false, s);  // 10 GB/s
    e.address = address;
    return e;
  };
  copy(4 * MiB, 0x7000'0000);  // first use, below the H2D staging threshold: passes through
  copy(2 * MiB, 0x7000'0000);  // same address, other size: another buffer's first use
  copy(4 * MiB, 0x7000'0000);  // reuse: in place
  copy(2 * MiB, 0x7000'0000);  // reuse: in place
  auto& failed = copy(4 * MiB, 0x8000'0000);
  failed.flags |= trace::kFlagFailed;
  failed.result = 1;
  copy(4 * MiB, 0x8000'0000);  // the first successful use: passes through
  analyses::Report r = analyses::analyze(load(t));
  const analyses::Finding* f = find_finding(r, "rewrite_candidates");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->calls, 2u);
  EXPECT_EQ(f->bytes, 6 * MiB);
  EXPECT_NE(f->advice.find("2 of these copies reuse a buffer"), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("would be staged"), std::string::npos) << f->advice;  // none: the clause is left out
  ASSERT_EQ(f->sites.size(), 1u);
  EXPECT_EQ(f->sites[0].calls, 2u);
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer {
namespace {

TEST(FindingKinds, EveryKindHasOneNameThatParsesBack) {
  std::set<std::string> names;
  for (analyses::FindingKind k : analyses::kAllFindingKinds) {
    const std::string name = analyses::finding_kind_name(k);
    EXPECT_NE(name, "?");
    EXPECT_TRUE(names.insert(name).second) << name;
    analyses::FindingKind back;
    ASSERT_TRUE(analyses::parse_finding_kind(name, back)) << name;
    EXPECT_EQ(back, k);
  }
  EXPECT_EQ(names.size(), 8u);
  analyses::FindingKind k;
  EXPECT_FALSE(analyses::parse_finding_kind("async_pagable", k));
}

}  // namespace
}  // namespace cuxfer

namespace cuxfer::testing {
namespace {

analyses::Finding finding_with(analyses::FindingKind k, std::vector<analyses::FindingSite> sites, uint64_t total) {
  analyses::Finding f;
  f.kind = k;
  f.estimated_recoverable_ns = total;
  f.sites = std::move(sites);
  return f;
}

analyses::FindingSite site_est(uint32_t id, uint64_t time, uint64_t est) {
  analyses::FindingSite s;
  s.callsite = id;
  s.time_ns = time;
  s.estimated_recoverable_ns = est;
  return s;
}

// A PyTorch script's three findings over the same pageable copies (issue 14:
// 2.28 + 2.11 + 2.10 s of a 2.28 s total): combined, each site once.
TEST(CombineEstimates, EachCallSiteCountsOnce) {
  using analyses::FindingKind;
  std::vector<analyses::Finding> f = {
      finding_with(FindingKind::AsyncPageable, {site_est(1, 1000, 900), site_est(2, 500, 400)}, 1300),
      finding_with(FindingKind::LargePageable, {site_est(1, 1000, 950)}, 950),
      finding_with(FindingKind::RewriteCandidates, {site_est(1, 1000, 800), site_est(2, 500, 450)}, 1250)};
  auto c = analyses::combine_estimates(f);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->findings, 3u);
  EXPECT_EQ(c->sum_ns, 3500u);
  EXPECT_EQ(c->recoverable_ns, 950u + 450u);
  // Never more than the site's time; a finding without per-site estimates counts on its own.
  f.push_back(finding_with(FindingKind::DuplicateUploads, {}, 300));
  f[0].sites[1].estimated_recoverable_ns = 9999;
  c = analyses::combine_estimates(f);
  EXPECT_EQ(c->recoverable_ns, 950u + 500u + 300u);
  // One finding alone: nothing overlaps, nothing to combine.
  EXPECT_FALSE(analyses::combine_estimates({f[0]}));
  EXPECT_FALSE(analyses::combine_estimates({}));
}

// Ranks and a Pool's workers run the same code: their sites at one line are
// one location (the module loaded elsewhere in each: matched by offset),
// summed and named by its largest site; another line stays its own; the
// findings' sites are summed the same way.
TEST_F(Analyses, SitesOfSeveralProcessesAtOneLineAreOneLocation) {
  SyntheticTrace a(100), b(200);
  a.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  b.modules.push_back({0x7000000, 0x7000000, 0x7100000, "/opt/app/train", ""});
  const uint32_t sa = a.site(0x401000), sb = b.site(0x7001000), other = b.site(0x7002000);
  for (int i = 0; i < 3; ++i) a.copy(Direction::HtoD, MemKind::Pageable, MiB, 100'000, true, sa);
  for (int i = 0; i < 2; ++i) b.copy(Direction::HtoD, MemKind::Pageable, MiB, 120'000, true, sb);
  b.copy(Direction::DtoH, MemKind::Pinned, 4 * MiB, 1'000, false, sb);
  b.copy(Direction::HtoD, MemKind::Pinned, 10, 50'000, false, other);
  const analyses::Report r = analyses::analyze(load({a, b}));

  ASSERT_EQ(r.callsites.size(), 3u);
  ASSERT_EQ(r.locations.size(), 2u);
  const analyses::LocationTotals& train = r.locations[0];
  EXPECT_EQ(train.key, "train+0x1000");
  ASSERT_EQ(train.callsites.size(), 2u);
  EXPECT_EQ(train.pids, (std::vector<uint32_t>{100, 200}));  // most CPU-blocked first: a's 300 us
  EXPECT_EQ(train.id, train.callsites[0]);
  EXPECT_EQ(train.pid, 100u);
  EXPECT_EQ(train.calls, 6u);
  EXPECT_EQ(train.bytes, 9 * MiB);
  EXPECT_EQ(train.cpu_blocked_ns, 3 * 100'000u + 2 * 120'000u + 1'000u);
  EXPECT_EQ(train.max_cpu_ns, 120'000u);
  EXPECT_EQ(train.main_class, "H2D pageable +1");  // 5 MiB of H2D pageable over both, 4 MiB D2H pinned in b
  EXPECT_FALSE(train.stacks_differ);
  EXPECT_EQ(r.locations[1].callsites.size(), 1u);
  EXPECT_EQ(r.locations[1].pids, (std::vector<uint32_t>{200}));
  EXPECT_EQ(r.locations[1].calls, 1u);

  const analyses::Finding* f = find_finding(r, "async_pageable");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->sites.size(), 2u);
  ASSERT_EQ(f->locations.size(), 1u);
  EXPECT_EQ(f->locations[0].callsite, train.id);
  EXPECT_EQ(f->locations[0].processes, 2u);
  EXPECT_EQ(f->locations[0].calls, 5u);
  EXPECT_EQ(f->locations[0].bytes, 5 * MiB);
  EXPECT_EQ(f->locations[0].time_ns, f->sites[0].time_ns + f->sites[1].time_ns);
  EXPECT_EQ(*f->locations[0].estimated_recoverable_ns,
            *f->sites[0].estimated_recoverable_ns + *f->sites[1].estimated_recoverable_ns);
}

// A Python program's copies from threads that run no Python (autograd's
// engine, NCCL's): one note says how many, on how many threads, and why their
// sites are native. A C++ program's copies are not counted, nor said.
TEST_F(Analyses, CopiesWithoutPythonFramesInAPythonProgramAreNoted) {
  SyntheticTrace py(300), cpp(301);
  py.py_codes.push_back({1, 0x030b, 10, "/work/train.py", "step", ""});
  const uint32_t script = py.site({0x401000, trace::encode_python_frame(1, 0, true)});
  const uint32_t engine = py.site({0x402000});
  for (int i = 0; i < 3; ++i) py.copy(Direction::HtoD, MemKind::Pageable, 100, 1'000, false, script);
  for (uint32_t thread : {7, 7, 8})
    py.copy(Direction::DtoH, MemKind::Pinned, 1000, 1'000, false, engine).thread_id = thread;
  py.copy(Direction::DtoH, MemKind::Pinned, 1000, 1'000);  // no site: counted elsewhere
  for (int i = 0; i < 4; ++i)
    cpp.copy(Direction::HtoD, MemKind::Pinned, 10, 1'000, false, cpp.site(0x403000));
  const analyses::Report r = analyses::analyze(load({py, cpp}));
  std::vector<std::string> said;
  for (const auto& n : r.notes)
    if (n.find("have no Python line") != std::string::npos) said.push_back(n);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind(
                "3 of the 6 copies Python programs made have no Python line (2.93 KiB, on 2 threads): ", 0),
            0u)
      << said[0];

  EXPECT_FALSE(analyses::copies_without_python_note(analyses::tally_calls(load(cpp), {})));
}

// A finding's site outside every location (an allocation site, copies with
// no site) stays as it is; the achieved rate is the sums'; calls a second is
// the busiest process's.
TEST(FindingLocations, SumsByLocationAndKeepsTheRest) {
  analyses::LocationTotals l;
  l.id = 7;
  l.callsites = {7, 3};
  analyses::Finding f;
  auto site = [](uint32_t id, uint64_t bytes, uint64_t ns, double per_second) {
    analyses::FindingSite s;
    s.callsite = id;
    s.calls = 1;
    s.bytes = bytes;
    s.time_ns = ns;
    s.max_ns = ns;
    s.achieved_gbps = static_cast<double>(bytes) / ns;
    s.calls_per_second = per_second;
    return s;
  };
  f.sites = {site(3, 1000, 100, 50), site(9, 10, 1000, 1), site(7, 3000, 400, 20), site(0, 5, 5, 5)};
  const auto g = analyses::finding_locations(f, {l});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].callsite, 9u);  // largest time first
  EXPECT_EQ(g[0].processes, 1u);
  EXPECT_EQ(g[1].callsite, 7u);
  EXPECT_EQ(g[1].processes, 2u);
  EXPECT_EQ(g[1].bytes, 4000u);
  EXPECT_EQ(g[1].time_ns, 500u);
  EXPECT_EQ(g[1].max_ns, 400u);
  EXPECT_DOUBLE_EQ(*g[1].achieved_gbps, 8.0);
  EXPECT_DOUBLE_EQ(*g[1].calls_per_second, 50.0);
  EXPECT_EQ(g[2].callsite, 0u);
}

// The command the user ran heads the report, not a multiprocessing helper
// that happened to record first: on 3.14 a Pool's workers are the
// forkserver's children (not in the job) and share its argv.
TEST(CommandProcess, TheCommandNotAMultiprocessingHelper) {
  auto proc = [](uint32_t pid, uint32_t ppid, uint64_t start, std::vector<std::string> argv) {
    analyses::ProcessSummary p;
    p.pid = pid;
    p.ppid = ppid;
    p.start_realtime_ns = start;
    p.argv = std::move(argv);
    return p;
  };
  const std::vector<std::string> forkserver = {
      "python3.14", "-B", "-c", "import sys; from multiprocessing.forkserver import main; main(9, 10, ['__main__'])"};
  const std::vector<std::string> spawned = {
      "python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)",
      "--multiprocessing-fork"};
  EXPECT_TRUE(analyses::is_multiprocessing_helper(forkserver));
  EXPECT_TRUE(analyses::is_multiprocessing_helper(spawned));
  EXPECT_FALSE(analyses::is_multiprocessing_helper({"python3", "train.py", "-c", "cfg.yaml"}));
  EXPECT_FALSE(analyses::is_multiprocessing_helper({"python3", "-c", "import torch; print(torch.zeros(1))"}));
  EXPECT_FALSE(analyses::is_multiprocessing_helper({}));

  // Workers (parent: the forkserver, untraced) recorded before the script did.
  std::vector<analyses::ProcessSummary> ps = {proc(11, 10, 100, forkserver), proc(12, 10, 200, forkserver),
                                              proc(5, 1, 900, {"python3.14", "fs.py"})};
  ASSERT_NE(analyses::command_process(ps), nullptr);
  EXPECT_EQ(analyses::command_process(ps)->pid, 5u);
  // A root before its traced children, whatever their start; among roots
  // alike (ranks of an untraced launcher), the earliest.
  ps = {proc(21, 20, 100, {"app"}), proc(20, 1, 500, {"app"})};
  EXPECT_EQ(analyses::command_process(ps)->pid, 20u);
  ps = {proc(31, 1, 300, {"rank"}), proc(32, 1, 200, {"rank"})};
  EXPECT_EQ(analyses::command_process(ps)->pid, 32u);
  // Only helpers: the earliest of them.
  ps = {proc(41, 10, 300, spawned), proc(42, 10, 200, spawned)};
  EXPECT_EQ(analyses::command_process(ps)->pid, 42u);
  EXPECT_EQ(analyses::command_process({}), nullptr);
}

}  // namespace
}  // namespace cuxfer::testing
