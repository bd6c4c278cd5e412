// Totals: per direction x memory kind, memsets, allocations, per API, the
// pageable share, per process. Failed calls are counted apart and never add
// bytes or time. All of them come from one pass over the calls
// (tally_calls), which also gathers the call-site table's and the findings'
// inputs (tally.h says why).
#include <algorithm>
#include <map>
#include <string_view>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/overlap.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

using trace::Direction;
using trace::EventKind;
using trace::MemKind;

std::string class_name(const model::TransferClass& c) {
  return std::string(trace::to_string(c.direction)) + " " + trace::to_string(c.memory);
}

namespace {

// Calls, bytes and CPU-blocked time; failed calls are counted apart and move
// no bytes.
// (Totals and ApiTotals share these four fields.)
template <typename T>
void add_to(T& t, const model::Call& c) {
  if (c.failed()) {
    ++t.failed_calls;
    return;
  }
  ++t.calls;
  t.bytes += c.bytes();
  t.cpu_blocked_ns += c.cpu_ns();
}

// The allocation table a successful call of this kind counts in, and whether
// it is a free; nullptr for calls that are no allocation.
AllocTotals* allocation_slot(Allocations& a, EventKind kind, bool* is_free) {
  *is_free = false;
  switch (kind) {
    case EventKind::DeviceAlloc: return &a.device;
    case EventKind::ManagedAlloc: return &a.managed;
    case EventKind::HostAlloc: return &a.host_pinned;
    case EventKind::HostRegister: return &a.host_registered;
    case EventKind::DeviceFree: *is_free = true; return &a.device;
    case EventKind::HostFree: *is_free = true; return &a.host_pinned;
    case EventKind::HostUnregister: *is_free = true; return &a.host_registered;
    default: return nullptr;
  }
}

void add_allocation(Allocations& a, const model::Call& c) {
  if (c.failed()) return;
  bool is_free = false;
  AllocTotals* slot = allocation_slot(a, c.kind(), &is_free);
  if (!slot) return;
  if (is_free) {
    ++slot->frees;
    return;
  }
  ++slot->calls;
  slot->bytes += c.bytes();
  slot->cpu_blocked_ns += c.cpu_ns();
}

void add_api(ProcessTally& p, const model::Call& c) {
  if (c.event->api >= p.apis.size()) p.apis.resize(c.event->api + 1u);
  add_to(p.apis[c.event->api], c);
}

// `measured`: model::cpu_time_measures_transfer() of the call, which the
// tally computes once per copy (it is out of line and three steps need it).
// Counters below add a 0/1 rather than branch where the condition changes
// from call to call (direction, memory kind, async): mispredicted branches
// were much of the pass's time on varied traces.
void add_class(ClassTally& a, const model::Call& c, bool measured) {
  a.seen = true;
  a.out.cls = c.cls;
  if (c.failed()) {
    ++a.out.failed_calls;
    return;
  }
  ++a.out.calls;
  a.out.bytes += c.bytes();
  a.out.cpu_blocked_ns += c.cpu_ns();
  a.out.async_calls += c.async();
  if (c.staged()) {
    ++a.out.staged_calls;
    a.out.staged_bytes += c.bytes();
  }
  if (c.has_gpu_time()) {
    ++a.out.gpu_calls;
    a.gpu_ns += c.gpu_ns;
  }
  a.cpu_measured_bytes += measured ? c.bytes() : 0;
  a.cpu_measured_ns += measured ? c.cpu_ns() : 0;
}

// A copy, for its process's summary and for what the rewrite did there.
void add_process_copy(ProcessTally& p, const model::Call& c) {
  p.has_copies = true;
  const bool mapped = c.event->src_kind == static_cast<uint8_t>(trace::MemKind::Mapped) ||
                      c.event->dst_kind == static_cast<uint8_t>(trace::MemKind::Mapped);
  if (c.staged() || c.registered() || mapped) p.rewrote = true;
  if (c.failed()) {
    ++p.failed_copies;
    return;
  }
  ++p.copies;
  p.bytes += c.bytes();
  p.cpu_blocked_ns += c.cpu_ns();
  ProcessTally::ClassCount& k = p.classes[class_index(c.cls)];
  ++k.calls;
  k.bytes += c.bytes();
  k.cpu_blocked_ns += c.cpu_ns();
  p.pageable_bytes += model::crosses_host_link(c.cls.direction) && model::is_pageable(c.cls) ? c.bytes() : 0;
  if (c.has_gpu_time()) {
    p.has_gpu = true;
    p.gpu_ns += c.gpu_ns;
  }
  if (mapped) {
    ++p.zero_copy_calls;
    p.zero_copy_bytes += c.bytes();
  } else if (c.staged()) {
    ++p.staged_calls;
    p.staged_bytes += c.bytes();
    p.staged_cpu_ns += c.cpu_ns();
    if (c.async()) {
      ++p.staged_async_calls;
    } else {
      const int dir = c.cls.direction == Direction::DtoH ? 1 : 0;
      p.staged_sync_bytes[dir] += c.bytes();
      ++p.staged_sync_calls[dir];
    }
  } else if (c.registered()) {
    ++p.registered_calls;
    p.registered_bytes += c.bytes();
  } else {
    const bool passthrough = model::crosses_host_link(c.cls.direction) && model::is_pageable(c.cls);
    p.passthrough_pageable_calls += passthrough;
    p.passthrough_pageable_bytes += passthrough ? c.bytes() : 0;
    if (passthrough) {
      const size_t why = std::min<size_t>(static_cast<size_t>(c.passthrough()), trace::kPassthroughReasons);
      ReasonCount& n = p.passthrough_reasons[why][c.cls.direction == Direction::DtoH];
      ++n.calls;
      n.bytes += c.bytes();
    }
  }
}

void add_to_site(SiteTally& s, const model::Call& c) {
  s.used = true;
  if (c.failed()) {
    ++s.out.failed_calls;
    return;
  }
  ++s.out.calls;
  s.out.bytes += c.bytes();
  s.out.cpu_blocked_ns += c.cpu_ns();
  s.out.max_cpu_ns = std::max(s.out.max_cpu_ns, c.cpu_ns());
  if (c.has_gpu_time()) s.out.gpu_ns = s.out.gpu_ns.value_or(0) + c.gpu_ns;
  const unsigned k = class_index(c.cls);
  s.classes_seen |= uint64_t{1} << k;
  s.class_bytes[k] += c.bytes();
  ++s.class_calls[k];
  if (c.staged()) {
    ++s.staged_calls;
    s.staged_bytes += c.bytes();
  }
}

void add_site_copy(JobTally& t, const model::Call& c) {
  if (c.site == model::kNoSite) {
    ++t.calls_without_site;
    add_to_site(t.processes[c.process].no_site, c);
    return;
  }
  add_to_site(t.sites[c.site], c);
}

bool pinned_or_registered(const model::TransferClass& c) {
  return c.memory == MemKind::Pinned || c.memory == MemKind::Registered;
}

// The references from a successful pinned or registered H2D/D2H copy: how
// fast pinned memory went in this run. The async return times are listed
// only while no pass before measured them (Thresholds::known).
void add_pinned_reference(FindingsTally& f, const model::Call& c, const Thresholds& t, bool measured) {
  const uint8_t dir = c.cls.direction == Direction::HtoD ? 0 : 1;
  if (c.async() && !t.known) f.pinned_async_return_ns[dir].push_back(c.cpu_ns());
  if (c.bytes() >= t.large_bytes) {
    if (c.has_gpu_time()) {
      f.pinned_large_bytes[dir] += c.bytes();
      f.pinned_large_ns[dir] += c.gpu_ns;
    } else if (measured) {
      f.pinned_large_bytes[dir] += c.bytes();
      f.pinned_large_ns[dir] += c.cpu_ns();
    }
  }
}

// What the findings need from one successful copy (findings.cpp uses it).
void add_finding_inputs(FindingsTally& f, const model::Call& c, const Thresholds& t, bool measured) {
  const uint32_t site_id = c.site == model::kNoSite ? 0 : c.site + 1;
  if (c.bytes() <= t.tiny_bytes && site_id != 0) {
    StormSite& s = f.storm[site_id];
    ++s.calls;
    s.bytes += c.bytes();
    s.time_ns += c.cpu_ns();
    s.max_ns = std::max(s.max_ns, c.cpu_ns());
    s.first_enter = std::min(s.first_enter, c.event->t_enter_ns);
    s.last_enter = std::max(s.last_enter, c.event->t_enter_ns);
  }
  if (!model::crosses_host_link(c.cls.direction)) return;
  const uint8_t dir = c.cls.direction == Direction::HtoD ? 0 : 1;
  if (pinned_or_registered(c.cls)) {
    add_pinned_reference(f, c, t, measured);
  } else if (model::is_pageable(c.cls)) {
    const AsyncPageableCopy async{site_id, dir, c.bytes(), c.cpu_ns()};
    const LargePageableCopy large{site_id, dir, c.has_gpu_time(), c.bytes(),
                                  c.has_gpu_time() ? c.gpu_ns : c.cpu_ns()};
    if (t.known) {
      if (c.async()) add_summed_async(f, async, t);
      if (c.bytes() >= t.large_bytes) add_summed_large(f, large, t);
      return;
    }
    if (c.async()) f.async_pageable.push_back(async);
    if (c.bytes() >= t.large_bytes) f.large_pageable.push_back(large);
  }
}

// One of the shim's own events (few: its registrations and pool allocations).
void add_shim_work(JobTally& tally, const model::Job& job, const model::Call& c) {
  ProcessTally& p = tally.processes[c.process];
  const std::string_view api = job.processes[c.process].trace.api_name(c.event->api);
  if (c.kind() == EventKind::HostRegister && api == model::kRegisterApi) {
    p.shim_rewrite = true;
    p.registration_cost_ns += c.cpu_ns();
    if (c.failed()) {
      ++p.registrations_refused;
      return;
    }
    ++p.registrations;
    p.registration_bytes += c.bytes();
  } else if (c.kind() == EventKind::HostAlloc && !c.failed() && api == model::kStagingPoolApi) {
    p.shim_rewrite = true;
    ++p.pool_allocations;
    p.pool_bytes += c.bytes();
    p.pinning_cost_ns += c.cpu_ns();
  }
}

// A copy with a call site in a process whose sites hold a Python frame
// (ProcessTally::python_sites).
void add_python_line_copy(ProcessTally& p, const model::Call& c, bool python_site) {
  ++p.python_site_copies;
  if (python_site) return;
  ++p.copies_without_python;
  p.bytes_without_python += c.bytes();
  p.thread_ids_without_python.insert(c.event->thread_id);
}

}  // namespace

namespace {

// The copies of calls that ran in an NVTX range, into `ranges`.
void add_range_copies(RangeTally& ranges, std::span<const model::Call> calls,
                      std::span<const uint32_t> call_ranges, const Thresholds& t) {
  // Consecutive copies mostly share range, site and class: one lookup for a run of them.
  RangeKey last;
  RangeCopies* at = nullptr;
  for (size_t i = 0; i < calls.size() && i < call_ranges.size(); ++i) {
    const model::Call& c = calls[i];
    if (call_ranges[i] == model::kNoRange || c.kind() != EventKind::Copy) continue;
    const RangeKey key{call_ranges[i], c.site, class_index(c.cls)};
    if (!at || !(key == last)) {
      at = &ranges[key];
      last = key;
    }
    RangeCopies& r = *at;
    if (c.failed()) {
      ++r.failed_calls;
      continue;
    }
    const uint64_t bytes = c.bytes();
    ++r.calls;
    r.bytes += bytes;
    r.cpu_blocked_ns += c.cpu_ns();
    if (c.has_gpu_time()) {
      r.gpu_ns += c.gpu_ns;
      ++r.gpu_calls;
    }
    r.async_calls += c.async();
    r.large_calls += bytes >= t.large_bytes;
    r.tiny_calls += bytes <= t.tiny_bytes;
  }
}

}  // namespace

void tally_references(FindingsTally& f, std::span<const model::Call> calls, const Thresholds& t) {
  for (const model::Call& c : calls)
    if (c.kind() == EventKind::Copy && !c.failed() && model::crosses_host_link(c.cls.direction) &&
        pinned_or_registered(c.cls))
      add_pinned_reference(f, c, t, model::cpu_time_measures_transfer(*c.event, c.cls));
}

JobTally start_tally(const model::Job& job, const Thresholds& t) {
  JobTally tally;
  tally.processes.resize(job.processes.size());
  for (size_t i = 0; i < job.processes.size(); ++i)
    tally.processes[i].apis.resize(job.processes[i].trace.api_names.size());
  tally.sites.resize(job.sites.size());
  tally.findings.storm.resize(job.sites.size() + 1);
  if (t.known) {
    tally.findings.async_sites.resize(job.sites.size() + 1);
    tally.findings.large_sites.resize(job.sites.size() + 1);
  }
  start_rewrite_whatif(tally.rewrite, job, t);
  tally.devices.by_process.resize(job.processes.size());
  // The sites whose stack holds a Python frame, and their processes: Python ran there.
  tally.python_site.assign(job.sites.size(), 0);
  for (size_t i = 0; i < job.sites.size(); ++i)
    for (const auto& f : job.sites[i].stack)
      if (f.python) {
        tally.python_site[i] = 1;
        tally.processes[job.sites[i].process].python_sites = true;
        break;
      }
  return tally;
}

void tally_more(JobTally& tally, const model::Job& job, std::span<const model::Call> calls,
                std::span<const model::Call> shim_calls, const Thresholds& t,
                std::span<const uint32_t> call_ranges) {
  if (!call_ranges.empty()) add_range_copies(tally.ranges, calls, call_ranges, t);
  for (const model::Call& c : calls) {
    const model::Process& process = job.processes[c.process];
    ProcessTally& p = tally.processes[c.process];
    if (process.trace.has_process)
      p.last_end_realtime_ns = std::max(p.last_end_realtime_ns, process.realtime_of(c.event->t_exit_ns));
    add_api(p, c);
    switch (c.kind()) {
      case EventKind::Copy: {
        const bool measured = model::cpu_time_measures_transfer(*c.event, c.cls);
        add_to(tally.copies, c);
        add_class(tally.classes[class_index(c.cls)], c, measured);
        add_process_copy(p, c);
        add_site_copy(tally, c);
        if (p.python_sites && c.site != model::kNoSite) add_python_line_copy(p, c, tally.python_site[c.site]);
        if (c.failed()) break;
        add_device_copy(tally.devices, c);
        const bool host = model::crosses_host_link(c.cls.direction);
        const bool pageable = host && model::is_pageable(c.cls);
        tally.pageable.host_bytes += host ? c.bytes() : 0;
        tally.pageable.pageable_bytes += pageable ? c.bytes() : 0;
        if (pageable) add_rewrite_copy(tally.rewrite, c, measured);
        add_finding_inputs(tally.findings, c, t, measured);
        break;
      }
      case EventKind::Memset:
        add_to(tally.memsets, c);
        break;
      default:
        add_allocation(tally.allocations, c);
        if (c.kind() == EventKind::DeviceAlloc && !c.failed() &&
            c.event->dst_kind == static_cast<uint8_t>(trace::MemKind::Mapped)) {
          ++p.zero_copy_allocations;
          p.zero_copy_allocation_bytes += c.bytes();
        }
        break;
    }
  }
  for (const model::Call& c : shim_calls) add_shim_work(tally, job, c);
}

void finish_tally(JobTally& tally) {
  for (ProcessTally& p : tally.processes) {
    // What a summary keeps is their number; a second finish keeps it too.
    if (p.thread_ids_without_python.empty()) continue;
    p.threads_without_python = p.thread_ids_without_python.size();
    p.thread_ids_without_python = {};
  }
  const PageableShare& s = tally.pageable;
  tally.pageable.fraction = s.host_bytes ? static_cast<double>(s.pageable_bytes) / s.host_bytes : 0.0;
}

JobTally tally_calls(const model::Job& job, const Thresholds& t) {
  JobTally tally = start_tally(job, t);
  {
    // Room for every call up front: no regrowth copies in the pass. Pages
    // beyond what is used are never touched, so this costs address space only.
    const size_t n = job.calls.size();
    tally.findings.async_pageable.reserve(n);
    tally.findings.large_pageable.reserve(n);
    tally.findings.pinned_async_return_ns[0].reserve(n);
    tally.findings.pinned_async_return_ns[1].reserve(n);
  }
  tally_more(tally, job, job.calls, job.shim_calls, t, job.call_ranges);
  tally_overlap(job, tally);
  finish_tally(tally);
  return tally;
}

std::string job_timing(const model::Job& job, const JobTally& tally) {
  bool any = false;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    if (!tally.processes[i].has_copies) continue;
    if (!job.processes[i].gpu_timing) return "cpu";
    any = true;
  }
  return any ? "gpu" : "cpu";
}

std::string job_timing(const model::Job& job) { return job_timing(job, tally_calls(job, {})); }

std::vector<ClassTotals> class_totals(const JobTally& tally) {
  std::vector<ClassTotals> out;
  for (const ClassTally& a : tally.classes) {  // (direction, memory) order
    if (!a.seen) continue;
    ClassTotals t = a.out;
    if (t.gpu_calls > 0) t.gpu_ns = a.gpu_ns;
    // GPU time when every call has it; otherwise CPU-blocked time, but only of
    // the calls for which it measures the transfer (not async pinned, not D2D).
    if (t.calls > 0 && t.gpu_calls == t.calls && a.gpu_ns > 0) {
      t.gbps = static_cast<double>(t.bytes) / static_cast<double>(a.gpu_ns);
      t.gbps_basis = "gpu";
    } else if (a.cpu_measured_ns > 0) {
      t.gbps = static_cast<double>(a.cpu_measured_bytes) / static_cast<double>(a.cpu_measured_ns);
      t.gbps_basis = "cpu";
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<ApiTotals> api_totals(const model::Job& job, const JobTally& tally) {
  // Counted per (process, API index): names are strings and there may be
  // millions of calls. Merged by name across processes here.
  std::map<std::string, ApiTotals> by_name;
  for (size_t p = 0; p < tally.processes.size(); ++p) {
    const auto& table = tally.processes[p].apis;
    for (size_t api = 0; api < table.size(); ++api) {
      const ApiTotals& t = table[api];
      if (t.calls == 0 && t.failed_calls == 0) continue;
      std::string name = job.processes[p].trace.api_name(static_cast<uint16_t>(api));
      ApiTotals& out = by_name[name];
      out.name = name;
      out.calls += t.calls;
      out.failed_calls += t.failed_calls;
      out.bytes += t.bytes;
      out.cpu_blocked_ns += t.cpu_blocked_ns;
    }
  }
  std::vector<ApiTotals> out;
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  std::stable_sort(out.begin(), out.end(), [](const ApiTotals& a, const ApiTotals& b) {
    return a.cpu_blocked_ns > b.cpu_blocked_ns;
  });
  return out;
}

RewriteTotals rewrite_totals(const model::Job& job, const JobTally& tally) {
  RewriteTotals r;
  // Per process: the rewrite was on there (its note, a staged or registered
  // copy, the shim's registrations or pool, a zero-copy allocation). Only
  // there do pageable copies "pass through".
  std::vector<bool> on(job.processes.size(), false);
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const ProcessTally& p = tally.processes[i];
    on[i] = p.rewrote || p.shim_rewrite || p.zero_copy_allocations > 0 || model::rewrite_any_on(job.processes[i].trace);
    r.registration_cost_ns += p.registration_cost_ns;
    r.registrations_refused += p.registrations_refused;
    r.registrations += p.registrations;
    r.registration_bytes += p.registration_bytes;
    r.pool_allocations += p.pool_allocations;
    r.pool_bytes += p.pool_bytes;
    r.pinning_cost_ns += p.pinning_cost_ns;
    r.zero_copy_allocations += p.zero_copy_allocations;
    r.zero_copy_allocation_bytes += p.zero_copy_allocation_bytes;
    if (!on[i]) continue;
    r.staged_calls += p.staged_calls;
    r.staged_bytes += p.staged_bytes;
    r.registered_calls += p.registered_calls;
    r.registered_bytes += p.registered_bytes;
    r.staged_cpu_ns += p.staged_cpu_ns;
    r.staged_async_calls += p.staged_async_calls;
    for (int dir = 0; dir < 2; ++dir) {
      r.staged_sync_bytes[dir] += p.staged_sync_bytes[dir];
      r.staged_sync_calls[dir] += p.staged_sync_calls[dir];
    }
    r.passthrough_pageable_calls += p.passthrough_pageable_calls;
    r.passthrough_pageable_bytes += p.passthrough_pageable_bytes;
    r.zero_copy_calls += p.zero_copy_calls;
    r.zero_copy_bytes += p.zero_copy_bytes;
  }
  for (bool b : on) r.active |= b;
  r.passthrough_reasons = passthrough_reasons(job, tally, on);
  return r;
}

std::vector<ProcessSummary> process_summaries(const model::Job& job, const JobTally& tally) {
  std::vector<ProcessSummary> out;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const model::Process& p = job.processes[i];
    const trace::Trace& t = p.trace;
    ProcessSummary s;
    s.pid = t.process.pid;
    s.ppid = t.process.ppid;
    s.exe = t.process.exe;
    s.argv = t.process.argv;
    s.hostname = t.process.hostname;
    s.trace_name = t.process.trace_name;
    s.cuxfer_version = t.process.cuxfer_version;
    s.stack_depth = t.process.stack_depth;
    s.start_realtime_ns = t.process.start_realtime_ns;
    s.trace_path = t.path;
    s.complete = t.complete;
    s.cut_reason = t.cut_reason;
    if (!t.has_status || t.status.cupti == trace::CuptiState::Unknown) {
      s.cupti_state = "unknown";
      s.cupti_reason = t.has_status ? t.status.cupti_reason : "the trace has no status block";
    } else {
      s.cupti_state = t.status.cupti == trace::CuptiState::Active ? "active" : "unavailable";
      s.cupti_reason = t.status.cupti_reason;
    }
    if (t.has_cupti_handover) {
      const uint64_t t0 = t.process.start_monotonic_ns;
      s.cupti_handover_s = t.cupti_handover.t_ns > t0 ? (t.cupti_handover.t_ns - t0) / 1e9 : 0.0;
      s.cupti_handover_reason = t.cupti_handover.reason;
    }
    s.simulated = t.has_status && t.status.simulated;
    s.events = p.events_read;
    s.events_dropped = t.status.events_dropped;
    s.gpu_records = p.gpu_records_read;
    s.gpu_records_dropped = t.status.gpu_records_dropped;
    s.callsites_dropped = t.status.callsites_dropped;
    s.gpu_records_unmatched = p.gpu_records_unmatched;
    s.gpu_records_joined_by_time = p.gpu_records_joined_by_time;
    s.events_without_gpu = p.events_without_gpu;
    s.cupti_gate = p.gate;
    s.notes = t.notes;
    const ProcessTally& pt = tally.processes[i];
    s.copies = pt.copies;
    s.bytes = pt.bytes;
    s.cpu_blocked_ns = pt.cpu_blocked_ns;
    s.failed_calls = pt.failed_copies;
    out.push_back(std::move(s));
  }
  return out;
}

// The parts on their own, each a pass of its own: analyze() uses the tally.
Totals copy_totals(const model::Job& job) { return tally_calls(job, {}).copies; }
std::vector<ClassTotals> class_totals(const model::Job& job) { return class_totals(tally_calls(job, {})); }
Totals memset_totals(const model::Job& job) { return tally_calls(job, {}).memsets; }
Allocations allocation_totals(const model::Job& job) { return tally_calls(job, {}).allocations; }
std::vector<ApiTotals> api_totals(const model::Job& job) { return api_totals(job, tally_calls(job, {})); }
PageableShare pageable_share(const model::Job& job) { return tally_calls(job, {}).pageable; }
RewriteTotals rewrite_totals(const model::Job& job) { return rewrite_totals(job, tally_calls(job, {})); }
std::vector<ProcessSummary> process_summaries(const model::Job& job) {
  return process_summaries(job, tally_calls(job, {}));
}

}  // namespace cuxfer::analyses
