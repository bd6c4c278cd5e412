#include "analyzer/model/gpu_join.h"

#include <algorithm>
#include <cassert>
#include <iterator>

#include <fmt/format.h>

namespace cuxfer::model {

bool gpu_kind_matches(trace::EventKind e, trace::GpuRecordKind g) {
  return (e == trace::EventKind::Copy && g == trace::GpuRecordKind::Memcpy) ||
         (e == trace::EventKind::Memset && g == trace::GpuRecordKind::Memset);
}

// This keeps, e.g., a pinned and a pageable copy of the same size on two
// streams from trading GPU times.
bool record_fits(const Call& c, const trace::GpuRecord& r) {
  // A staged copy reaches the GPU as several chunk DMAs that add up to it.
  const bool size_ok = c.staged() ? r.bytes <= c.bytes() - c.gpu_bytes : r.bytes == c.bytes();
  if (!size_ok || !gpu_kind_matches(c.kind(), static_cast<trace::GpuRecordKind>(r.kind))) return false;
  if (c.kind() != trace::EventKind::Copy) return true;
  using trace::Direction;
  using trace::MemKind;
  // CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD, 7 DtoA, 8 DtoD, 9 HtoH, 10
  // PtoP.
  const unsigned k = r.cupti_copy_kind;
  bool direction_ok = true;
  MemKind host = MemKind::Unknown;
  switch (c.cls.direction) {
    case Direction::HtoD:
      direction_ok = k == 1 || k == 3;
      host = static_cast<MemKind>(r.src_kind);
      break;
    case Direction::DtoH:
      direction_ok = k == 2 || k == 4;
      host = static_cast<MemKind>(r.dst_kind);
      break;
    case Direction::DtoD:
      direction_ok = k == 5 || k == 6 || k == 7 || k == 8 || k == 10;
      break;
    case Direction::Peer:
      direction_ok = k == 10 || k == 8;
      break;
    case Direction::HtoH:
      direction_ok = k == 9;
      break;
    default:
      break;
  }
  if (!direction_ok || k == 0) return k == 0;  // an unknown CUPTI kind constrains nothing
  if (host == MemKind::Unknown || c.cls.memory == MemKind::Unknown) return true;
  // A copy the rewrite staged or registered is DMA from page-locked memory
  // although the app's buffer is pageable.
  const bool call_pageable = c.cls.memory == MemKind::Pageable && !c.staged() && !c.registered();
  const bool record_pageable = host == MemKind::Pageable;
  return call_pageable == record_pageable;
}

bool awaits_record(const Call& c) {
  return (c.kind() == trace::EventKind::Copy || c.kind() == trace::EventKind::Memset) && !c.failed() &&
         !c.has_gpu_time();
}

void add_gpu_time(Call& c, const trace::GpuRecord& r) {
  if (c.gpu_records == 0) c.gpu_begin_ns = r.start_ns;
  c.gpu_end_ns = std::max(c.gpu_end_ns, r.end_ns);
  c.gpu_ns = c.gpu_end_ns > c.gpu_begin_ns ? c.gpu_end_ns - c.gpu_begin_ns : 0;
  c.gpu_records += 1;
  c.gpu_bytes += r.bytes;
}

std::vector<uint64_t> switch_offs(const trace::Trace& t) {
  std::vector<uint64_t> offs;
  for (const auto& g : t.cupti_gate)
    if (!g.on) offs.push_back(g.t_ns);
  std::sort(offs.begin(), offs.end());
  offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
  return offs;
}

bool races_switch(const Call& c) {
  return awaits_record(c) && !c.staged() && !(c.event->flags & trace::kFlagGpuExpected);
}

std::string joined_by_time_note(uint32_t pid, uint64_t joined) {
  return fmt::format("pid {}: {} GPU records joined to calls by time, size and kind", pid, joined);
}

GateAccount::GateAccount(const trace::Trace& t)
    : gpu_until_(t.has_cupti_handover ? t.cupti_handover.t_ns : UINT64_MAX), gate_(t.cupti_gate) {
  g_.governed = gate_.governed();
  g_.changes = static_cast<uint32_t>(gate_.changes());
  g_.samples = gate_.samples();
}

void GateAccount::add(const Call& c) {
  // After a handover to the app's profiler no GPU record is expected; nor
  // where the governor had the records off (or turned them off during the call).
  const trace::Event& e = *c.event;
  const bool data = c.kind() == trace::EventKind::Copy || c.kind() == trace::EventKind::Memset;
  const bool on = gate_.on_throughout(e.t_enter_ns, e.t_exit_ns);
  if (data && !c.failed() && e.t_enter_ns < gpu_until_) {
    first_t_ = std::min(first_t_, e.t_enter_ns);
    last_t_ = std::max(last_t_, e.t_exit_ns);
    ++g_.calls;
    if (c.has_gpu_time())
      ++g_.timed;
    else if (!on && !(e.flags & trace::kFlagAsync))
      ++g_.untimed_sync;
    else if (!on) {
      ++g_.untimed_async;
      if (gate_.off_reason(e.t_enter_ns) == trace::GateReason::Repeats) ++g_.untimed_repeats;
    }
  }
  if ((e.flags & trace::kFlagGpuExpected) && !c.has_gpu_time() && !c.failed() && e.t_enter_ns < gpu_until_ &&
      on)
    ++without_gpu_;
}

void GateAccount::finish(Process& p) const {
  p.gate = g_;
  p.events_without_gpu += without_gpu_;
  if (g_.governed && last_t_ > first_t_)
    p.gate.on_share =
        static_cast<double>(gate_.on_ns(first_t_, last_t_)) / static_cast<double>(last_t_ - first_t_);
}

namespace {
// The heap's order: the earliest start on top, file order between equals.
bool later(const auto& a, const auto& b) {
  return a.start_ns != b.start_ns ? a.start_ns > b.start_ns : a.order > b.order;
}
}  // namespace

StreamedGpuJoin::StreamedGpuJoin(const Process& p, Window w)
    : window_(w), governed_(!p.trace.cupti_gate.empty()), offs_(switch_offs(p.trace)) {}

void StreamedGpuJoin::add_calls(std::span<const Call> calls) {
  if (inexact_) return;
  std::vector<Candidate> fresh;
  for (const Call& c : calls) {
    Held& h = held_.emplace_back();
    h.event = *c.event;
    h.call = c;
    h.call.event = &h.event;
    h.candidate = awaits_record(h.call) && (!governed_ || (h.event.flags & trace::kFlagGpuExpected));
    // A call entered before the records first went off is past every leftover's reach.
    h.race = !offs_.empty() && races_switch(h.call) && h.event.t_enter_ns >= offs_.front();
    if (h.race) {
      if (joined_any_ && h.event.t_enter_ns <= watermark_) {
        give_up(Inexact::CallLate);  // a leftover already placed would have counted this call
        return;
      }
      h.reachable = true;
      // Mostly at the back: the blocks come in trace order.
      auto at = std::upper_bound(races_.begin(), races_.end(), h.event.t_enter_ns,
                                 [](uint64_t t, const RaceCall& r) { return t < r.t_enter; });
      races_.insert(at, {h.event.t_enter_ns, &h});
      continue;
    }
    if (!h.candidate) continue;
    if (joined_any_ && h.event.t_enter_ns <= watermark_) {
      give_up(Inexact::CallLate);  // a record already joined would have looked at this call
      return;
    }
    // A call with all its GPU time is final: it holds no call behind it. Its
    // candidate stays, for counting the look-back, but points to nothing
    // once the call is handed out.
    const bool complete = gpu_complete(h.call);
    h.reachable = !complete;
    fresh.push_back({h.event.t_enter_ns, &h, complete, 0});
  }
  // Into entry order: a block holds each thread's events of a write cycle in
  // turn, so only the candidates entered after its first are merged again.
  // Stable, and the earlier block first among equals: trace order.
  auto by_entry = [](const Candidate& a, const Candidate& b) { return a.t_enter < b.t_enter; };
  std::stable_sort(fresh.begin(), fresh.end(), by_entry);
  if (!fresh.empty()) {
    std::vector<Candidate> tail;
    while (!candidates_.empty() && candidates_.back().t_enter > fresh.front().t_enter) {
      tail.push_back(candidates_.back());
      candidates_.pop_back();
    }
    std::reverse(tail.begin(), tail.end());
    std::merge(tail.begin(), tail.end(), fresh.begin(), fresh.end(), std::back_inserter(candidates_),
               by_entry);
  }
  if (held_.size() - handed_out_ > window_.max_held_calls) {
    // Join what waits, earliest first, until the oldest call is settled; with
    // no record left, no record may now start before the calls held.
    auto oldest_waits = [&] { return held_[handed_out_].reachable; };
    auto oldest_races = [&] { return held_[handed_out_].race; };
    // A record or call that comes too late from now on may be one this did.
    held_calls_pushed_ = held_calls_pushed_ || oldest_waits();
    while (!inexact_ && !waiting_.empty() && oldest_waits()) join_next();
    for (bool moved = true; moved && !inexact_ && oldest_waits();) {
      moved = false;
      for (; oldest_waits() && !oldest_races() && candidates_.size() > kJoinLookBack; moved = true)
        pass_watermark(candidates_[kJoinLookBack].t_enter);
      for (; !inexact_ && oldest_waits() && oldest_races() && push_races(); moved = true) {
      }
    }
    if (!inexact_ && oldest_waits()) give_up(oldest_races() ? Inexact::Governor : Inexact::HeldCalls);
  }
}

void StreamedGpuJoin::add_records(std::span<const trace::GpuRecord> records) {
  if (inexact_) return;
  for (const trace::GpuRecord& r : records) {
    const uint64_t index = records_seen_++;
    const auto kind = static_cast<trace::GpuRecordKind>(r.kind);
    if (kind != trace::GpuRecordKind::Memcpy && kind != trace::GpuRecordKind::Memset) {
      settle_record(index, r, nullptr);  // build_job joins no other kind by time
      continue;
    }
    // Joined by correlation id first in build_job: the frame should have said so.
    if (r.correlation_id != 0 || (joined_any_ && r.start_ns < watermark_)) {
      give_up(r.correlation_id != 0 ? Inexact::CorrelationId : Inexact::RecordLate);
      return;
    }
    ++without_id_;
    // At most record_lag + 1 slots are taken.
    uint64_t slot = slots_.size();
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot] = {r, index};
    } else if (slot < (uint64_t{1} << kSlotBits)) {
      slots_.push_back({r, index});
    } else {
      give_up(Inexact::WaitingRecords);
      return;
    }
    waiting_.push_back({r.start_ns, record_seq_++ << kSlotBits | slot});
    std::push_heap(waiting_.begin(), waiting_.end(),
                   [](const Waiting& a, const Waiting& b) { return later(a, b); });
    // Within the block: a block of a crafted trace may hold a million records.
    if (waiting_.size() > window_.record_lag) join_next();
  }
}

// No record starts before `t` from now on: calls kJoinLookBack candidates
// behind the last entered by then are out of every later record's reach.
void StreamedGpuJoin::pass_watermark(uint64_t t) {
  watermark_ = std::max(watermark_, t);
  joined_any_ = true;
  // Candidates enter after the watermark only: those before it stay a prefix,
  // which grows from where it ended.
  while (reach_ < candidates_.size() && candidates_[reach_].t_enter <= watermark_) ++reach_;
  for (; reach_ > kJoinLookBack; --reach_) {
    // A complete candidate's call was let go when it became so (it may be handed out).
    if (!candidates_.front().complete) candidates_.front().held->reachable = false;
    candidates_.pop_front();
  }
  pass_switches();
}

// The watermark is past the change to off open_: the change before it (if
// any) ended a stretch whose leftovers are all known.
void StreamedGpuJoin::pass_switches() {
  if (offs_.empty()) return;
  const auto past = static_cast<size_t>(std::upper_bound(offs_.begin(), offs_.end(), watermark_) - offs_.begin());
  if (past == 0) return;  // the records have not gone off yet
  if (open_ != past - 1) {
    join_leftovers(leftovers_.size());
    release_races(offs_[past - 1]);
    open_ = past - 1;
    open_first_ = races_base_;
  }
  settle_races(false);
}

// Record `r`, which starts at the watermark, fits no flagged call: the second
// pass's, where the records went off before it.
void StreamedGpuJoin::add_leftover(const trace::GpuRecord& r, uint64_t index) {
  if (open_ == SIZE_MAX) {  // never off before it: no call takes it
    settle_record(index, r, nullptr);
    return;
  }
  if (leftovers_.size() >= window_.max_held_calls) {
    give_up(Inexact::Governor);
    return;
  }
  const auto entered = std::upper_bound(races_.begin(), races_.end(), r.start_ns,
                                        [](uint64_t t, const RaceCall& c) { return t < c.t_enter; });
  leftovers_.push_back({r, races_base_ + static_cast<uint64_t>(entered - races_.begin()), index});
}

// The first `n` leftovers, latest first, as join_switch_races takes them:
// no leftover still to come reaches the calls they may claim.
void StreamedGpuJoin::join_leftovers(size_t n) {
  for (size_t i = n; i-- > 0;) {
    const Leftover& l = leftovers_[i];
    Call* c = switch_race_call(l.record, offs_[open_], races_base_, l.end,
                               [&](size_t at) { return &races_[at - races_base_].held->call; });
    // A race call is not staged: settle leaves its claim as it is.
    settle_record(l.index, l.record, c);
    if (!c) continue;
    add_gpu_time(*c, l.record);
    ++joined_;
  }
  leftovers_.erase(leftovers_.begin(), leftovers_.begin() + static_cast<std::ptrdiff_t>(n));
  chain_end_ = 0;
}

// Lets go of the race calls entered before `t` (earlier stretches' calls).
void StreamedGpuJoin::release_races(uint64_t t) {
  for (; !races_.empty() && races_.front().t_enter < t; ++races_base_) {
    races_.front().held->reachable = false;
    races_.pop_front();
  }
}

// Joins the leftovers that nothing still to come can change and lets go of
// the race calls no leftover, known or to come, may claim. A record still to
// come starts at the watermark or later: the calls it may claim are among
// the last kSwitchLookBack entered by then, or after.
void StreamedGpuJoin::settle_races(bool all) {
  const auto entered = std::upper_bound(races_.begin(), races_.end(), watermark_,
                                        [](uint64_t t, const RaceCall& c) { return t < c.t_enter; });
  const uint64_t by_watermark = races_base_ + static_cast<uint64_t>(entered - races_.begin());
  // Positions before `beyond` are out of the reach of every leftover to come.
  const uint64_t beyond = all ? UINT64_MAX : std::max(open_first_, by_watermark - std::min<uint64_t>(by_watermark, kSwitchLookBack));
  for (;;) {
    // The first chain: leftovers each within kSwitchLookBack calls of the
    // one before (those beyond it reach none of its calls).
    if (chain_end_ == 0 && !leftovers_.empty()) chain_end_ = 1;
    while (chain_end_ < leftovers_.size() &&
           leftovers_[chain_end_].end < leftovers_[chain_end_ - 1].end + kSwitchLookBack)
      ++chain_end_;
    if (chain_end_ == 0 || leftovers_[chain_end_ - 1].end > beyond) break;
    join_leftovers(chain_end_);
  }
  uint64_t free_before = beyond;
  if (!leftovers_.empty())
    free_before = std::min(free_before, leftovers_.front().end - std::min<uint64_t>(leftovers_.front().end, kSwitchLookBack));
  for (; !races_.empty() && races_base_ < free_before; ++races_base_) {
    races_.front().held->reachable = false;
    races_.pop_front();
  }
}

// With too many calls held behind a race call: no record starts before the
// race call kSwitchLookBack past every known leftover's reach from now on.
// False when there is none such yet.
bool StreamedGpuJoin::push_races() {
  if (!waiting_.empty() || races_.empty()) return false;
  uint64_t from = races_base_;
  if (!leftovers_.empty()) from = std::max(from, leftovers_.back().end);
  const uint64_t at = from + kSwitchLookBack;
  if (at >= races_base_ + races_.size()) return false;
  const uint64_t base = races_base_;
  pass_watermark(races_[at - races_base_].t_enter);
  return races_base_ != base;
}

// The waiting record that starts first joins, as in join_gpu_by_time.
void StreamedGpuJoin::join_next() {
  std::pop_heap(waiting_.begin(), waiting_.end(),
                [](const Waiting& a, const Waiting& b) { return later(a, b); });
  const auto slot = static_cast<uint32_t>(waiting_.back().order & ((uint64_t{1} << kSlotBits) - 1));
  const trace::GpuRecord r = slots_[slot].record;
  const uint64_t index = slots_[slot].index;
  free_slots_.push_back(slot);
  waiting_.pop_back();
  pass_watermark(r.start_ns);
  // Among the last kJoinLookBack candidates (counting those passed) before
  // the DMA started, the earliest that fits. The record starts at the
  // watermark (none waiting starts before it): they are the prefix.
  // pass_watermark keeps at most kJoinLookBack of them: all are looked at.
  const size_t in_reach = reach_;
  assert(in_reach <= kJoinLookBack);
  for (size_t i = 0; i < in_reach;) {
    Candidate& at = candidates_[i];
    if (at.complete) {
      // Past the run of complete candidates from here, remembered for the
      // next record (most of a window is joined already).
      size_t j = i + std::max<uint32_t>(at.complete_run, 1);
      while (j < in_reach && candidates_[j].complete) j += std::max<uint32_t>(candidates_[j].complete_run, 1);
      at.complete_run = static_cast<uint32_t>(std::min<size_t>(j - i, UINT32_MAX));
      i = j;
      continue;
    }
    Call& c = at.held->call;
    if (record_fits(c, r)) {
      add_gpu_time(c, r);
      if (!c.staged()) {
        settle_record(index, r, &c);  // final: settle un-joins staged copies only
      } else if (keep_settled_) {
        // Settled with its copy, which settle may un-join.
        at.held->chunks.emplace_back(index, r);
        if (++held_chunks_ > window_.max_held_calls) give_up(Inexact::HeldChunks);
      }
      at.complete = gpu_complete(c);
      // Final now: no later record joins it, and the calls behind it need not wait for it.
      if (at.complete) at.held->reachable = false;
      ++joined_;
      return;
    }
    ++i;
  }
  add_leftover(r, index);
}

// A staged copy whose chunks did not all turn up has no trustworthy GPU time.
void StreamedGpuJoin::settle(Call& c) {
  if (c.staged() && c.gpu_records > 0 && c.gpu_bytes != c.bytes()) {
    joined_ -= c.gpu_records;
    c.gpu_ns = 0;
    c.gpu_records = 0;
    c.gpu_bytes = 0;
  }
}

// The chunk records of staged copy `h`, as settle left it: joined to it, or
// to no call when settle un-joined them.
void StreamedGpuJoin::settle_chunks(Held& h) {
  const Call* c = h.call.gpu_records > 0 ? &h.call : nullptr;
  for (const auto& [index, r] : h.chunks) settle_record(index, r, c);
  held_chunks_ -= h.chunks.size();
  h.chunks = {};
}

void StreamedGpuJoin::collect(std::vector<Call>& ready, bool all) {
  ready.clear();
  for (; handed_out_ > 0; --handed_out_) held_.pop_front();
  if (inexact_) return;
  for (Held& h : held_) {
    if (h.reachable && !all) break;
    if (h.candidate) settle(h.call);
    if (!h.chunks.empty()) settle_chunks(h);
    ready.push_back(h.call);
    ++handed_out_;
  }
}

void StreamedGpuJoin::take_ready(std::vector<Call>& ready) { collect(ready, false); }

void StreamedGpuJoin::take_settled(std::vector<SettledRecord>& settled) {
  settled.clear();
  settled.swap(settled_);
}

void StreamedGpuJoin::finish(std::vector<Call>& ready) {
  while (!inexact_ && !waiting_.empty()) join_next();
  if (!inexact_ && open_ != SIZE_MAX) settle_races(true);
  collect(ready, true);
  candidates_.clear();
  reach_ = 0;
}

}  // namespace cuxfer::model
