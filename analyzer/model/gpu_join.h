// Joining GPU records to calls: the rules build_job's join and the streamed
// join share, and the streamed join of one process (StreamedGpuJoin).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analyzer/model/cupti_gate.h"
#include "analyzer/model/job.h"

namespace cuxfer::model {

bool gpu_kind_matches(trace::EventKind e, trace::GpuRecordKind g);
// Whether GPU record `r` can be the DMA of call `c`: same operation and size,
// and, for copies, a CUPTI copy kind and host memory kind that agree with the
// call's class.
bool record_fits(const Call& c, const trace::GpuRecord& r);
// A copy or memset that ran and has no GPU time yet: what a record may join.
bool awaits_record(const Call& c);
// The call has all the GPU time a record may give it (a staged copy: all its chunks).
inline bool gpu_complete(const Call& c) { return c.staged() ? c.gpu_bytes >= c.bytes() : c.has_gpu_time(); }
// Record `r` adds to call `c`'s GPU time: one DMA gives its duration; a staged
// copy's chunks give first chunk start to last chunk end.
void add_gpu_time(Call& c, const trace::GpuRecord& r);
// build_job's note of a process whose records were joined by time.
std::string joined_by_time_note(uint32_t pid, uint64_t joined);
// Calls entered before this many later candidates did are past a record's
// reach (join_gpu_by_time's look-back).
inline constexpr size_t kJoinLookBack = 256;

// The second pass of the join by time, where the governor turned the records
// off (build_job's join_switch_races; StreamedGpuJoin makes the same claims).
// The governor turns the records on before the hooks expect them
// (shim/record/recorder.cpp): a copy whose hook looked while CUPTI's enable
// was still running is not flagged, yet CUPTI may time it. Records the first
// pass left over go to such copies: each, latest record first, to the latest
// call without GPU time that fits it among the kSwitchLookBack such calls
// (by entry time) last entered before its DMA started, and entered after the
// records last went off before it (an earlier call ran while they were off:
// CUPTI made it none).
inline constexpr size_t kSwitchLookBack = 256;
// The times the governor turned the records off, sorted, each once.
std::vector<uint64_t> switch_offs(const trace::Trace& t);
// A call the second pass may join: a copy or memset that awaits a record, not
// flagged for one by its hook, not staged (a chunk's record cannot say which
// staged copy it belongs to).
bool races_switch(const Call& c);
// Of `offs` (switch_offs), the last at or before `start`: where the calls a
// record starting then may join begin. Null: the records never went off before.
inline const uint64_t* off_before(const std::vector<uint64_t>& offs, uint64_t start) {
  auto it = std::upper_bound(offs.begin(), offs.end(), start);
  return it == offs.begin() ? nullptr : &*std::prev(it);
}
// The second pass's call for record `r`: `at(i)` is the i-th call races_switch
// accepts, by entry time then trace order, and those from `begin` to `end`
// (exclusive; the calls entered at or before the DMA started) are looked at
// from the latest, kSwitchLookBack at most, back to the first entered before
// `since` (off_before). Null when none fits. The whole join and the streamed
// one both choose with this.
template <typename At>
Call* switch_race_call(const trace::GpuRecord& r, uint64_t since, size_t begin, size_t end, At&& at) {
  // Bounded like the first pass: a record no call fits (a copy the hooks
  // never saw) must not scan a whole storm of calls made while off.
  size_t looked = 0;
  for (size_t i = end; i != begin && looked < kSwitchLookBack; ++looked) {
    Call* c = at(--i);
    if (c->event->t_enter_ns < since) break;
    if (c->has_gpu_time() || !record_fits(*c, r)) continue;
    return c;
  }
  return nullptr;
}

// The CUPTI governor's account of one process's app calls (Process::gate,
// Process::events_without_gpu), a call at a time, in any order, once each
// call's GPU time is final.
class GateAccount {
 public:
  explicit GateAccount(const trace::Trace& t);
  void add(const Call& c);
  void finish(Process& p) const;

 private:
  uint64_t gpu_until_;
  GateTimeline gate_;
  GateStats g_;
  uint64_t without_gpu_ = 0, first_t_ = UINT64_MAX, last_t_ = 0;
};

// join_gpu_by_time of one process made while its events and GPU records are
// read a block at a time, in file order: the same claims, in bounded memory.
//
// The whole-trace join takes the records in start order, each to the
// earliest call without GPU time that fits it among the kJoinLookBack calls
// (by entry time) last entered before the DMA started. Here the records wait
// in a heap until `record_lag` of them are waiting, then the earliest is
// joined: the shim writes a record within a write cycle or a CUPTI buffer of
// its copy (shim/record/recorder.cpp: each cycle's events, then the records
// CUPTI handed over), far fewer than the lag. A call waits until no later
// record can reach it (it has all its GPU time, or kJoinLookBack calls
// entered after it before the last record joined; a call that awaits no
// record waits for none), then is handed out in trace order, so calls
// beside the copies (allocations, failed copies) wait only behind a copy
// whose record has not come. Memory: the waiting
// records and calls, at most `record_lag` and `max_held_calls` (plus one
// block of calls, checked after it).
//
// Where the governor turned the records off, the second pass (kSwitchLookBack)
// is made as the first pass goes: the records it leaves over, and the calls
// races_switch accepts entered since the first change to off, wait too. The
// second pass takes the leftovers latest first, so a leftover waits until
// no record still to come can reach a call it may claim: the calls since the
// last change to off that are among the kSwitchLookBack last entered by the
// watermark, and those a waiting leftover reaches, wait; leftovers whose
// reach overlaps (a chain, each a call apart at most from the next) are
// joined together, latest first, once no later one can reach their calls.
// A change to off past the watermark ends the wait of everything before it.
// With the records back on for long after a change to off, the last calls
// before it wait that long (a leftover may still come), and the calls
// behind them in trace order with them.
//
// Which record went to which call (keep_settled_records, take_settled): a
// record is settled once its pairing can no longer change, and handed out
// then with the class of the call it joined, or none. A record that joins a
// call which is not staged is settled as it joins (nothing undoes such a
// claim); one the first pass leaves over, as the second pass places it (or
// at once where the records never went off before it); a chunk of a staged
// copy, with its copy when that is handed out (settle may un-join all its
// chunks). Memory: the chunks of the staged copies held, at most
// `max_held_calls` of them.
//
// Exact or nothing: a record that starts before one already joined, or a
// call that enters before it (either would have changed a claim already
// made), or more calls waiting than `max_held_calls`, makes the join
// inexact() and the caller reads the trace whole. So does a record the
// streamed join does not make (a correlation id, a kernel), or more
// leftovers waiting than `max_held_calls`.
class StreamedGpuJoin {
 public:
  struct Window {
    size_t record_lag = size_t{1} << 16;
    size_t max_held_calls = size_t{1} << 18;
  };
  StreamedGpuJoin(const Process& p, Window w);
  // A GPU record whose pairing is final: its place among the process's
  // records (file order, every kind: Trace::gpu_records' index in a whole
  // read), and the class of the call it joined (none: no call took it).
  struct SettledRecord {
    uint64_t index = 0;
    trace::GpuRecord record{};
    std::optional<TransferClass> joined;
  };
  // From now on the records are settled for take_settled. Off by default:
  // nobody would take them.
  void keep_settled_records() { keep_settled_ = true; }
  // The records settled since the last call, into `settled` (cleared first),
  // in no particular order. Take them after each add_calls, add_records and
  // finish: at most a block's records and `record_lag` wait here.
  void take_settled(std::vector<SettledRecord>& settled);
  // The app calls of one block (CallFeed), in trace order; their events are copied.
  void add_calls(std::span<const Call> calls);
  void add_records(std::span<const trace::GpuRecord> records);
  // The calls whose GPU time is final, in trace order, into `ready` (cleared
  // first); they point into this join, valid until its next use.
  void take_ready(std::vector<Call>& ready);
  // At the end of the trace: every call left.
  void finish(std::vector<Call>& ready);
  bool inexact() const { return inexact_; }
  // Why the join is inexact.
  enum class Inexact : uint8_t {
    No,
    Governor,       // more calls wait for the second pass's leftovers, or more leftovers wait, than max_held_calls
    CorrelationId,  // a record joined by correlation id
    RecordLate,     // a record starts before one already joined
    CallLate,       // a call that awaits a record entered at or before one already joined
    HeldCalls,      // more calls waiting than max_held_calls
    WaitingRecords, // more records waiting than the slots hold (2^24)
    HeldChunks,     // more chunk records of held staged copies than max_held_calls (keep_settled_records)
  };
  Inexact why_inexact() const { return why_; }
  // What build_job says of the process: records joined, without a correlation id.
  uint64_t joined() const { return joined_; }
  uint64_t records_without_id() const { return without_id_; }

 private:
  struct Held {
    trace::Event event;
    Call call;
    bool candidate = false;  // awaited a record when it came
    bool reachable = false;  // a later record may still join it (a candidate not yet complete, or a race)
    bool race = false;       // races_switch: the second pass may join it
    // A staged copy's chunk records (keep_settled_records), settled when it
    // is handed out: its file-order index and the record.
    std::vector<std::pair<uint64_t, trace::GpuRecord>> chunks;
  };
  // A call the second pass may join (Held::race), by entry time then trace order.
  struct RaceCall {
    uint64_t t_enter;
    Held* held;
  };
  // A record the first pass left over, since the first change to off, and
  // the position after the last race call entered at or before its start.
  struct Leftover {
    trace::GpuRecord record;
    uint64_t end;
    uint64_t index;  // in file order among the process's records
  };
  // A waiting record and its file-order index among the process's records.
  struct Slot {
    trace::GpuRecord record;
    uint64_t index;
  };
  struct Candidate {
    uint64_t t_enter;
    Held* held;  // read only while !complete: a complete call may be handed out
    // gpu_complete(held->call), kept here: a record's look at its
    // kJoinLookBack candidates then reads this array only.
    bool complete;
    // When complete: this and the next complete_run - 1 candidates are all
    // complete (0: not known past this one). Sound because candidates enter
    // only after the watermark (earlier ones make the join inexact), so the
    // part a window looks at is never inserted into, only dropped from the
    // front, and a candidate once complete stays so while in reach.
    uint32_t complete_run;
  };
  // A waiting record's place in the heap, small (the heap is walked for
  // every record; the records themselves wait in `slots_`).
  struct Waiting {
    uint64_t start_ns;
    // File order, which breaks ties of start time as build_job's stable
    // sort does, above the record's slot (kSlotBits).
    uint64_t order;
  };
  static constexpr int kSlotBits = 24;
  void join_next();
  void pass_watermark(uint64_t t);
  void collect(std::vector<Call>& ready, bool all);
  void settle(Call& c);
  // The second pass: the watermark moved; a leftover; joins and lets go what
  // no record still to come can change (all: at the end).
  void pass_switches();
  void add_leftover(const trace::GpuRecord& r, uint64_t index);
  // Record `index` joined call `c` (null: no call).
  void settle_record(uint64_t index, const trace::GpuRecord& r, const Call* c) {
    if (keep_settled_)
      settled_.push_back({index, r, c ? std::optional<TransferClass>(c->cls) : std::nullopt});
  }
  void settle_chunks(Held& h);
  void join_leftovers(size_t n);
  void release_races(uint64_t before);
  void settle_races(bool all);
  bool push_races();
  void give_up(Inexact why) {
    inexact_ = true;
    // Too late for a watermark the held calls' limit pushed: that limit's doing.
    why_ = held_calls_pushed_ && (why == Inexact::RecordLate || why == Inexact::CallLate) ? Inexact::HeldCalls : why;
  }

  Window window_;
  bool governed_;
  std::deque<Held> held_;  // trace order
  size_t handed_out_ = 0;  // of held_'s front, by the last take_ready
  // A vector dropped from the front by moving a start, compacted now and
  // then: the look at a window indexes it for every record, cheaper than a
  // deque's index.
  class Candidates {
   public:
    using value_type = Candidate;
    auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
    auto end() { return items_.end(); }
    size_t size() const { return items_.size() - head_; }
    bool empty() const { return size() == 0; }
    Candidate& operator[](size_t i) { return items_[head_ + i]; }
    Candidate& front() { return items_[head_]; }
    Candidate& back() { return items_.back(); }
    void push_back(const Candidate& c) { items_.push_back(c); }
    void pop_back() { items_.pop_back(); }
    void pop_front() {
      if (++head_ >= 4096 && head_ * 2 >= items_.size()) {
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
    }
    void clear() {
      items_.clear();
      head_ = 0;
    }

   private:
    std::vector<Candidate> items_;
    size_t head_ = 0;
  };
  // Those entered after the watermark and the last kJoinLookBack entered at or
  // before it (the look-back of the next record), by entry time then trace order.
  Candidates candidates_;
  size_t reach_ = 0;  // candidates_ entered at or before the watermark
  std::vector<Waiting> waiting_;    // a min-heap by start, then file order
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  uint64_t record_seq_ = 0;
  bool joined_any_ = false;
  uint64_t watermark_ = 0;  // no record may start, nor candidate enter, before it now
  bool inexact_ = false;
  Inexact why_ = Inexact::No;
  bool held_calls_pushed_ = false;  // max_held_calls joined records or passed the watermark early
  // The second pass. Positions count the race calls from the first, those
  // let go included: races_[i] is at races_base_ + i.
  std::vector<uint64_t> offs_;          // switch_offs
  std::deque<RaceCall> races_;          // those not let go
  uint64_t races_base_ = 0;
  size_t open_ = SIZE_MAX;              // the change to off the watermark is past last (offs_ index)
  uint64_t open_first_ = 0;             // the position of the first race call entered since it
  std::deque<Leftover> leftovers_;      // since open_, in start then file order
  size_t chain_end_ = 0;                // leftovers_[0, chain_end_) reach each other's calls
  uint64_t joined_ = 0, without_id_ = 0;
  uint64_t records_seen_ = 0;  // every record added, of every kind: the next one's index
  bool keep_settled_ = false;
  std::vector<SettledRecord> settled_;
  size_t held_chunks_ = 0;  // Held::chunks of the calls held, summed
};

}  // namespace cuxfer::model
