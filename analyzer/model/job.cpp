#include "analyzer/model/job.h"

#include <unordered_map>

#include "analyzer/symbolize/frame_filter.h"

namespace cuxfer::model {
namespace {

struct GpuSum {
  uint64_t ns = 0;
  uint32_t records = 0;
  trace::GpuRecordKind kind = trace::GpuRecordKind::Memcpy;
  bool claimed = false;
};

// correlation id -> summed GPU time of its copy/memset records.
std::unordered_map<uint32_t, GpuSum> index_gpu_records(const trace::Trace& t) {
  std::unordered_map<uint32_t, GpuSum> by_id;
  for (const auto& r : t.gpu_records) {
    auto kind = static_cast<trace::GpuRecordKind>(r.kind);
    if (r.correlation_id == 0 ||
        (kind != trace::GpuRecordKind::Memcpy && kind != trace::GpuRecordKind::Memset))
      continue;
    GpuSum& s = by_id[r.correlation_id];
    s.ns += r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
    s.records += 1;
    s.kind = kind;
  }
  return by_id;
}

bool gpu_kind_matches(trace::EventKind e, trace::GpuRecordKind g) {
  return (e == trace::EventKind::Copy && g == trace::GpuRecordKind::Memcpy) ||
         (e == trace::EventKind::Memset && g == trace::GpuRecordKind::Memset);
}

// Resolves every captured stack of one process and maps trace call-site ids to
// job sites; stacks whose user frame is the same address share a site.
std::unordered_map<uint32_t, uint32_t> build_sites(uint32_t process_index, const trace::Trace& t,
                                                   symbolize::Symbolizer& symbolizer,
                                                   std::vector<Site>& sites) {
  std::unordered_map<uint32_t, uint32_t> site_of_id;
  std::unordered_map<uint64_t, uint32_t> site_of_address;
  for (const auto& cs : t.callsites) {
    if (cs.frames.empty() || site_of_id.count(cs.id)) continue;
    Site site;
    site.process = process_index;
    site.stack.reserve(cs.frames.size());
    for (uint64_t addr : cs.frames) site.stack.push_back(symbolizer.resolve(t.modules, addr));
    site.frame = site.stack[symbolize::choose_user_frame(site.stack)];
    auto [it, inserted] =
        site_of_address.try_emplace(site.frame.address, static_cast<uint32_t>(sites.size()));
    if (inserted) sites.push_back(std::move(site));
    site_of_id[cs.id] = it->second;
  }
  return site_of_id;
}

}  // namespace

Job build_job(std::vector<trace::Trace> traces, symbolize::Symbolizer& symbolizer) {
  Job job;
  job.processes.reserve(traces.size());
  size_t total_events = 0;
  for (auto& t : traces) {
    total_events += t.events.size();
    Process p;
    p.trace = std::move(t);
    p.gpu_timing = p.trace.has_status && p.trace.status.cupti == trace::CuptiState::Active;
    job.processes.push_back(std::move(p));
  }
  job.calls.reserve(total_events);

  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) {
    Process& p = job.processes[pi];
    auto site_of_id = build_sites(pi, p.trace, symbolizer, job.sites);
    auto gpu = p.gpu_timing ? index_gpu_records(p.trace) : std::unordered_map<uint32_t, GpuSum>{};
    for (const auto& e : p.trace.events) {
      Call c;
      c.event = &e;
      c.process = pi;
      c.cls = classify(e);
      if (e.callsite_id != 0)
        if (auto it = site_of_id.find(e.callsite_id); it != site_of_id.end()) c.site = it->second;
      if (!gpu.empty() && e.correlation_id != 0) {
        auto it = gpu.find(e.correlation_id);
        if (it != gpu.end() && !it->second.claimed && gpu_kind_matches(c.kind(), it->second.kind)) {
          c.gpu_ns = it->second.ns;
          c.gpu_records = it->second.records;
          it->second.claimed = true;
        }
      }
      if (p.gpu_timing && (e.flags & trace::kFlagGpuExpected) && !c.has_gpu_time() && !c.failed())
        ++p.events_without_gpu;
      job.calls.push_back(c);
    }
    for (const auto& [id, s] : gpu)
      if (!s.claimed) p.gpu_records_unmatched += s.records;
  }
  job.notes = symbolizer.notes();
  return job;
}

std::vector<trace::Trace> read_traces(const std::vector<std::string>& paths,
                                      std::vector<std::string>& errors) {
  std::vector<trace::Trace> traces;
  for (const auto& path : paths) {
    trace::Trace t;
    std::string error;
    if (trace::read_trace(path, t, error) != trace::ReadStatus::Ok) {
      errors.push_back(error);
      continue;
    }
    traces.push_back(std::move(t));
  }
  return traces;
}

}  // namespace cuxfer::model
