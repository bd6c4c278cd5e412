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
    : window_(w), governed_(!p.trace.cupti_gate.empty()) {
  // build_job's second pass (join_switch_races) runs where the records went off.
  for (const auto& g : p.trace.cupti_gate)
    if (!g.on) give_up(Inexact::Governor);
}

void StreamedGpuJoin::add_calls(std::span<const Call> calls) {
  if (inexact_) return;
  std::vector<Candidate> fresh;
  for (const Call& c : calls) {
    Held& h = held_.emplace_back();
    h.event = *c.event;
    h.call = c;
    h.call.event = &h.event;
    h.candidate = awaits_record(h.call) && (!governed_ || (h.event.flags & trace::kFlagGpuExpected));
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
    // A record or call that comes too late from now on may be one this did.
    held_calls_pushed_ = held_calls_pushed_ || oldest_waits();
    while (!waiting_.empty() && oldest_waits()) join_next();
    while (oldest_waits() && candidates_.size() > kJoinLookBack)
      pass_watermark(candidates_[kJoinLookBack].t_enter);
    if (oldest_waits()) give_up(Inexact::HeldCalls);
  }
}

void StreamedGpuJoin::add_records(std::span<const trace::GpuRecord> records) {
  if (inexact_) return;
  for (const trace::GpuRecord& r : records) {
    const auto kind = static_cast<trace::GpuRecordKind>(r.kind);
    if (kind != trace::GpuRecordKind::Memcpy && kind != trace::GpuRecordKind::Memset) continue;
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
      slots_[slot] = r;
    } else if (slot < (uint64_t{1} << kSlotBits)) {
      slots_.push_back(r);
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
}

// The waiting record that starts first joins, as in join_gpu_by_time.
void StreamedGpuJoin::join_next() {
  std::pop_heap(waiting_.begin(), waiting_.end(),
                [](const Waiting& a, const Waiting& b) { return later(a, b); });
  const auto slot = static_cast<uint32_t>(waiting_.back().order & ((uint64_t{1} << kSlotBits) - 1));
  const trace::GpuRecord r = slots_[slot];
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
      at.complete = gpu_complete(c);
      // Final now: no later record joins it, and the calls behind it need not wait for it.
      if (at.complete) at.held->reachable = false;
      ++joined_;
      break;
    }
    ++i;
  }
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

void StreamedGpuJoin::collect(std::vector<Call>& ready, bool all) {
  ready.clear();
  for (; handed_out_ > 0; --handed_out_) held_.pop_front();
  if (inexact_) return;
  for (Held& h : held_) {
    if (h.reachable && !all) break;
    if (h.candidate) settle(h.call);
    ready.push_back(h.call);
    ++handed_out_;
  }
}

void StreamedGpuJoin::take_ready(std::vector<Call>& ready) { collect(ready, false); }

void StreamedGpuJoin::finish(std::vector<Call>& ready) {
  while (!inexact_ && !waiting_.empty()) join_next();
  collect(ready, true);
  candidates_.clear();
  reach_ = 0;
}

}  // namespace cuxfer::model
