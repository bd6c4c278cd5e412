#include "analyzer/analyses/stream.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <type_traits>

#include <fmt/format.h>

#include "analyzer/analyses/overlap.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/model/gpu_join.h"

namespace cuxfer::analyses {
namespace {

// The job of one process of the frame, as summarize builds it: the process
// and its own sites (numbered from 0), no calls.
model::Job one_process_job(const model::Job& frame, uint32_t process) {
  model::Job job;
  job.processes.push_back(frame.processes[process]);
  const uint32_t first = frame.processes[process].first_site;
  for (size_t i = first; i < frame.sites.size() && frame.sites[i].process == process; ++i) {
    job.sites.push_back(frame.sites[i]);
    job.sites.back().process = 0;
  }
  return job;
}

// A content fingerprint of the shim's (build_job keeps it among the shim's calls).
bool is_fingerprint(const trace::Event& e, bool shim) {
  return shim && e.kind == static_cast<uint8_t>(trace::EventKind::Fingerprint);
}

// Reads the events of process `process` of the frame again, a block at a
// time, and hands each block to `use`, and each block of GPU records, in
// file order among them, to `use_records` (null: they are let go unread),
// either of which returns false to stop. False when stopped, or when the
// trace reads differently from the first time (a block only decompression
// finds corrupt, a file still growing): the frame's call sites and notes
// would not be those of the events.
template <typename Use, typename UseRecords = std::nullptr_t>
bool read_events(const model::Job& frame, uint32_t process, Use use, UseRecords use_records = nullptr) {
  trace::EventBlocks blocks;
  bool stopped = false;
  blocks.sink = [&](std::span<trace::Event> events) { return !(stopped = !use(events)); };
  if constexpr (std::is_same_v<UseRecords, std::nullptr_t>)
    blocks.skip_gpu_records = true;
  else
    blocks.gpu_sink = [&](std::span<trace::GpuRecord> records) { return !(stopped = !use_records(records)); };
  const trace::Trace& first = frame.processes[process].trace;
  trace::Trace again;
  std::string error;
  return trace::read_trace(first.path, again, error, blocks) == trace::ReadStatus::Ok && !stopped &&
         again.blocks_read == first.blocks_read && again.cut_reason == first.cut_reason &&
         again.complete == first.complete;
}

// The kernels' extents of process `process` of the frame (overlap.h): its
// GPU records read again, its events passed by. False when the trace reads
// differently from the first time.
bool read_kernel_extents(const model::Job& frame, uint32_t process, KernelExtents& out) {
  trace::EventBlocks blocks;
  blocks.skip = true;
  blocks.gpu_sink = [&](std::span<trace::GpuRecord> records) {
    add_kernel_extents(out, records);
    return true;
  };
  const trace::Trace& first = frame.processes[process].trace;
  trace::Trace again;
  std::string error;
  return trace::read_trace(first.path, again, error, blocks) == trace::ReadStatus::Ok &&
         again.blocks_read == first.blocks_read && again.cut_reason == first.cut_reason &&
         again.complete == first.complete;
}

// Whether the calls of process `p` get GPU time from records read with them
// (unified-memory and kernel records join no call).
bool joins_records(const model::Process& p) {
  const trace::Trace::GpuRecordCount& n = p.trace.gpu_records_passed;
  return p.gpu_timing && n.records > n.not_joined_by_time + n.unified_memory + n.kernels;
}

// The calls of `calls` that `only` keeps (their ranges, parallel, in
// `ranges`: empty where the process recorded none), into `kept`, and their
// ranges into `kept_ranges` if given.
void select_calls(const CallSelection& only, std::span<const model::Call> calls, std::span<const uint32_t> ranges,
                  std::vector<model::Call>& kept, std::vector<uint32_t>* kept_ranges) {
  kept.clear();
  if (kept_ranges) kept_ranges->clear();
  for (size_t i = 0; i < calls.size(); ++i) {
    const uint32_t range = i < ranges.size() ? ranges[i] : model::kNoRange;
    if (!only.keeps(range)) continue;
    kept.push_back(calls[i]);
    if (kept_ranges) kept_ranges->push_back(range);
  }
}

// What takes a process's GPU records as they are read, beside the join:
// ManagedFeed the unified-memory records (and the managed allocations among
// the calls), KernelOverlapFeed the kernel records, KernelExtents the
// kernels' extents (a first pass). Each is optional. `only`, if given,
// chooses the calls ManagedFeed is fed (--range: the kept calls' allocations).
struct RecordFeeds {
  ManagedFeed* managed = nullptr;
  KernelOverlapFeed* kernels = nullptr;
  KernelExtents* extents = nullptr;
  const CallSelection* only = nullptr;
  std::vector<model::Call> kept;  // scratch: the calls `only` keeps

  // Whether a read must hand over the process's records for these feeds.
  bool want_records(const model::Process& p) const {
    const trace::Trace::GpuRecordCount& n = p.trace.gpu_records_passed;
    return (managed && n.unified_memory > 0) || ((kernels || extents) && n.kernels > 0);
  }
  // False where a feed turned inexact: the read stops there.
  // `ranges`: the calls' range stacks, parallel (empty: none recorded).
  bool add_calls(std::span<const model::Call> calls, std::span<const uint32_t> ranges) {
    if (!managed) return ok();
    if (only) {
      select_calls(*only, calls, ranges, kept, nullptr);
      managed->add_calls(kept);
    } else {
      managed->add_calls(calls);
    }
    return ok();
  }
  bool add_records(std::span<const trace::GpuRecord> records) {
    if (managed) managed->add_records(records);
    if (kernels) kernels->add_kernels(records);
    if (extents) add_kernel_extents(*extents, records);
    return ok();
  }
  bool ok() const { return !(managed && managed->inexact()) && !(kernels && kernels->inexact()); }
};

// What reading a process's calls with their GPU time found beside the calls.
struct CallsRead {
  bool ok = false;
  std::optional<std::string> managed_inexact;  // ManagedFeed::inexact(): the read stopped there
  bool inexact = false;  // the join could not be made in its window
  model::StreamedGpuJoin::Inexact why_inexact = model::StreamedGpuJoin::Inexact::No;
  uint64_t joined = 0, without_id = 0;
};

// The calls of process `process` of the frame (made by `feed`), with the GPU
// time build_job joins to them, a block at a time in trace order:
// use(calls, shim_calls, call_ranges) returns false to stop; `call_ranges`
// holds each call's NVTX range stack (Job::ranges index, or kNoRange), or is
// empty where the process recorded no range. The join holds calls back until
// no later record can reach them (model::StreamedGpuJoin), and hands them out
// in trace order: their ranges wait beside them, in the same order.
// `feeds` are fed the managed allocations as their events are read and the
// GPU records as theirs are (file order, which is what tells whether a
// feed's result is the whole job's); the read stops where one turns
// inexact. `use_records`, if given, takes the process's GPU records, every
// one, as the join settles them (model::StreamedGpuJoin::SettledRecord:
// which call's class each joined); where the calls join none, each as it is read.
using SettledRecords = std::span<const model::StreamedGpuJoin::SettledRecord>;
template <typename Use, typename UseRecords = std::nullptr_t>
CallsRead read_calls(const model::Job& frame, uint32_t process, model::CallFeed& feed, Use use,
                     RecordFeeds feeds = {}, UseRecords use_records = nullptr) {
  constexpr bool wants_records = !std::is_same_v<UseRecords, std::nullptr_t>;
  CallsRead out;
  std::vector<model::Call> calls, shim_calls, ready;
  std::vector<uint32_t> ranges, ready_ranges;
  std::vector<model::StreamedGpuJoin::SettledRecord> settled;
  auto feed_calls = [&] { return feeds.add_calls(calls, ranges); };
  auto feed_records = [&](std::span<const trace::GpuRecord> records) { return feeds.add_records(records); };
  auto say_managed = [&] {
    if (feeds.managed && feeds.managed->inexact()) out.managed_inexact = feeds.managed->inexact();
  };
  if (!joins_records(frame.processes[process])) {
    auto use_events = [&](std::span<trace::Event> events) {
      feed.add(events, calls, shim_calls, &ranges);
      return feed_calls() && use(calls, shim_calls, ranges);
    };
    if constexpr (wants_records) {
      // Records build_job joins to no call (no GPU timing): each settled as read.
      uint64_t next = 0;
      out.ok = read_events(frame, process, use_events, [&](std::span<trace::GpuRecord> records) {
        if (!feed_records(records)) return false;
        settled.clear();
        for (const trace::GpuRecord& r : records) settled.push_back({next++, r, std::nullopt});
        use_records(SettledRecords(settled));
        return true;
      });
    } else if (feeds.want_records(frame.processes[process])) {
      out.ok = read_events(frame, process, use_events, feed_records);
    } else {
      out.ok = read_events(frame, process, use_events);
    }
    say_managed();
    return out;
  }
  model::StreamedGpuJoin join(frame.processes[process], {});
  if constexpr (wants_records) join.keep_settled_records();
  // The records the join settled since last asked.
  auto take_settled = [&] {
    if constexpr (wants_records) {
      join.take_settled(settled);
      if (!join.inexact()) use_records(SettledRecords(settled));
    }
  };
  std::deque<uint32_t> held_ranges;  // of the calls the join holds, in trace order
  // The ranges of the calls just handed out (the first ready.size() held).
  auto take_ranges = [&] {
    ready_ranges.clear();
    if (!feed.has_ranges()) return;
    const auto n = static_cast<std::ptrdiff_t>(std::min(ready.size(), held_ranges.size()));
    ready_ranges.assign(held_ranges.begin(), held_ranges.begin() + n);
    held_ranges.erase(held_ranges.begin(), held_ranges.begin() + n);
  };
  const std::vector<model::Call> none;
  bool read = read_events(
      frame, process,
      [&](std::span<trace::Event> events) {
        feed.add(events, calls, shim_calls, &ranges);
        if (!feed_calls()) return false;
        join.add_calls(calls);
        held_ranges.insert(held_ranges.end(), ranges.begin(), ranges.end());
        join.take_ready(ready);
        take_ranges();
        take_settled();
        return !join.inexact() && use(ready, shim_calls, ready_ranges);
      },
      [&](std::span<trace::GpuRecord> records) {
        if (!feed_records(records)) return false;
        join.add_records(records);
        join.take_ready(ready);
        take_ranges();
        take_settled();
        return !join.inexact() && use(ready, none, ready_ranges);
      });
  if (read) {
    join.finish(ready);
    take_ranges();
    take_settled();
    read = !join.inexact() && use(ready, none, ready_ranges);
  }
  out.ok = read;
  say_managed();
  out.inexact = join.inexact();
  out.why_inexact = join.why_inexact();
  out.joined = join.joined();
  out.without_id = join.records_without_id();
  return out;
}

// Said, once per trace, when a process's GPU records could not be joined in
// the stream's window: the report is then made holding the events (same
// bytes, more memory).
std::string join_window_note(const model::Process& p, model::StreamedGpuJoin::Inexact why) {
  using Inexact = model::StreamedGpuJoin::Inexact;
  const model::StreamedGpuJoin::Window window;
  std::string reason;
  switch (why) {
    case Inexact::RecordLate:
      reason = "a GPU record starts before one already joined: its records lie too far from their calls";
      break;
    case Inexact::CallLate:
      reason = "a copy enters before a GPU record already joined: its records lie too far from their calls";
      break;
    case Inexact::HeldCalls:
      reason = fmt::format("more than {} calls wait for the GPU records that may join them", window.max_held_calls);
      break;
    case Inexact::WaitingRecords:
      reason = "too many GPU records wait to be joined";
      break;
    case Inexact::Governor:
      reason = fmt::format(
          "more than {} calls, or GPU records no flagged copy took, wait for the second pass that may join such "
          "records to copies made since the CUPTI governor last turned its records off",
          window.max_held_calls);
      break;
    case Inexact::HeldChunks:
      reason = fmt::format("more than {} GPU records of staged copies wait for their copies' last chunks",
                           window.max_held_calls);
      break;
    case Inexact::CorrelationId:
      reason = "GPU records carry correlation ids";
      break;
    case Inexact::No:
      reason = "its GPU records cannot be joined a block at a time";
      break;
  }
  return fmt::format(
      "{} (pid {}): {}; the report is made holding the events (the same report; memory grows with them)",
      p.trace.path, p.pid(), reason);
}

// Said, once per trace, when its unified-memory records could not be
// attributed as they were read (ManagedFeed::inexact), or its kernel records
// not measured against its copies (KernelOverlapFeed::inexact).
std::string read_whole_note(const model::Process& p, const std::string& why) {
  return fmt::format(
      "{} (pid {}): {}; the report is made holding the events (the same report; memory grows with them)",
      p.trace.path, p.pid(), why);
}

// Keeps a pass's per-copy finding inputs compact (compact_finding_inputs):
// once they have doubled since the last compaction, and hold at least 65,536
// entries. Memory then holds their distinct entries (and no more than twice
// as many), not one per copy, and each entry is sorted a logarithmic number
// of times. With the references known (a report) the lists stay empty.
class FindingInputsCompactor {
 public:
  void now_and_then(FindingsTally& f) {
    if (entries(f) < next_) return;
    compact_finding_inputs(f);
    next_ = std::max(kAtLeast, 2 * entries(f));
  }

 private:
  static constexpr size_t kAtLeast = size_t{1} << 16;
  static size_t entries(const FindingsTally& f) {
    return f.async_pageable.size() + f.large_pageable.size() + f.pinned_async_return_ns[0].size() +
           f.pinned_async_return_ns[1].size();
  }
  size_t next_ = kAtLeast;
};

bool pinned_or_registered(const model::TransferClass& c) {
  return c.memory == trace::MemKind::Pinned || c.memory == trace::MemKind::Registered;
}

}  // namespace

std::optional<std::string> needs_events(const trace::Trace& header) {
  // GPU records kept in memory (a read that did not pass them by), or of a
  // kind the stream does not join (model::calls_stream).
  if (!header.gpu_records.empty()) return "GPU records to join";
  if (header.gpu_records_passed.not_joined_by_time > 0) return "GPU records joined by correlation id";
  return std::nullopt;
}

std::optional<std::string> needs_events(const model::Job& frame) {
  for (const model::Process& p : frame.processes)
    if (auto why = needs_events(p.trace)) return why;
  return std::nullopt;
}

std::optional<FirstPass> stream_references(const model::Job& frame, uint32_t process, const Thresholds& t,
                                           std::string* why, const CallSelection* only) {
  FirstPass out;
  FindingsTally& f = out.references;
  // The kernels' extents, where the process recorded them (overlap.h).
  RecordFeeds feeds;
  if (kernels_recorded(frame.processes[process])) feeds.extents = &out.kernels;
  // The return times into the histogram (one entry per distinct time) now and then.
  auto compact_now_and_then = [&] {
    if (f.pinned_async_return_ns[0].size() + f.pinned_async_return_ns[1].size() > (size_t{1} << 16))
      compact_finding_inputs(f);
  };
  if (joins_records(frame.processes[process]) || only) {
    // The pinned copies' GPU times count: the calls are made and joined
    // (and their ranges replayed, for `only`).
    model::CallFeed feed(frame, process);
    std::vector<model::Call> kept;
    const CallsRead read = read_calls(frame, process, feed,
                                      [&](std::span<const model::Call> calls,
                                          std::span<const model::Call> shim, std::span<const uint32_t> ranges) {
                                        for (const model::Call& c : shim)
                                          if (is_fingerprint(*c.event, true))
                                            out.fingerprints.add(c.event->correlation_id, c.event->address,
                                                                 c.event->stream);
                                        if (only) select_calls(*only, calls, ranges, kept, nullptr);
                                        tally_references(f, only ? std::span<const model::Call>(kept) : calls, t);
                                        compact_now_and_then();
                                        return true;
                                      },
                                      feeds);
    if (read.inexact && why) *why = join_window_note(frame.processes[process], read.why_inexact);
    if (!read.ok) return std::nullopt;
    compact_finding_inputs(f);
    out.fingerprints.finish();
    return out;
  }
  // Only the pinned H2D/D2H copies count here: each event is looked at
  // without being made a call. (An event of impossible size is not bounded
  // here; the tally's pass finds it and the job is read whole.)
  const model::CallFeed feed(frame, process);
  auto use_events = [&](std::span<trace::Event> events) {
    for (const trace::Event& e : events) {
      const bool shim = feed.is_shim(e);
      if (is_fingerprint(e, shim)) out.fingerprints.add(e.correlation_id, e.address, e.stream);
      if (shim) continue;
      if (e.kind != static_cast<uint8_t>(trace::EventKind::Copy) || (e.flags & trace::kFlagFailed)) continue;
      model::Call c;
      c.event = &e;
      c.cls = model::classify(e);
      if (!model::crosses_host_link(c.cls.direction) || !pinned_or_registered(c.cls)) continue;
      tally_references(f, {&c, 1}, t);
    }
    compact_now_and_then();
    return true;
  };
  auto use_records = [&](std::span<trace::GpuRecord> records) { return feeds.add_records(records); };
  const bool read = feeds.want_records(frame.processes[process])
                        ? read_events(frame, process, use_events, use_records)
                        : read_events(frame, process, use_events);
  if (!read) return std::nullopt;
  compact_finding_inputs(f);
  out.fingerprints.finish();
  return out;
}

Thresholds::RunReferences job_references(const std::vector<FindingsTally>& inputs) {
  FindingsTally all;
  for (const FindingsTally& f : inputs)
    for (int dir = 0; dir < 2; ++dir) {
      for (const auto& [ns, count] : f.pinned_async_return_histogram[dir])
        all.pinned_async_return_histogram[dir][ns] += count;
      all.pinned_large_bytes[dir] += f.pinned_large_bytes[dir];
      all.pinned_large_ns[dir] += f.pinned_large_ns[dir];
    }
  return run_references(all);
}

std::optional<ProcessRecord> stream_process(const model::Job& frame, uint32_t process, const Thresholds& t,
                                            const Fingerprints* fingerprints, uint64_t& event_bytes,
                                            std::string* why, CopyPlots* plots,
                                            const KernelExtents* kernel_extents, CallSelection* only) {
  model::Job job = one_process_job(frame, process);
  // Copy/compute overlap, where the process recorded kernels (overlap.h):
  // its copies measured against its kernel records as both are read.
  std::optional<KernelOverlapFeed> overlap;
  if (kernels_recorded(frame.processes[process])) {
    KernelExtents extents;
    if (kernel_extents)
      extents = *kernel_extents;
    else if (frame.processes[process].trace.gpu_records_passed.kernels > 0 &&
             !read_kernel_extents(frame, process, extents))
      return std::nullopt;
    overlap.emplace(frame.processes[process].pid(), std::move(extents));
  }
  JobTally tally = start_tally(job, t);
  model::CallFeed feed(frame, process);
  model::Process& p = job.processes[0];
  std::optional<model::GateAccount> gate;
  if (p.gpu_timing) gate.emplace(p.trace);
  FindingInputsCompactor compactor;
  // The fingerprinted copies as the join hands them out (with their GPU
  // time), in trace order; mostly one per fingerprint.
  if (fingerprints && fingerprints->empty()) fingerprints = nullptr;
  std::vector<FingerprintedCopy> fingerprinted;
  if (fingerprints) fingerprinted.reserve(fingerprints->size());
  uint64_t plotted = 0;  // the calls handed to `plots`
  std::vector<model::Call> kept;  // the calls `only` keeps, and their ranges
  std::vector<uint32_t> kept_ranges;
  auto use = [&](std::span<const model::Call> calls, std::span<const model::Call> shim,
                 std::span<const uint32_t> call_ranges) {
    if (gate)
      for (const model::Call& c : calls) gate->add(c);
    if (only) {
      only->calls[process] += calls.size();
      select_calls(*only, calls, call_ranges, kept, &kept_ranges);
      only->kept[process] += kept.size();
      calls = kept;
      call_ranges = kept_ranges;
    }
    if (fingerprints)
      for (const model::Call& c : calls) add_fingerprinted_copy(c, *fingerprints, fingerprinted);
    tally_more(tally, job, calls, shim, t, call_ranges);
    if (plots) plots->add_calls(frame.processes[process], process, calls, plotted);
    compactor.now_and_then(tally.findings);
    if (overlap) overlap->add_copies(calls);
    return !overlap || !overlap->inexact();
  };
  // The timeline draws each GPU record, coloured by the class of the call it joined.
  auto plot_records = [&](SettledRecords records) {
    for (const auto& r : records)
      plots->timeline.add_record(frame.processes[process], process, r.record, r.index, r.joined);
  };
  ManagedFeed managed(0);
  const RecordFeeds feeds{&managed, overlap ? &*overlap : nullptr, nullptr, only};
  const CallsRead read = plots ? read_calls(frame, process, feed, use, feeds, plot_records)
                               : read_calls(frame, process, feed, use, feeds);
  if (read.inexact && why) *why = join_window_note(p, read.why_inexact);
  if (read.managed_inexact && why) *why = read_whole_note(p, *read.managed_inexact);
  if (overlap && overlap->inexact() && why) *why = read_whole_note(p, kernel_window_reason(overlap->why_inexact()));
  if (!read.ok || feed.impossible_note()) return std::nullopt;
  if (overlap) {
    overlap->finish_kernels();
    tally.overlap.kernels_recorded = true;
    overlap->take(tally.overlap.devices, tally.findings.sync_idle_sites);
  }
  if (fingerprints) add_repeated_copies(fingerprinted, *fingerprints, tally.findings);
  if (plots) plots->timeline.settle();
  finish_tally(tally);
  ProcessRecord r;
  if (gate) {
    // What build_job says of the join: the frame had no calls to join.
    p.events_without_gpu = 0;
    gate->finish(p);
    p.gpu_records_joined_by_time = read.joined;
    p.gpu_records_unmatched = read.without_id - read.joined;
    if (read.joined > 0) r.notes.push_back(model::joined_by_time_note(p.pid(), read.joined));
  }
  r.process = std::move(p);
  r.process.events_read = feed.events();
  r.sites = std::move(job.sites);
  r.tally = std::move(tally);
  managed.take(r.tally.managed.emplace());
  event_bytes = feed.bytes();
  return r;
}

std::optional<Fingerprints> stream_fingerprints(const model::Job& frame, uint32_t process) {
  Fingerprints prints;
  const model::CallFeed feed(frame, process);
  const bool read = read_events(frame, process, [&](std::span<trace::Event> events) {
    for (const trace::Event& e : events)
      if (is_fingerprint(e, feed.is_shim(e))) prints.add(e.correlation_id, e.address, e.stream);
    return true;
  });
  if (!read) return std::nullopt;
  prints.finish();
  return prints;
}

std::optional<ProcessRecord> summarize_streamed(const model::Job& frame) {
  if (frame.processes.size() != 1 || needs_events(frame)) return std::nullopt;
  const Thresholds t;  // a summary's: no machine profile, the references not known
  uint64_t event_bytes = 0;
  // The fingerprints first (a pass over the events alone), so that the
  // tally's pass sums the copies that repeat per site, as a report does.
  const std::optional<Fingerprints> prints = stream_fingerprints(frame, 0);
  if (!prints) return std::nullopt;
  std::optional<ProcessRecord> r = stream_process(frame, 0, t, &*prints, event_bytes);
  // build_job bounds the bytes of the job, here the one process's events.
  if (!r || event_bytes > model::kImpossibleJobBytes) return std::nullopt;
  compact_finding_inputs(r->tally.findings);
  // The notes as build_job puts them for one trace: the frame's (the
  // symbolizer's, then the process's own), then the join's.
  std::vector<std::string> notes = frame.notes;
  notes.insert(notes.end(), r->notes.begin(), r->notes.end());
  return make_record(std::move(r->process), std::move(r->sites), frame.ranges, std::move(notes),
                     std::move(r->tally));
}

std::optional<MergedJob> merge_streamed(const model::Job& frame, std::vector<ProcessRecord> records,
                                        const std::vector<uint64_t>& event_bytes, const Thresholds& t) {
  // build_job bounds the bytes of the whole job (model::kImpossibleJobBytes):
  // below it, no event of any process reached the bound.
  uint64_t sum = 0;
  for (uint64_t b : event_bytes) {
    if (b > model::kImpossibleJobBytes - sum) return std::nullopt;
    sum += b;
  }
  // The notes as build_job puts them: the symbolizer's first, then each
  // process's own (its frame's, then the join's) in process order.
  std::vector<std::string> notes;
  const size_t frame_own = frame.processes.empty() ? 0 : frame.processes.back().notes_end;
  const size_t symbols = frame.notes.size() - std::min(frame.notes.size(), frame_own);
  notes.assign(frame.notes.begin(), frame.notes.begin() + static_cast<std::ptrdiff_t>(symbols));
  size_t from = 0;
  for (size_t i = 0; i < records.size() && i < frame.processes.size(); ++i) {
    const size_t to = std::min<size_t>(frame.processes[i].notes_end, frame_own);
    for (size_t k = from; k < to; ++k) notes.push_back(frame.notes[symbols + k]);
    from = std::max(from, to);
    notes.insert(notes.end(), records[i].notes.begin(), records[i].notes.end());
  }
  for (size_t k = from; k < frame_own; ++k) notes.push_back(frame.notes[symbols + k]);
  MergedJob m = merge_records(std::move(records), MergeOrder::AsGiven);
  m.job.notes = std::move(notes);
  // The NVTX range stacks the tallies' ranges index (the frame's: build_job's of the job).
  m.job.ranges = frame.ranges;
  // The what-if's settings, which merge_records leaves as a summary's.
  RewriteTally settings;
  start_rewrite_whatif(settings, m.job, t);
  RewriteTally& rw = m.tally.rewrite;
  rw.profile = settings.profile;
  rw.threads = settings.threads;
  std::copy(std::begin(settings.stage_min), std::end(settings.stage_min), std::begin(rw.stage_min));
  rw.register_min = settings.register_min;
  rw.nominal_pinned_gbps = settings.nominal_pinned_gbps;
  rw.on = settings.on;
  return m;
}

}  // namespace cuxfer::analyses
