// The streamed join of GPU records (model::StreamedGpuJoin) against
// build_job's: the same GPU time on every call, whatever the order the
// records come in, or inexact() — never a different answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
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

// With a governor: per copy, whether the records were on when it ran
// (else it gets none) and whether its hook flagged it for one.
struct Governed {
  std::vector<bool> on, flagged;
};

TraceInOrder make_trace(uint64_t seed, size_t events, int max_delay, bool early,
                        const Governed* governed = nullptr) {
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
    if (governed && !governed->flagged[i]) e.flags &= static_cast<uint8_t>(~trace::kFlagGpuExpected);
    t.events.push_back(e);
    if (governed && !governed->on[i]) continue;  // made while the records were off
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
    if (governed && rng() % 30 == 0) {
      // A copy the hooks never saw, of the size and kind of one made lately
      // (off, perhaps): a leftover the second pass may give to it.
      const trace::Event& like = t.events[i - rng() % std::min<size_t>(i + 1, 400)];
      trace::GpuRecord u = r;
      u.bytes = like.bytes;
      u.kind = static_cast<uint8_t>(like.kind == static_cast<uint8_t>(trace::EventKind::Memset)
                                        ? trace::GpuRecordKind::Memset
                                        : trace::GpuRecordKind::Memcpy);
      u.cupti_copy_kind = like.direction == static_cast<uint8_t>(trace::Direction::HtoD) ? 1 : 2;
      u.src_kind = like.src_kind;
      u.dst_kind = like.dst_kind;
      u.start_ns += 300;
      u.end_ns = u.start_ns + 777;
      records_of_block[at].push_back(u);
    }
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
  // Per record (file order), the class of the call the join settled it to
  // (none: no call), and how many times it was settled.
  std::vector<std::optional<model::TransferClass>> record_class;
  std::vector<int> settled;
  bool inexact = false;
  model::StreamedGpuJoin::Inexact why = model::StreamedGpuJoin::Inexact::No;
  uint64_t joined = 0;
};

// `settle_records`: the join settles each record (keep_settled_records), as for the HTML timeline.
Streamed stream(const TraceInOrder& in, const model::Process& process, model::StreamedGpuJoin::Window w,
                bool settle_records = true) {
  Streamed out;
  model::StreamedGpuJoin join(process, w);
  if (settle_records) join.keep_settled_records();
  out.record_class.resize(in.trace.gpu_records.size());
  out.settled.resize(in.trace.gpu_records.size());
  std::vector<model::StreamedGpuJoin::SettledRecord> settled;
  auto take_settled = [&] {
    join.take_settled(settled);
    for (const auto& r : settled) {
      ASSERT_LT(r.index, out.settled.size());
      EXPECT_EQ(r.record.start_ns, in.trace.gpu_records[r.index].start_ns) << "record " << r.index;
      ++out.settled[r.index];
      out.record_class[r.index] = r.joined;
    }
  };
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
    take_settled();
  }
  join.finish(ready);
  keep();
  take_settled();
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
  // Each record settled once, to the call build_job gave it (its class), or to none.
  const model::Process& p = job.processes[0];
  ASSERT_EQ(s.settled.size(), p.trace.gpu_records.size());
  for (size_t k = 0; k < s.settled.size(); ++k) {
    EXPECT_EQ(s.settled[k], 1) << "record " << k;
    const uint32_t call = p.gpu_record_call[k];
    const std::optional<model::TransferClass> want =
        call == model::kNoCall ? std::nullopt : std::optional(job.calls[call].cls);
    EXPECT_EQ(s.record_class[k], want) << "record " << k;
  }
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

// A governed process's trace: the records go off and back on every
// `stretch` copies (the first stretch on), the change to off 500 ns before
// the stretch's first copy enters (DMAs queued before it may start after
// it). Copies made while off are not flagged and have no record; the first
// `race` copies after each change to on are not flagged, as when CUPTI's
// enable raced their hooks, yet have records; the rest are flagged. Now and
// then a record of a copy the hooks never saw (make_trace). With `tail`, a
// last stretch of that many copies with the records on.
TraceInOrder make_governed_trace(uint64_t seed, size_t events, size_t stretch, size_t race, int max_delay,
                                 size_t tail = 0) {
  Governed g;
  const size_t n = events + tail;
  g.on.resize(n);
  g.flagged.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const bool in_tail = i >= events;
    const size_t k = in_tail ? (events + stretch - 1) / stretch : i / stretch;
    const size_t at = in_tail ? i - events : i % stretch;
    g.on[i] = in_tail || k % 2 == 0;
    // The tail goes on where the last stretch was off.
    const bool after_on = k > 0 && (!in_tail || ((events - 1) / stretch) % 2 == 1);
    g.flagged[i] = g.on[i] && (!after_on || at >= race);
  }
  TraceInOrder out = make_trace(seed, n, max_delay, /*early=*/false, &g);
  trace::Trace& t = out.trace;
  for (size_t i = 1; i < n; ++i)
    if (g.on[i] != g.on[i - 1]) {
      const uint64_t at = t.events[i].t_enter_ns - (g.on[i] ? 0 : 500);
      t.cupti_gate.push_back({at, g.on[i], g.on[i] ? trace::GateReason::AsyncCopies : trace::GateReason::SyncOnly});
    }
  return out;
}

// The calls the second pass timed: not flagged, yet with GPU time.
size_t raced_and_timed(const model::Job& job) {
  return static_cast<size_t>(std::count_if(job.calls.begin(), job.calls.end(), [](const model::Call& c) {
    return c.has_gpu_time() && !(c.event->flags & trace::kFlagGpuExpected);
  }));
}

// build_job's second pass, where the governor turned the records off, made
// as the records come: the same claims, whatever the window.
TEST(StreamedGpuJoin, GovernedTraceSameAsWholeTraceJoin) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    // Stretches longer and shorter than the second pass's look-back, races
    // longer than it, and a last stretch on.
    const size_t stretch = seed % 2 ? 1500 : 200, race = seed % 3 == 0 ? 300 : 12;
    const TraceInOrder in = make_governed_trace(seed, 12000, stretch, race, 3, seed % 4 == 0 ? 500 : 0);
    const model::Job job = whole(in);
    ASSERT_GT(std::count_if(in.trace.cupti_gate.begin(), in.trace.cupti_gate.end(),
                            [](const trace::CuptiGateChange& g) { return !g.on; }),
              3);
    ASSERT_GT(raced_and_timed(job), 20u) << "the second pass joined too little to be tested";
    const model::StreamedGpuJoin::Window windows[] = {{}, {1024, size_t{1} << 18}, {1024, 16384}};
    for (const auto& w : windows) {
      const Streamed s = stream(in, job.processes[0], w);
      ASSERT_FALSE(s.inexact) << "lag " << w.record_lag << " held " << w.max_held_calls << " why "
                              << static_cast<int>(s.why);
      expect_same(job, s);
    }
    // Few calls held: pushed on early, exact or nothing.
    for (size_t held : {size_t{600}, size_t{2048}, size_t{4096}}) {
      const Streamed s = stream(in, job.processes[0], {1024, held});
      // Off stretches longer than the calls held: the join pushes on past their calls.
      if (held == 2048 && stretch == 1500 && race < model::kSwitchLookBack) EXPECT_FALSE(s.inexact);
      if (!s.inexact) expect_same(job, s);
    }
  }
}

// Calls and records right at the governor's switches: a call entered at the
// change to off is reached, one entered before it never; a record starting
// at the change to off reaches that call alone; records starting at a
// call's entry reach it; leftovers a look-back apart, or less, latest first.
TEST(StreamedGpuJoin, RacesAtTheSwitchesAndTheLookBacksEdge) {
  TraceInOrder in;
  trace::Trace& t = in.trace;
  t.has_status = true;
  t.status.cupti = trace::CuptiState::Active;
  t.api_names = {"cudaMemcpyAsync"};
  auto call = [&](uint64_t at, uint64_t bytes, bool flagged) {
    trace::Event e{};
    e.t_enter_ns = at;
    e.t_exit_ns = at + 400;
    e.bytes = bytes;
    e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
    e.direction = static_cast<uint8_t>(trace::Direction::HtoD);
    e.src_kind = static_cast<uint8_t>(trace::MemKind::Pageable);
    e.dst_kind = static_cast<uint8_t>(trace::MemKind::Device);
    e.flags = trace::kFlagAsync | (flagged ? trace::kFlagGpuExpected : 0);
    e.correlation_id = static_cast<uint32_t>(t.events.size() + 1);
    t.events.push_back(e);
  };
  auto record = [&](uint64_t start, uint64_t bytes) {
    trace::GpuRecord r{};
    r.start_ns = start;
    r.end_ns = start + 100 + t.gpu_records.size();
    r.bytes = bytes;
    r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    r.cupti_copy_kind = 1;
    r.src_kind = static_cast<uint8_t>(trace::MemKind::Pageable);
    t.gpu_records.push_back(r);
  };
  // Two changes to off, each followed by 300 copies made while off and a
  // change to on; the second stretch's leftovers come a look-back apart.
  uint64_t now = 1'000'000;
  std::vector<uint64_t> entered;
  for (int k = 0; k < 2; ++k) {
    call(now - 1, 64, false);  // before the change to off: no leftover reaches it
    const uint64_t off = now;
    t.cupti_gate.push_back({off, false, trace::GateReason::SyncOnly});
    for (int i = 0; i < 300; ++i) {
      entered.push_back(now);
      call(now, i % 3 == 1 ? 128 : 64, false);
      now += 1000;
    }
    t.cupti_gate.push_back({now, true, trace::GateReason::AsyncCopies});
    record(off, 64);                 // at the change to off: the first copy alone
    record(entered[k * 300 + 150], 64);  // at a copy's entry: it, then back
    for (int i = 0; i < 5; ++i) record(now + 10, 64);  // the latest copies first
    record(now + 20, 128);
    record(now + 30, 4);  // fits nothing
    for (int i = 0; i < 3; ++i) {
      call(now, 64, true);  // flagged, with its record
      record(now + 50, 64);
      now += 1000;
    }
    now += 5000;
  }
  in.blocks.push_back({false, 0, t.events.size()});
  in.blocks.push_back({true, 0, t.gpu_records.size()});
  const model::Job job = whole(in);
  EXPECT_FALSE(job.calls[0].has_gpu_time());
  EXPECT_TRUE(job.calls[1].has_gpu_time()) << "entered at the change to off";
  EXPECT_GE(raced_and_timed(job), 16u);
  for (const model::StreamedGpuJoin::Window w :
       {model::StreamedGpuJoin::Window{}, {1, size_t{1} << 18}, {1, 400}, {2, 300}}) {
    const Streamed s = stream(in, job.processes[0], w);
    if (w.max_held_calls < 1000 && s.inexact) continue;  // pushed on: exact or nothing
    ASSERT_FALSE(s.inexact) << static_cast<int>(s.why);
    expect_same(job, s);
  }
}

// A change to off, then the records on for longer than the window holds
// calls, with leftovers coming: the last copies made while off may still
// be claimed, so they and every call behind them wait; past max_held_calls
// the join gives up for the governor's reason and the trace is read whole.
TEST(StreamedGpuJoin, RecordsOnLongAfterAChangeToOffFallBack) {
  const TraceInOrder in = make_governed_trace(11, 3000, 1000, 4, 1, 6000);
  const model::Job job = whole(in);
  const Streamed held = stream(in, job.processes[0], {1024, 2048});
  EXPECT_TRUE(held.inexact);
  EXPECT_EQ(held.why, model::StreamedGpuJoin::Inexact::Governor);
  const Streamed all = stream(in, job.processes[0], {});
  ASSERT_FALSE(all.inexact);
  expect_same(job, all);
}

// A staged copy's chunks wait for it while it is held (its last chunk may
// un-join them all): more of them than max_held_calls makes the join
// inexact where it settles records, and only there.
TEST(StreamedGpuJoin, ChunksOfHeldStagedCopiesAreBoundedWhenSettled) {
  TraceInOrder in;
  trace::Trace& t = in.trace;
  t.has_status = true;
  t.status.cupti = trace::CuptiState::Active;
  t.api_names = {"cudaMemcpy"};
  trace::Event e{};
  e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
  e.direction = static_cast<uint8_t>(trace::Direction::HtoD);
  e.src_kind = static_cast<uint8_t>(trace::MemKind::Pageable);
  e.dst_kind = static_cast<uint8_t>(trace::MemKind::Device);
  e.flags = trace::kFlagGpuExpected | trace::kFlagStaged;
  e.bytes = 1 << 20;
  e.t_enter_ns = 1000;
  e.t_exit_ns = 900'000;
  e.correlation_id = 1;
  t.events.push_back(e);
  for (uint64_t i = 0; i < 100; ++i) {  // 100 KiB of its 1 MiB: its last chunks never come
    trace::GpuRecord r{};
    r.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    r.cupti_copy_kind = 1;
    r.src_kind = r.dst_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
    r.bytes = 1024;
    r.start_ns = 2000 + 1000 * i;
    r.end_ns = r.start_ns + 900;
    t.gpu_records.push_back(r);
  }
  in.blocks = {{false, 0, 1}, {true, 0, t.gpu_records.size()}};
  const model::Job job = whole(in);
  EXPECT_FALSE(job.calls[0].has_gpu_time());
  const Streamed settled = stream(in, job.processes[0], {1, 50});
  EXPECT_TRUE(settled.inexact);
  EXPECT_EQ(settled.why, model::StreamedGpuJoin::Inexact::HeldChunks);
  ASSERT_FALSE(stream(in, job.processes[0], {1, 50}, /*settle_records=*/false).inexact);
  const Streamed all = stream(in, job.processes[0], {1, 100});
  ASSERT_FALSE(all.inexact);
  expect_same(job, all);  // every chunk settled to no call
}

TEST(StreamedGpuJoin, RecordWithCorrelationIdIsNotStreamed) {
  TraceInOrder in = make_trace(9, 1000, 1, false);
  in.trace.gpu_records[0].correlation_id = 5;
  const model::Job job = whole(in);
  EXPECT_TRUE(stream(in, job.processes[0], {}).inexact);
}

}  // namespace
}  // namespace cuxfer::testing
