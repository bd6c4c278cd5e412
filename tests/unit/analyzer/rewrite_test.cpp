// The pinned rewrite in the report: staged copies counted per class and in
// the "rewrite" totals, the shim's staging pool kept out of the app's
// allocations, APIs and call sites, and the text section only when the
// rewrite was on.
#include <gtest/gtest.h>

#include <map>

#include "analyzer/render/html_renderer.h"
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

// A copy the rewrite left as made, for the reason the shim recorded.
trace::Event& passed(trace::Event& e, trace::PassthroughReason why) {
  e.passthrough = static_cast<uint8_t>(why);
  return e;
}

// The shim's note at start (record/recorder.cpp), which names the thresholds.
constexpr const char* kEnabledNote =
    "rewrite: pin: enabled; 1D copies of pageable memory are staged from 8388608 bytes (H2D) and 262144 bytes "
    "(D2H); reused buffers from 1048576 bytes are registered in place; at most 268435456 bytes of pinned memory";

// A run with the rewrite on, as the shim writes it: its note, the staging
// pool (a pseudo-API after the hook names), staged pageable copies, pageable
// copies it left as made (with their reasons), and the app's own pinned traffic.
SyntheticTrace rewritten_trace() {
  SyntheticTrace t;
  t.notes.push_back(kEnabledNote);
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
  passed(t.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 9'000, false, site),
         trace::PassthroughReason::BelowThreshold);
  passed(t.add(EventKind::Copy, "cudaMemcpy2D", Direction::DtoH, MemKind::Device, MemKind::Pageable, 640 * KiB,
               70'000),
         trace::PassthroughReason::NotOneDimensional);
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

// Staged copies: 1 MiB H2D x 3 (90 us each, the third async), 4 MiB D2H x 2
// (300 us each). From pinned memory (nominal 50 GB/s, async returns in 3 us):
// 10 MiB synchronous = 209,715 ns, plus 3,000 ns: 212,715 ns of 870 us.
TEST_F(Rewrite, SaysWhatPinningAtTheSourceWouldBringBeyondStaging) {
  const analyses::Report r = analyses::analyze(load(rewritten_trace()));
  EXPECT_EQ(r.rewrite.staged_cpu_ns, 870'000u);
  EXPECT_EQ(r.rewrite.staged_async_calls, 1u);
  EXPECT_EQ(r.rewrite.staged_sync_bytes[0], 2 * MiB);
  EXPECT_EQ(r.rewrite.staged_sync_bytes[1], 8 * MiB);
  EXPECT_EQ(r.rewrite.staged_if_pinned_ns, 212'715u);
  EXPECT_EQ(r.rewrite.pinned_basis, "nominal 50 GB/s");
  const std::string text = render::render_text(r, {100, 10});
  EXPECT_NE(text.find("pinned at the source"), std::string::npos) << text;
  EXPECT_NE(text.find("would take about 213 us instead of 870 us"), std::string::npos) << text;
  json j = json::parse(render::render_json(r, {}));
  EXPECT_EQ(j["rewrite"]["staged_cpu_ns"], 870'000);
  EXPECT_EQ(j["rewrite"]["staged_if_pinned_at_source_ns"], 212'715);
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
  // The reasons the shim recorded, most bytes first; no list of possibilities.
  const size_t two_d = text.find("    2D/3D/array/batch copy (the rewrite takes 1D copies): 1 copy, 640 KiB\n");
  const size_t small = text.find("    below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB): 1 copy, 64.0 KiB\n");
  EXPECT_NE(two_d, std::string::npos) << text;
  EXPECT_NE(small, std::string::npos) << text;
  EXPECT_LT(two_d, small) << text;
  EXPECT_EQ(text.find("not eligible"), std::string::npos) << text;
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

TEST_F(Rewrite, PassthroughReasonsAreCountedPerReasonMostBytesFirst) {
  SyntheticTrace t;
  t.notes.push_back(kEnabledNote);
  using Why = trace::PassthroughReason;
  for (int i = 0; i < 830; ++i)
    passed(t.copy(Direction::HtoD, MemKind::Pageable, 15 * KiB, 2'000), Why::BelowThreshold);
  for (int i = 0; i < 4; ++i)
    passed(t.copy(Direction::DtoH, MemKind::Pageable, 100 * KiB, 9'000), Why::BelowThreshold);
  for (int i = 0; i < 3; ++i)
    passed(t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 900'000, true), Why::NoFreeBuffer);
  passed(t.copy(Direction::DtoH, MemKind::Pageable, 2 * MiB, 9'000, true), Why::StreamCapturing);
  passed(t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 9'000, true), Why::GlobalCapture);
  passed(t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 9'000, true), Why::GlobalCapture);
  staged(t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 900'000));
  // Not pageable: whatever it says, not a passthrough pageable copy.
  passed(t.copy(Direction::HtoD, MemKind::Pinned, MiB, 9'000), Why::NotPageable);
  // A failed copy moves nothing.
  passed(t.copy(Direction::HtoD, MemKind::Pageable, MiB, 9'000), Why::NoFreeBuffer).flags |= trace::kFlagFailed;
  model::Job job = load(t);
  analyses::Report r = analyses::analyze(job);
  const auto& p = r.rewrite.passthrough_reasons;
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].reason, "no_free_buffer");
  EXPECT_EQ(p[0].calls, 3u);
  EXPECT_EQ(p[0].bytes, 48 * MiB);
  EXPECT_EQ(p[0].text, "no staging buffer free at the time");
  EXPECT_EQ(p[1].reason, "below_threshold");
  EXPECT_EQ(p[1].direction, "H2D");
  EXPECT_EQ(p[1].threshold_bytes, 8 * MiB);
  EXPECT_EQ(p[1].calls, 830u);
  EXPECT_EQ(p[1].bytes, 830 * 15 * KiB);
  EXPECT_EQ(p[1].text, "below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB)");
  EXPECT_EQ(p[2].reason, "global_capture");
  EXPECT_EQ(p[2].calls, 2u);
  EXPECT_EQ(p[2].text, "beside a graph capture (global mode)");
  EXPECT_EQ(p[3].reason, "stream_capturing");
  EXPECT_EQ(p[3].bytes, 2 * MiB);
  EXPECT_EQ(p[4].reason, "below_threshold");
  EXPECT_EQ(p[4].direction, "D2H");
  EXPECT_EQ(p[4].threshold_bytes, 256 * KiB);
  EXPECT_EQ(p[4].text, "below the staging threshold (CUXFER_STAGE_MIN_D2H 256 KiB)");
  EXPECT_EQ(p[4].calls, 4u);
  // They add up to the passthrough totals.
  uint64_t calls = 0, bytes = 0;
  for (const auto& x : p) {
    calls += x.calls;
    bytes += x.bytes;
  }
  EXPECT_EQ(calls, r.rewrite.passthrough_pageable_calls);
  EXPECT_EQ(bytes, r.rewrite.passthrough_pageable_bytes);

  json j = json::parse(render::render_json(r, {}));
  const json& jr = j["rewrite"]["passthrough_reasons"];
  ASSERT_EQ(jr.size(), 5u);
  EXPECT_EQ(jr[0]["reason"], "no_free_buffer");
  EXPECT_TRUE(jr[0]["direction"].is_null());
  EXPECT_TRUE(jr[0]["threshold_bytes"].is_null());
  EXPECT_EQ(jr[0]["calls"], 3);
  EXPECT_EQ(jr[0]["bytes"], 48 * MiB);
  EXPECT_EQ(jr[1]["reason"], "below_threshold");
  EXPECT_EQ(jr[1]["direction"], "H2D");
  EXPECT_EQ(jr[1]["threshold_bytes"], 8 * MiB);
  EXPECT_EQ(jr[1]["text"], "below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB)");

  std::string text = render::render_text(r, {100, 10});
  EXPECT_NE(text.find("    below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB): 830 copies, 12.2 MiB\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    stream being captured: 1 copy, 2.00 MiB\n"), std::string::npos) << text;

  std::string html = render::render_html(r, job, nullptr);
  EXPECT_NE(html.find("<h2>Rewrite (pin)</h2>"), std::string::npos);
  EXPECT_NE(html.find("<td title='below_threshold'>below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB)</td>"
                      "<td class='n'>830</td>"),
            std::string::npos)
      << html;
  EXPECT_LT(html.find("no staging buffer free at the time"), html.find("beside a graph capture"));
}

// Traces before format version 2 recorded no reason: their copies are
// counted under "reason not recorded", never under a guessed one.
TEST_F(Rewrite, OlderTracesSayTheReasonWasNotRecorded) {
  SyntheticTrace t;
  t.format_version = 1;
  t.notes.push_back("rewrite: pin");
  t.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 5'000);
  t.copy(Direction::DtoH, MemKind::Pageable, 64 * KiB, 5'000);
  staged(t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 900'000));
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(r.rewrite.passthrough_reasons.size(), 1u);
  const auto& p = r.rewrite.passthrough_reasons[0];
  EXPECT_EQ(p.reason, "not_recorded");
  EXPECT_EQ(p.calls, 2u);
  EXPECT_EQ(p.bytes, 128 * KiB);
  EXPECT_EQ(p.text, "reason not recorded (traces before format version 2)");
  EXPECT_EQ(r.rewrite.staged_calls, 1u);
  std::string text = render::render_text(r, {100, 10});
  EXPECT_NE(text.find("reason not recorded (traces before format version 2): 2 copies, 128 KiB"), std::string::npos)
      << text;
}

// What the event cannot hold comes from the notes: why the rewrite turned
// itself off, how many contexts had a pool. A value this build does not know
// is said as such.
TEST_F(Rewrite, ReasonDetailsComeFromTheNotes) {
  using Why = trace::PassthroughReason;
  SyntheticTrace t;
  t.notes.push_back(kEnabledNote);
  t.notes.push_back("rewrite: pin disabled: pinning a staging buffer of 8388608 bytes failed (2); copies pass through");
  t.notes.push_back("rewrite: pin: more than 16 contexts at once; copies in the others pass through");
  passed(t.copy(Direction::HtoD, MemKind::Pageable, 32 * MiB, 9'000), Why::RewriteDisabled);
  passed(t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 9'000), Why::NoPool);
  t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 9'000).passthrough = 200;  // from a newer shim
  analyses::Report r = analyses::analyze(load(t));
  const auto& p = r.rewrite.passthrough_reasons;
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].text, "rewrite disabled (pinning a staging buffer of 8388608 bytes failed (2))");
  EXPECT_EQ(p[1].text, "staging declined in its context (no pool: more than 16 contexts at once)");
  EXPECT_EQ(p[2].reason, "unknown");
  EXPECT_EQ(p[2].text, "a reason this cuxfer does not know (written by a newer one)");
  // Without the notes, the line still says what is known.
  SyntheticTrace bare;
  bare.notes.push_back("rewrite: pin");
  passed(bare.copy(Direction::HtoD, MemKind::Pageable, 32 * MiB, 9'000), Why::RewriteDisabled);
  passed(bare.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 9'000), Why::BelowThreshold);
  analyses::Report b = analyses::analyze(load(bare));
  ASSERT_EQ(b.rewrite.passthrough_reasons.size(), 2u);
  EXPECT_EQ(b.rewrite.passthrough_reasons[0].text, "rewrite disabled (see the notes)");
  EXPECT_EQ(b.rewrite.passthrough_reasons[1].text, "below the staging threshold (CUXFER_STAGE_MIN_H2D)");
  EXPECT_FALSE(b.rewrite.passthrough_reasons[1].threshold_bytes);
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
