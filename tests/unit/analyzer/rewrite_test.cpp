// The pinned rewrite in the report: staged copies counted per class and in
// the "rewrite" totals, the shim's staging pool kept out of the app's
// allocations, APIs and call sites, and the text section only when the
// rewrite was on.
#include <gtest/gtest.h>

#include <map>

#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "analyzer/text/units.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using nlohmann::json;
using testing::find_class;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::EventKind;
using trace::MemKind;

constexpr uint64_t KiB = 1 << 10;
constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kPool = 256 * MiB;
constexpr uint64_t kPinningNs = 41'000'000;

class Rewrite : public JobTest {};

trace::Event& staged(trace::Event& e) {
  e.flags |= trace::kFlagStaged;
  return e;
}

// A run with the rewrite on, as the shim writes it: its note, the staging
// pool (a pseudo-API after the hook names), staged pageable copies, pageable
// copies that were not eligible, and the app's own pinned traffic.
SyntheticTrace rewritten_trace() {
  SyntheticTrace t;
  t.notes.push_back(
      "rewrite: pin: enabled; 1D host<->device copies of pageable memory from 262144 bytes are staged "
      "through at most 268435456 bytes of pinned memory");
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  const uint32_t site = t.site(0x401000);
  // The app's own pinned allocation and copies.
  t.add(EventKind::HostAlloc, "cudaMallocHost", Direction::Unknown, MemKind::Unknown, MemKind::Pinned, 2 * MiB,
        300'000);
  t.copy(Direction::HtoD, MemKind::Pinned, 2 * MiB, 40'000);
  // Staged: 3 x 1 MiB H2D (one async), 2 x 4 MiB D2H.
  staged(t.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000, false, site));
  staged(t.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000, false, site));
  staged(t.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000, true, site));
  staged(t.copy(Direction::DtoH, MemKind::Pageable, 4 * MiB, 300'000, false, site));
  staged(t.copy(Direction::DtoH, MemKind::Pageable, 4 * MiB, 300'000, false, site));
  // Passed through: below the staging minimum, and a 2D copy.
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 9'000, false, site);
  t.add(EventKind::Copy, "cudaMemcpy2D", Direction::DtoH, MemKind::Device, MemKind::Pageable, 640 * KiB,
        70'000);
  // A failed staged copy moves nothing.
  auto& failed = staged(t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 1'000));
  failed.flags |= trace::kFlagFailed;
  failed.result = 1;
  // The shim's staging pool, allocated at the first staged copy, with a call site of the shim.
  t.add(EventKind::HostAlloc, "cuxfer:staging_pool", Direction::Unknown, MemKind::Unknown, MemKind::Pinned,
        kPool, kPinningNs, 0, t.site(0x402000));
  return t;
}

TEST_F(Rewrite, StagedCopiesAreCountedExactly) {
  analyses::Report r = analyses::analyze(load(rewritten_trace()));
  // The app moved what it moved: staging changes no class and no total.
  EXPECT_EQ(r.totals.calls, 8u);
  EXPECT_EQ(r.totals.bytes, 2 * MiB + 3 * MiB + 8 * MiB + 64 * KiB + 640 * KiB);
  const auto* h2d = find_class(r, Direction::HtoD, MemKind::Pageable);
  ASSERT_TRUE(h2d);
  EXPECT_EQ(h2d->calls, 4u);
  EXPECT_EQ(h2d->bytes, 3 * MiB + 64 * KiB);
  EXPECT_EQ(h2d->staged_calls, 3u);
  EXPECT_EQ(h2d->staged_bytes, 3 * MiB);
  EXPECT_EQ(h2d->failed_calls, 1u);
  const auto* d2h = find_class(r, Direction::DtoH, MemKind::Pageable);
  ASSERT_TRUE(d2h);
  EXPECT_EQ(d2h->calls, 3u);
  EXPECT_EQ(d2h->staged_calls, 2u);
  EXPECT_EQ(d2h->staged_bytes, 8 * MiB);
  const auto* pinned = find_class(r, Direction::HtoD, MemKind::Pinned);
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned->staged_calls, 0u);
  EXPECT_EQ(pinned->staged_bytes, 0u);

  const auto& rw = r.rewrite;
  EXPECT_TRUE(rw.active);
  EXPECT_EQ(rw.staged_calls, 5u);
  EXPECT_EQ(rw.staged_bytes, 11 * MiB);
  EXPECT_EQ(rw.passthrough_pageable_calls, 2u);
  EXPECT_EQ(rw.passthrough_pageable_bytes, 64 * KiB + 640 * KiB);
  EXPECT_EQ(rw.registered_calls, 0u);
  EXPECT_EQ(rw.pool_allocations, 1u);
  EXPECT_EQ(rw.pool_bytes, kPool);
  EXPECT_EQ(rw.pinning_cost_ns, kPinningNs);
  // Staged + passed through = every pageable host<->device byte.
  EXPECT_EQ(rw.staged_bytes + rw.passthrough_pageable_bytes, r.pageable_share.pageable_bytes);
}

TEST_F(Rewrite, StagingPoolIsNotAnAppAllocation) {
  analyses::Report r = analyses::analyze(load(rewritten_trace()));
  EXPECT_EQ(r.allocations.host_pinned.calls, 1u);  // cudaMallocHost only
  EXPECT_EQ(r.allocations.host_pinned.bytes, 2 * MiB);
  EXPECT_EQ(r.allocations.host_pinned.cpu_blocked_ns, 300'000u);
  for (const auto& a : r.apis) EXPECT_NE(a.name.rfind("cuxfer:", 0), 0u) << a.name;
  for (const auto& s : r.callsites) EXPECT_NE(s.frame.address, 0x402000u);
  EXPECT_EQ(r.callsites.size(), 1u);
  // Nor a copy, nor a finding's call: only the pinned totals above.
  EXPECT_EQ(r.totals.calls, 8u);
}

TEST_F(Rewrite, PoolAloneMakesNoCopiesAndIsStillReported) {
  // A process that pinned the pool but made no eligible copy.
  SyntheticTrace t;
  t.notes.push_back("rewrite: pin");
  t.copy(Direction::HtoD, MemKind::Pageable, 4 * KiB, 2'000);
  t.add(EventKind::HostAlloc, "cuxfer:staging_pool", Direction::Unknown, MemKind::Unknown, MemKind::Pinned,
        kPool, kPinningNs);
  t.add(EventKind::HostFree, "cuxfer:staging_pool", Direction::Unknown, MemKind::Unknown, MemKind::Pinned, 0,
        1'000);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_EQ(r.allocations.host_pinned.calls, 0u);
  EXPECT_EQ(r.allocations.host_pinned.frees, 0u);
  EXPECT_TRUE(r.rewrite.active);
  EXPECT_EQ(r.rewrite.staged_calls, 0u);
  EXPECT_EQ(r.rewrite.passthrough_pageable_calls, 1u);
  EXPECT_EQ(r.rewrite.pool_bytes, kPool);
  EXPECT_EQ(r.apis.size(), 1u);
}

TEST_F(Rewrite, PoolsOfSeveralProcessesAddUp) {
  SyntheticTrace a(100, 1), b(101, 100);
  for (SyntheticTrace* t : {&a, &b}) {
    t->notes.push_back("rewrite: pin");
    staged(t->copy(Direction::HtoD, MemKind::Pageable, MiB, 50'000));
    t->add(EventKind::HostAlloc, "cuxfer:staging_pool", Direction::Unknown, MemKind::Unknown, MemKind::Pinned,
           64 * MiB, 1'000'000);
  }
  analyses::Report r = analyses::analyze(load({a, b}));
  EXPECT_EQ(r.rewrite.staged_calls, 2u);
  EXPECT_EQ(r.rewrite.staged_bytes, 2 * MiB);
  EXPECT_EQ(r.rewrite.pool_allocations, 2u);
  EXPECT_EQ(r.rewrite.pool_bytes, 128 * MiB);
  EXPECT_EQ(r.rewrite.pinning_cost_ns, 2'000'000u);
}

TEST_F(Rewrite, PassThroughCountsOnlyProcessesWithTheRewriteOn) {
  SyntheticTrace on(200, 1), off(201, 200);
  on.notes.push_back("rewrite: pin");
  on.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 5'000);
  off.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 90'000);
  analyses::Report r = analyses::analyze(load({on, off}));
  EXPECT_TRUE(r.rewrite.active);
  EXPECT_EQ(r.rewrite.passthrough_pageable_calls, 1u);
  EXPECT_EQ(r.rewrite.passthrough_pageable_bytes, 64 * KiB);
}

TEST_F(Rewrite, JsonHasRewriteTotalsAndPerClassStaging) {
  json j = json::parse(render::render_json(analyses::analyze(load(rewritten_trace())), {}));
  const json& rw = j["rewrite"];
  EXPECT_EQ(rw["active"], true);
  EXPECT_EQ(rw["staged_calls"], 5);
  EXPECT_EQ(rw["staged_bytes"], 11 * MiB);
  EXPECT_EQ(rw["passthrough_pageable_calls"], 2);
  EXPECT_EQ(rw["passthrough_pageable_bytes"], 704 * KiB);
  EXPECT_EQ(rw["pool_bytes"], kPool);
  EXPECT_EQ(rw["pinning_cost_ns"], kPinningNs);
  EXPECT_EQ(rw["registered_calls"], 0);
  uint64_t staged = 0;
  for (const auto& c : j["classes"]) {
    ASSERT_TRUE(c.contains("staged_calls") && c.contains("staged_bytes"));
    staged += c["staged_bytes"].get<uint64_t>();
  }
  EXPECT_EQ(staged, 11 * MiB);
  EXPECT_EQ(j["allocations"]["host_pinned"]["bytes"], 2 * MiB);
  for (const auto& a : j["apis"]) EXPECT_NE(a["name"], "cuxfer:staging_pool");
}

TEST_F(Rewrite, JsonWithoutRewriteIsAllZero) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000);
  json j = json::parse(render::render_json(analyses::analyze(load(t)), {}));
  EXPECT_EQ(j["rewrite"]["active"], false);
  EXPECT_EQ(j["rewrite"]["staged_calls"], 0);
  EXPECT_EQ(j["rewrite"]["staged_bytes"], 0);
  EXPECT_EQ(j["rewrite"]["passthrough_pageable_calls"], 0);  // nothing "passes through" an absent rewrite
  EXPECT_EQ(j["rewrite"]["passthrough_pageable_bytes"], 0);
  EXPECT_EQ(j["rewrite"]["pool_bytes"], 0);
  EXPECT_EQ(j["classes"][0]["staged_calls"], 0);
}

TEST_F(Rewrite, TextSectionOnlyWhenOn) {
  std::string text = render::render_text(analyses::analyze(load(rewritten_trace())), {100, 10});
  EXPECT_NE(text.find("\nRewrite (pin)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("staged through pinned buffers: 5 copies, 11.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("passed through as pageable: 2 copies, 704 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("not eligible"), std::string::npos);
  EXPECT_NE(text.find("staging pool: 256 MiB pinned, pinning cost 41.0 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("saves time, not bytes"), std::string::npos);
  EXPECT_NE(text.find("staged"), std::string::npos);
  EXPECT_EQ(text.find("cuxfer:staging_pool"), std::string::npos);  // not listed as an API
  // Allocations show only the app's pinned allocation.
  EXPECT_NE(text.find("pinned host 1 call, 2.00 MiB"), std::string::npos) << text;

  SyntheticTrace plain;
  plain.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000);
  std::string off = render::render_text(analyses::analyze(load(plain)), {100, 10});
  EXPECT_EQ(off.find("Rewrite (pin)"), std::string::npos) << off;
  EXPECT_EQ(off.find("staged"), std::string::npos) << off;  // no column either

  SyntheticTrace note_off;  // the shim's note when the rewrite is off
  note_off.notes.push_back("rewrite: off");
  note_off.copy(Direction::HtoD, MemKind::Pageable, MiB, 90'000);
  off = render::render_text(analyses::analyze(load(note_off)), {100, 10});
  EXPECT_EQ(off.find("Rewrite (pin)"), std::string::npos) << off;
}

TEST_F(Rewrite, TextFitsTheWidth) {
  analyses::Report r = analyses::analyze(load(rewritten_trace()));
  for (size_t width : {60, 80, 100}) {
    std::string text = render::render_text(r, {width, 10});
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      std::string line = text.substr(start, nl - start);
      EXPECT_LE(text::display_width(line), width) << "width " << width << ": " << line;
      start = nl + 1;
    }
  }
}

TEST_F(Rewrite, StagedCopyJoinsAPinnedGpuRecord) {
  // Under CUPTI, a staged copy's DMA reads the pinned staging buffer: the
  // record says page-locked although the app's buffer is pageable.
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  t.notes.push_back("rewrite: pin");
  auto& e = staged(t.copy(Direction::HtoD, MemKind::Pageable, 4 * MiB, 200'000));
  trace::GpuRecord g{};
  g.start_ns = e.t_enter_ns + 50'000;
  g.end_ns = g.start_ns + 80'000;
  g.bytes = 4 * MiB;
  g.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
  g.cupti_copy_kind = 1;  // HtoD
  g.src_kind = static_cast<uint8_t>(MemKind::Pinned);
  g.dst_kind = static_cast<uint8_t>(MemKind::Device);
  t.gpu_records.push_back(g);
  analyses::Report r = analyses::analyze(load(t));
  const auto* h2d = find_class(r, Direction::HtoD, MemKind::Pageable);
  ASSERT_TRUE(h2d);
  EXPECT_EQ(h2d->gpu_calls, 1u);
  EXPECT_EQ(h2d->gpu_ns.value_or(0), 80'000u);
}

// The shim stages a copy in chunks: each chunk is a DMA record of its own.
// They join the call only when they add up to it; its GPU time is the span
// from the first chunk's start to the last chunk's end.
TEST_F(Rewrite, StagedCopyJoinsItsChunkRecords) {
  SyntheticTrace t;
  t.status.cupti = trace::CuptiState::Active;
  t.notes.push_back("rewrite: pin");
  auto& whole = staged(t.copy(Direction::HtoD, MemKind::Pageable, 20 * MiB, 900'000));
  auto chunk = [&](uint64_t start, uint64_t ns, uint64_t bytes) {
    trace::GpuRecord g{};
    g.start_ns = start;
    g.end_ns = start + ns;
    g.bytes = bytes;
    g.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    g.cupti_copy_kind = 1;  // HtoD
    g.src_kind = static_cast<uint8_t>(MemKind::Pinned);
    g.dst_kind = static_cast<uint8_t>(MemKind::Device);
    t.gpu_records.push_back(g);
  };
  const uint64_t t0 = whole.t_enter_ns;
  chunk(t0 + 100'000, 150'000, 8 * MiB);
  chunk(t0 + 400'000, 150'000, 8 * MiB);
  chunk(t0 + 700'000, 80'000, 4 * MiB);
  // A second staged copy whose last chunk never arrived (e.g. CUPTI dropped it).
  auto& partial = staged(t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 500'000));
  chunk(partial.t_enter_ns + 100'000, 150'000, 8 * MiB);
  model::Job job = load(t);
  ASSERT_EQ(job.calls.size(), 2u);
  EXPECT_EQ(job.calls[0].gpu_records, 3u);
  EXPECT_EQ(job.calls[0].gpu_bytes, 20 * MiB);
  EXPECT_EQ(job.calls[0].gpu_ns, 680'000u);  // 100 us .. 780 us after the call entered
  EXPECT_FALSE(job.calls[1].has_gpu_time());
  EXPECT_EQ(job.processes[0].gpu_records_joined_by_time, 3u);
}

}  // namespace
}  // namespace cuxfer
