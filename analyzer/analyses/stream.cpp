#include "analyzer/analyses/stream.h"

#include <algorithm>

#include "analyzer/analyses/tally.h"

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

// An event whose report needs the whole job's events: a content fingerprint
// (duplicate_uploads, round_trips) or a managed allocation (managed memory).
bool event_needs_events(const trace::Event& e, bool shim) {
  if (shim) return e.kind == static_cast<uint8_t>(trace::EventKind::Fingerprint);
  return e.kind == static_cast<uint8_t>(trace::EventKind::ManagedAlloc) && !(e.flags & trace::kFlagFailed) &&
         e.address != 0;
}

// Reads the events of process `process` of the frame again, a block at a
// time, and hands each block to `use`, which returns false to stop. False
// when stopped, or when the trace reads differently from the first time (a
// block only decompression finds corrupt, a file still growing): the frame's
// call sites and notes would not be those of the events.
template <typename Use>
bool read_events(const model::Job& frame, uint32_t process, Use use) {
  trace::EventBlocks blocks;
  bool stopped = false;
  blocks.sink = [&](std::span<trace::Event> events) { return !(stopped = !use(events)); };
  const trace::Trace& first = frame.processes[process].trace;
  trace::Trace again;
  std::string error;
  return trace::read_trace(first.path, again, error, blocks) == trace::ReadStatus::Ok && !stopped &&
         again.blocks_read == first.blocks_read && again.cut_reason == first.cut_reason &&
         again.complete == first.complete;
}

bool pinned_or_registered(const model::TransferClass& c) {
  return c.memory == trace::MemKind::Pinned || c.memory == trace::MemKind::Registered;
}

}  // namespace

std::optional<std::string> needs_events(const trace::Trace& header) {
  if (!header.gpu_records.empty()) return "GPU records to join";
  if (header.has_status && header.status.cupti == trace::CuptiState::Active) return "GPU timing";
  if (!header.nvtx_names.empty()) return "NVTX ranges";
  if (!header.py_codes.empty()) return "Python frames";
  return std::nullopt;
}

std::optional<std::string> needs_events(const model::Job& frame) {
  for (const model::Process& p : frame.processes) {
    if (auto why = needs_events(p.trace)) return why;
    if (!model::calls_stream(p)) return "GPU records or NVTX ranges";
  }
  for (const model::Site& s : frame.sites)
    for (const auto& f : s.stack)
      if (f.python) return "Python frames";  // the note on copies without a Python line
  if (overlap_totals(frame).kernels_recorded) return "kernel records";
  const Managed m = managed_totals(frame);
  if (m.records_on || !m.unavailable.empty() || !m.sites.empty()) return "unified-memory records";
  return std::nullopt;
}

std::optional<FindingsTally> stream_references(const model::Job& frame, uint32_t process, const Thresholds& t) {
  // Only the pinned H2D/D2H copies count here: each event is looked at
  // without being made a call. (An event of impossible size is not bounded
  // here; the tally's pass finds it and the job is read whole.)
  FindingsTally f;
  const model::CallFeed feed(frame, process);
  const bool read = read_events(frame, process, [&](std::span<trace::Event> events) {
    for (const trace::Event& e : events) {
      const bool shim = feed.is_shim(e);
      if (event_needs_events(e, shim)) return false;
      if (shim || e.kind != static_cast<uint8_t>(trace::EventKind::Copy) || (e.flags & trace::kFlagFailed)) continue;
      model::Call c;
      c.event = &e;
      c.cls = model::classify(e);
      if (!model::crosses_host_link(c.cls.direction) || !pinned_or_registered(c.cls)) continue;
      tally_references(f, {&c, 1}, t);
    }
    // The return times into the histogram (one entry per distinct time) now and then.
    if (f.pinned_async_return_ns[0].size() + f.pinned_async_return_ns[1].size() > (size_t{1} << 16))
      compact_finding_inputs(f);
    return true;
  });
  if (!read) return std::nullopt;
  compact_finding_inputs(f);
  return f;
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
                                            uint64_t& event_bytes) {
  model::Job job = one_process_job(frame, process);
  JobTally tally = start_tally(job, t);
  model::CallFeed feed(frame, process);
  std::vector<model::Call> calls, shim_calls;
  const bool read = read_events(frame, process, [&](std::span<trace::Event> events) {
    feed.add(events, calls, shim_calls);
    tally_more(tally, job, calls, shim_calls, t);
    return true;
  });
  if (!read || feed.impossible_note()) return std::nullopt;
  finish_tally(tally);
  ProcessRecord r;
  r.process = std::move(job.processes[0]);
  r.process.events_read = feed.events();
  r.sites = std::move(job.sites);
  r.tally = std::move(tally);
  event_bytes = feed.bytes();
  return r;
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
  MergedJob m = merge_records(std::move(records), MergeOrder::AsGiven);
  m.job.notes = frame.notes;
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
