// Totals: per direction x memory kind, memsets, allocations, per API, the
// pageable share, per process. Failed calls are counted apart and never add
// bytes or time.
#include <algorithm>
#include <map>
#include <string_view>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

using trace::EventKind;

std::string class_name(const model::TransferClass& c) {
  return std::string(trace::to_string(c.direction)) + " " + trace::to_string(c.memory);
}

std::string job_timing(const model::Job& job) {
  bool any = false;
  std::vector<bool> has_copies(job.processes.size(), false);
  for (const auto& c : job.calls)
    if (c.kind() == EventKind::Copy) has_copies[c.process] = true;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    if (!has_copies[i]) continue;
    if (!job.processes[i].gpu_timing) return "cpu";
    any = true;
  }
  return any ? "gpu" : "cpu";
}

namespace {
// Calls, bytes and CPU-blocked time of every call of one kind; failed calls
// are counted apart and move no bytes.
Totals totals_of(const model::Job& job, EventKind kind) {
  Totals t;
  for (const auto& c : job.calls) {
    if (c.kind() != kind) continue;
    if (c.failed()) {
      ++t.failed_calls;
      continue;
    }
    ++t.calls;
    t.bytes += c.bytes();
    t.cpu_blocked_ns += c.cpu_ns();
  }
  return t;
}
}  // namespace

Totals copy_totals(const model::Job& job) { return totals_of(job, EventKind::Copy); }

std::vector<ClassTotals> class_totals(const model::Job& job) {
  struct Acc {
    ClassTotals out;
    uint64_t gpu_ns = 0;
    uint64_t cpu_measured_bytes = 0, cpu_measured_ns = 0;
  };
  std::map<std::pair<int, int>, Acc> by_class;
  for (const auto& c : job.calls) {
    if (c.kind() != EventKind::Copy) continue;
    Acc& a = by_class[{static_cast<int>(c.cls.direction), static_cast<int>(c.cls.memory)}];
    a.out.cls = c.cls;
    if (c.failed()) {
      ++a.out.failed_calls;
      continue;
    }
    ++a.out.calls;
    a.out.bytes += c.bytes();
    a.out.cpu_blocked_ns += c.cpu_ns();
    if (c.async()) ++a.out.async_calls;
    if (c.staged()) {
      ++a.out.staged_calls;
      a.out.staged_bytes += c.bytes();
    }
    if (c.has_gpu_time()) {
      ++a.out.gpu_calls;
      a.gpu_ns += c.gpu_ns;
    }
    if (model::cpu_time_measures_transfer(*c.event, c.cls)) {
      a.cpu_measured_bytes += c.bytes();
      a.cpu_measured_ns += c.cpu_ns();
    }
  }
  std::vector<ClassTotals> out;
  for (auto& [key, a] : by_class) {
    ClassTotals& t = a.out;
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

Totals memset_totals(const model::Job& job) { return totals_of(job, EventKind::Memset); }

Allocations allocation_totals(const model::Job& job) {
  Allocations a;
  for (const auto& c : job.calls) {
    if (c.failed()) continue;
    AllocTotals* slot = nullptr;
    bool is_free = false;
    switch (c.kind()) {
      case EventKind::DeviceAlloc:
        slot = &a.device;
        break;
      case EventKind::ManagedAlloc:
        slot = &a.managed;
        break;
      case EventKind::HostAlloc:
        slot = &a.host_pinned;
        break;
      case EventKind::HostRegister:
        slot = &a.host_registered;
        break;
      case EventKind::DeviceFree:
        slot = &a.device;
        is_free = true;
        break;
      case EventKind::HostFree:
        slot = &a.host_pinned;
        is_free = true;
        break;
      case EventKind::HostUnregister:
        slot = &a.host_registered;
        is_free = true;
        break;
      default:
        break;
    }
    if (!slot) continue;
    if (is_free) {
      ++slot->frees;
      continue;
    }
    ++slot->calls;
    slot->bytes += c.bytes();
    slot->cpu_blocked_ns += c.cpu_ns();
  }
  return a;
}

std::vector<ApiTotals> api_totals(const model::Job& job) {
  // Count per (process, API index) first: names are strings and there may be
  // millions of calls. Then merge by name across processes.
  std::vector<std::vector<ApiTotals>> per_process(job.processes.size());
  for (const auto& c : job.calls) {
    auto& table = per_process[c.process];
    if (c.event->api >= table.size()) table.resize(c.event->api + 1u);
    ApiTotals& t = table[c.event->api];
    if (c.failed()) {
      ++t.failed_calls;
      continue;
    }
    ++t.calls;
    t.bytes += c.bytes();
    t.cpu_blocked_ns += c.cpu_ns();
  }
  std::map<std::string, ApiTotals> by_name;
  for (size_t p = 0; p < per_process.size(); ++p)
    for (size_t api = 0; api < per_process[p].size(); ++api) {
      const ApiTotals& t = per_process[p][api];
      if (t.calls == 0 && t.failed_calls == 0) continue;
      std::string name = job.processes[p].trace.api_name(static_cast<uint16_t>(api));
      ApiTotals& out = by_name[name];
      out.name = name;
      out.calls += t.calls;
      out.failed_calls += t.failed_calls;
      out.bytes += t.bytes;
      out.cpu_blocked_ns += t.cpu_blocked_ns;
    }
  std::vector<ApiTotals> out;
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  std::stable_sort(out.begin(), out.end(), [](const ApiTotals& a, const ApiTotals& b) {
    return a.cpu_blocked_ns > b.cpu_blocked_ns;
  });
  return out;
}

PageableShare pageable_share(const model::Job& job) {
  PageableShare s;
  for (const auto& c : job.calls) {
    if (c.kind() != EventKind::Copy || c.failed() || !model::crosses_host_link(c.cls.direction)) continue;
    s.host_bytes += c.bytes();
    if (model::is_pageable(c.cls)) s.pageable_bytes += c.bytes();
  }
  s.fraction = s.host_bytes ? static_cast<double>(s.pageable_bytes) / s.host_bytes : 0.0;
  return s;
}

RewriteTotals rewrite_totals(const model::Job& job) {
  RewriteTotals r;
  // Per process: the rewrite was on there (its note, a staged or registered
  // copy, or a staging pool). Only there do pageable copies "pass through".
  std::vector<bool> on(job.processes.size(), false);
  for (size_t i = 0; i < job.processes.size(); ++i)
    for (const auto& note : job.processes[i].trace.notes)
      if (note.rfind(model::kRewritePinNote, 0) == 0) on[i] = true;
  for (const auto& c : job.calls)
    if (c.kind() == EventKind::Copy && (c.staged() || c.registered())) on[c.process] = true;
  for (const auto& c : job.shim_calls) {
    if (c.kind() != EventKind::HostRegister ||
        job.processes[c.process].trace.api_name(c.event->api) != std::string_view(model::kRegisterApi))
      continue;
    on[c.process] = true;
    r.registration_cost_ns += c.cpu_ns();
    if (c.failed()) {
      ++r.registrations_refused;
      continue;
    }
    ++r.registrations;
    r.registration_bytes += c.bytes();
  }
  for (const auto& c : job.shim_calls) {
    if (c.kind() != EventKind::HostAlloc || c.failed()) continue;
    if (job.processes[c.process].trace.api_name(c.event->api) != std::string_view(model::kStagingPoolApi))
      continue;
    on[c.process] = true;
    ++r.pool_allocations;
    r.pool_bytes += c.bytes();
    r.pinning_cost_ns += c.cpu_ns();
  }
  for (const auto& c : job.calls) {
    if (c.kind() != EventKind::Copy || c.failed() || !on[c.process]) continue;
    if (c.staged()) {
      ++r.staged_calls;
      r.staged_bytes += c.bytes();
    } else if (c.registered()) {
      ++r.registered_calls;
      r.registered_bytes += c.bytes();
    } else if (model::crosses_host_link(c.cls.direction) && model::is_pageable(c.cls)) {
      ++r.passthrough_pageable_calls;
      r.passthrough_pageable_bytes += c.bytes();
    }
  }
  for (bool b : on) r.active |= b;
  return r;
}

std::vector<ProcessSummary> process_summaries(const model::Job& job) {
  std::vector<ProcessSummary> out;
  for (const auto& p : job.processes) {
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
    s.simulated = t.has_status && t.status.simulated;
    s.events = t.events.size();
    s.events_dropped = t.status.events_dropped;
    s.gpu_records = t.gpu_records.size();
    s.gpu_records_dropped = t.status.gpu_records_dropped;
    s.callsites_dropped = t.status.callsites_dropped;
    s.gpu_records_unmatched = p.gpu_records_unmatched;
    s.gpu_records_joined_by_time = p.gpu_records_joined_by_time;
    s.events_without_gpu = p.events_without_gpu;
    s.notes = t.notes;
    out.push_back(std::move(s));
  }
  for (const auto& c : job.calls) {
    if (c.kind() != EventKind::Copy) continue;
    ProcessSummary& s = out[c.process];
    if (c.failed()) {
      ++s.failed_calls;
      continue;
    }
    ++s.copies;
    s.bytes += c.bytes();
    s.cpu_blocked_ns += c.cpu_ns();
  }
  return out;
}

}  // namespace cuxfer::analyses
