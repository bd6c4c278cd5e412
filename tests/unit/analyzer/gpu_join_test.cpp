// The streamed join of GPU records (model::StreamedGpuJoin) against
// build_job's: the same GPU time on every call, whatever the order the
// records come in, or inexact() — never a different answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <utility>

#include "analyzer/model/gpu_join.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::testing {
namespace {

// A process's trace as the shim writes it with CUPTI on: copies of a few
// sizes, kinds and directions from several threads (some staged, with their
// chunks' records), each record written `delay` blocks after its copy's
// (negative: before it), some missing, some fitting nothing.
struct TraceInOrder {
  trace::Trace trace;  // whole: events and records
  // File order: (events block or records block, first, count).
  struct Block {
    bool records;
    size_t first, count;
  };
  std::vector<Block> blocks;
};

TraceInOrder make_trace(uint64_t seed, size_t events, int max_delay, bool early) {
  std::mt19937_64 rng(seed);
  TraceInOrder out;
  trace::Trace& t = out.trace;
  t.has_status = true;
  t.status.cupti = trace::CuptiState::Active;
  t.api_names = {"cudaMemcpy", "cudaMemcpyAsync"};
  const uint64_t sizes[] = {64, 4096, 1 << 20};
  constexpr size_t kBlock = 64;
  std::vector<std::vector<trace::GpuRecord>> records_of_block((events + kBlock - 1) / kBlock + 64);
  uint64_t now = 1'000'000;
  for (size_t i = 0; i < events; ++i) {
    trace::Event e{};
    now += rng() % 3000;                     // equal entry times now and then
    e.t_enter_ns = now + (rng() % 4) * 500;  // threads drained in turn: not quite in entry order
    e.t_exit_ns = e.t_enter_ns + 5000;
    e.bytes = sizes[rng() % 3];
    e.kind = static_cast<uint8_t>(rng() % 10 == 0 ? trace::EventKind::Memset : trace::EventKind::Copy);
    const bool h2d = rng() % 2;
    e.direction = static_cast<uint8_t>(h2d ? trace::Direction::HtoD : trace::Direction::DtoH);
    const auto host = static_cast<uint8_t>(rng() % 2 ? trace::MemKind::Pageable : trace::MemKind::Pinned);
    e.src_kind = h2d ? host : static_cast<uint8_t>(trace::MemKind::Device);
    e.dst_kind = h2d ? static_cast<uint8_t>(trace::MemKind::Device) : host;
    e.flags = trace::kFlagGpuExpected | (rng() % 2 ? trace::kFlagAsync : 0);
    if (e.kind == static_cast<uint8_t>(trace::EventKind::Copy) &&
        host == static_cast<uint8_t>(trace::MemKind::Pageable) && rng() % 8 == 0)
      e.flags |= trace::kFlagStaged;
    if (rng() % 50 == 0) e.flags |= trace::kFlagFailed;
    e.api = e.flags & trace::kFlagAsync ? 1 : 0;
    e.thread_id = 1 + static_cast<uint32_t>(rng() % 4);
    e.correlation_id = static_cast<uint32_t>(i + 1);
    t.events.push_back(e);
    if (rng() % 40 == 0) continue;  // no record
    const size_t block = i / kBlock;
    int delay = static_cast<int>(rng() % static_cast<uint64_t>(max_delay + 1));
    if (early && rng() % 20 == 0) delay = -1;
    // Records block `block` goes out just before events block `block`: -1, just before its copy's.
    const size_t at = static_cast<size_t>(static_cast<long>(block) + 1 + delay);
    trace::GpuRecord r{};
    r.kind = static_cast<uint8_t>(e.kind == static_cast<uint8_t>(trace::EventKind::Memset)
                                      ? trace::GpuRecordKind::Memset
                                      : trace::GpuRecordKind::Memcpy);
    r.cupti_copy_kind = h2d ? 1 : 2;
    r.src_kind = e.src_kind;
    r.dst_kind = e.dst_kind;
    if (e.flags & trace::kFlagStaged) {
      r.src_kind = r.dst_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
      const int chunks = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < chunks; ++c) {
        r.bytes = c + 1 < chunks ? e.bytes / 4 : e.bytes - e.bytes / 4 * (chunks - 1);
        r.start_ns = e.t_enter_ns + 100 + static_cast<uint64_t>(c) * 300;
        r.end_ns = r.start_ns + 250;
        if (rng() % 7 != 0) records_of_block[at].push_back(r);  // now and then a chunk goes missing
      }
      continue;
    }
    r.bytes = rng() % 60 == 0 ? 3 : e.bytes;  // now and then, one no call fits
    r.start_ns = e.t_enter_ns + 100 + rng() % 2000;
    r.end_ns = r.start_ns + 1000;
    records_of_block[at].push_back(r);
  }
  for (size_t k = 0; k < records_of_block.size(); ++k) {
    std::shuffle(records_of_block[k].begin(), records_of_block[k].end(), rng);
    if (!records_of_block[k].empty()) {
      out.blocks.push_back({true, t.gpu_records.size(), records_of_block[k].size()});
      t.gpu_records.insert(t.gpu_records.end(), records_of_block[k].begin(), records_of_block[k].end());
    }
    const size_t first = k * kBlock;
    if (first < events) out.blocks.push_back({false, first, std::min(kBlock, events - first)});
  }
  return out;
}

struct Streamed {
  std::vector<model::Call> calls;  // their events point into `trace`
  bool inexact = false;
  model::StreamedGpuJoin::Inexact why = model::StreamedGpuJoin::Inexact::No;
  uint64_t joined = 0;
};

Streamed stream(const TraceInOrder& in, const model::Process& process, model::StreamedGpuJoin::Window w) {
  Streamed out;
  model::StreamedGpuJoin join(process, w);
  std::vector<model::Call> calls, ready;
  auto keep = [&] {
    // Events of the join are let go later: keep each call pointing into the trace.
    for (model::Call c : ready) {
      const size_t index = out.calls.size();
      EXPECT_EQ(c.event->correlation_id, index + 1) << "out of trace order";
      c.event = &in.trace.events[index];
      out.calls.push_back(c);
    }
  };
  for (const auto& b : in.blocks) {
    if (b.records) {
      join.add_records({in.trace.gpu_records.data() + b.first, b.count});
    } else {
      calls.clear();
      for (size_t i = b.first; i < b.first + b.count; ++i) {
        model::Call& c = calls.emplace_back();
        c.event = &in.trace.events[i];
        c.cls = model::classify(in.trace.events[i]);
      }
      join.add_calls(calls);
    }
    join.take_ready(ready);
    keep();
  }
  join.finish(ready);
  keep();
  out.inexact = join.inexact();
  out.why = join.why_inexact();
  out.joined = join.joined();
  return out;
}

model::Job whole(const TraceInOrder& in) {
  auto symbolizer = symbolize::make_symbolizer(false);
  std::vector<trace::Trace> traces{in.trace};
  return model::build_job(std::move(traces), *symbolizer);
}

void expect_same(const model::Job& job, const Streamed& s) {
  ASSERT_EQ(job.calls.size(), s.calls.size());
  for (size_t i = 0; i < job.calls.size(); ++i) {
    const model::Call &a = job.calls[i], &b = s.calls[i];
    EXPECT_EQ(a.gpu_records, b.gpu_records) << "call " << i;
    EXPECT_EQ(a.gpu_ns, b.gpu_ns) << "call " << i;
    EXPECT_EQ(a.gpu_bytes, b.gpu_bytes) << "call " << i;
    EXPECT_EQ(a.gpu_begin_ns, b.gpu_begin_ns) << "call " << i;
    EXPECT_EQ(a.gpu_end_ns, b.gpu_end_ns) << "call " << i;
  }
  EXPECT_EQ(job.processes[0].gpu_records_joined_by_time, s.joined);
}

TEST(StreamedGpuJoin, SameAsWholeTraceJoinWithRecordsLateEarlyMissingAndShuffled) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const TraceInOrder in = make_trace(seed, 20000, 3, /*early=*/true);
    const model::Job job = whole(in);
    ASSERT_GT(job.processes[0].gpu_records_joined_by_time, 10000u);
    // The default window, which holds the whole trace; one of 1024 records
    // (late records are at most 4 blocks of 64 copies away), which joins
    // and hands calls out as it goes; and one that holds few calls.
    const model::StreamedGpuJoin::Window windows[] = {{}, {1024, size_t{1} << 18}, {1024, 2048}};
    for (const auto& w : windows) {
      const Streamed s = stream(in, job.processes[0], w);
      ASSERT_FALSE(s.inexact) << "seed " << seed << " lag " << w.record_lag << " held " << w.max_held_calls;
      expect_same(job, s);
    }
  }
}

TEST(StreamedGpuJoin, RecordsPastTheWindowMakeItInexactNeverWrong) {
  // Records up to 40 blocks (2560 copies) late, a window of 16 records:
  // either the same answer or inexact.
  const TraceInOrder in = make_trace(7, 20000, 40, true);
  const model::Job job = whole(in);
  const Streamed small = stream(in, job.processes[0], {16, size_t{1} << 18});
  EXPECT_TRUE(small.inexact);
  EXPECT_EQ(small.why, model::StreamedGpuJoin::Inexact::RecordLate);
  // Few calls held: the oldest is not settled in time.
  const Streamed held = stream(in, job.processes[0], {size_t{1} << 16, 300});
  EXPECT_TRUE(held.inexact);
  EXPECT_EQ(held.why, model::StreamedGpuJoin::Inexact::HeldCalls);
  // The default window holds them all.
  const Streamed wide = stream(in, job.processes[0], {});
  ASSERT_FALSE(wide.inexact);
  expect_same(job, wide);
}

// Hand-built traces for the checks that keep the streamed join exact: a copy
// of `bytes` entered at `t` (HtoD, pinned, CUPTI expected a record) and its
// DMA's record; events carry their trace order in correlation_id, as stream()
// expects.
struct HandBuilt {
  TraceInOrder in;
  HandBuilt() {
    in.trace.has_status = true;
    in.trace.status.cupti = trace::CuptiState::Active;
    in.trace.api_names = {"cudaMemcpy", "cudaMemcpyAsync"};
  }
  HandBuilt& events(std::initializer_list<std::pair<uint64_t, uint64_t>> enter_and_bytes) {
    return events(std::vector<std::pair<uint64_t, uint64_t>>(enter_and_bytes));
  }
  // Bytes 0: a device allocation, which awaits no record.
  HandBuilt& events(const std::vector<std::pair<uint64_t, uint64_t>>& enter_and_bytes) {
    in.blocks.push_back({false, in.trace.events.size(), enter_and_bytes.size()});
    for (auto [t, bytes] : enter_and_bytes) {
      trace::Event e{};
      e.t_enter_ns = t;
      e.t_exit_ns = t + 5000;
      e.bytes = bytes;
      e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
      e.direction = static_cast<uint8_t>(trace::Direction::HtoD);
      e.src_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
      e.dst_kind = static_cast<uint8_t>(trace::MemKind::Device);
      e.flags = trace::kFlagGpuExpected | trace::kFlagAsync;
      e.api = 1;
      e.thread_id = 1;
      e.correlation_id = static_cast<uint32_t>(in.trace.events.size() + 1);
      if (bytes == 0) {
        e.kind = static_cast<uint8_t>(trace::EventKind::DeviceAlloc);
        e.bytes = 1 << 20;
        e.flags = 0;
      }
      in.trace.events.push_back(e);
    }
    return *this;
  }
  // (start, end, bytes)
  HandBuilt& records(std::initializer_list<std::tuple<uint64_t, uint64_t, uint64_t>> records) {
    return this->records(std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>(records));
  }
  HandBuilt& records(const std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>& records) {
    in.blocks.push_back({true, in.trace.gpu_records.size(), records.size()});
    for (auto [start, end, bytes] : records) {
      trace::GpuRecord r{};
      r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
      r.cupti_copy_kind = 1;
      r.src_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
      r.dst_kind = static_cast<uint8_t>(trace::MemKind::Device);
      r.start_ns = start;
      r.end_ns = end;
      r.bytes = bytes;
      in.trace.gpu_records.push_back(r);
    }
    return *this;
  }
};

TEST(StreamedGpuJoin, CallEnteredBeforeJoinedRecordMakesItInexact) {
  // With a lag of one record, the record at 2000 joins the copy at 1000 when
  // the one at 3000 comes; a later block brings a copy entered at 500, which
  // the whole-trace join gives the record at 2000 (the earliest that fits).
  HandBuilt b;
  b.events({{1000, 64}}).records({{2000, 2100, 64}}).records({{3000, 3100, 64}}).events({{500, 64}});
  const model::Job job = whole(b.in);
  ASSERT_EQ(job.calls[1].gpu_begin_ns, 2000u);  // the copy at 500: trace order is file order here
  const Streamed early = stream(b.in, job.processes[0], {1, size_t{1} << 18});
  EXPECT_TRUE(early.inexact);
  EXPECT_EQ(early.why, model::StreamedGpuJoin::Inexact::CallLate);
  // With the default lag nothing is joined before the end: the same answer.
  const Streamed s = stream(b.in, job.processes[0], {});
  ASSERT_FALSE(s.inexact);
  expect_same(job, s);
}

TEST(StreamedGpuJoin, CallEnteredAtTheWatermarkMakesItInexact) {
  // The record at 2000 fits no copy entered by then and is joined (to none)
  // when the one at 3000 comes; a copy entered at 2000 exactly was in its
  // reach (a DMA may start the instant its call enters).
  HandBuilt b;
  b.events({{1000, 64}}).records({{2000, 2100, 128}}).records({{3000, 3100, 64}}).events({{2000, 128}});
  const model::Job job = whole(b.in);
  ASSERT_EQ(job.calls[1].gpu_begin_ns, 2000u);
  EXPECT_TRUE(stream(b.in, job.processes[0], {1, size_t{1} << 18}).inexact);
  const Streamed s = stream(b.in, job.processes[0], {});
  ASSERT_FALSE(s.inexact);
  expect_same(job, s);
}

TEST(StreamedGpuJoin, TiesOfEntryAndStartKeepTraceAndFileOrder) {
  // Two copies of one size entered at the same instant, in two blocks (the
  // second block also brings an earlier copy, so the first's is merged
  // again), and two records that start at the same instant but end apart:
  // build_job gives the first record (file order) to the first copy (trace
  // order), whatever the window.
  HandBuilt b;
  b.events({{1000, 64}})
      .events({{500, 4096}, {1000, 64}})
      .records({{600, 700, 4096}, {2000, 2500, 64}})
      .records({{2000, 2900, 64}});
  const model::Job job = whole(b.in);
  ASSERT_EQ(job.calls[0].gpu_end_ns, 2500u);
  ASSERT_EQ(job.calls[2].gpu_end_ns, 2900u);
  const model::StreamedGpuJoin::Window windows[] = {{}, {1, size_t{1} << 18}};
  for (const auto& w : windows) {
    const Streamed s = stream(b.in, job.processes[0], w);
    ASSERT_FALSE(s.inexact) << "lag " << w.record_lag << " held " << w.max_held_calls;
    expect_same(job, s);
  }
}

TEST(StreamedGpuJoin, CallsBesideTheCopiesAreHandedOutOnceTheCopiesAreJoined) {
  // Nine allocations to a copy, each copy's record in the block after its
  // own: a copy that has its GPU time holds no call behind it, so a window
  // of 2048 calls (fewer than 256 copies and their allocations) streams.
  HandBuilt b;
  uint64_t t = 1'000'000;
  for (int block = 0; block < 100; ++block) {
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> records;
    for (int i = 0; i < 60; ++i, t += 1000) {
      calls.push_back({t, i % 10 == 0 ? 4096 : 0});
      if (i % 10 == 0) records.push_back({t + 100, t + 600, 4096});
    }
    b.events(calls).records(records);
  }
  const model::Job job = whole(b.in);
  ASSERT_EQ(job.processes[0].gpu_records_joined_by_time, 600u);
  const Streamed s = stream(b.in, job.processes[0], {1024, 2048});
  ASSERT_FALSE(s.inexact);
  expect_same(job, s);
}

TEST(StreamedGpuJoin, GovernorThatTurnedRecordsOffIsNotStreamed) {
  TraceInOrder in = make_trace(8, 1000, 1, false);
  in.trace.cupti_gate.push_back({});
  in.trace.cupti_gate.back().on = false;
  in.trace.cupti_gate.back().t_ns = 2'000'000;
  const model::Job job = whole(in);
  EXPECT_EQ(stream(in, job.processes[0], {}).why, model::StreamedGpuJoin::Inexact::Governor);
}

TEST(StreamedGpuJoin, RecordWithCorrelationIdIsNotStreamed) {
  TraceInOrder in = make_trace(9, 1000, 1, false);
  in.trace.gpu_records[0].correlation_id = 5;
  const model::Job job = whole(in);
  EXPECT_TRUE(stream(in, job.processes[0], {}).inexact);
}

}  // namespace
}  // namespace cuxfer::testing
