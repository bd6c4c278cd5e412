#include "analyzer/analyses/report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace cuxfer::analyses {
namespace {

// The process whose parent is not in the job: the command the user ran.
// Among several (ranks started by a launcher we did not trace), the earliest.
const ProcessSummary* root_process(const std::vector<ProcessSummary>& ps) {
  std::set<uint32_t> pids;
  for (const auto& p : ps) pids.insert(p.pid);
  const ProcessSummary* root = nullptr;
  for (const auto& p : ps)
    if (!pids.count(p.ppid) && (!root || p.start_realtime_ns < root->start_realtime_ns)) root = &p;
  return root ? root : (ps.empty() ? nullptr : &ps.front());
}

}  // namespace

Report analyze(const model::Job& job, const Thresholds& thresholds) {
  Report r;
  r.processes = process_summaries(job);
  for (const auto& p : r.processes) r.simulated |= p.simulated;
  r.timing = job_timing(job);
  if (const ProcessSummary* root = root_process(r.processes)) {
    r.program = root->exe;
    r.argv = root->argv;
  }

  uint64_t start = UINT64_MAX, end = 0;
  for (const auto& p : job.processes)
    if (p.trace.has_process) start = std::min(start, p.trace.process.start_realtime_ns);
  for (const auto& c : job.calls) {
    const model::Process& p = job.processes[c.process];
    if (p.trace.has_process) end = std::max(end, p.realtime_of(c.event->t_exit_ns));
  }
  if (start != UINT64_MAX) {
    r.start_realtime_ns = start;
    r.span_ns = end > start ? end - start : 0;
  }

  r.totals = copy_totals(job);
  r.classes = class_totals(job);
  r.memsets = memset_totals(job);
  r.allocations = allocation_totals(job);
  r.apis = api_totals(job);
  r.pageable_share = pageable_share(job);
  r.rewrite = rewrite_totals(job);
  r.callsites = callsite_totals(job, &r.calls_without_site);
  for (auto* find : {&find_async_pageable, &find_large_pageable, &find_tiny_storm})
    for (auto& f : (*find)(job, thresholds)) r.findings.push_back(std::move(f));
  std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) {
    uint64_t ka = a.estimated_recoverable_ns.value_or(a.time_ns);
    uint64_t kb = b.estimated_recoverable_ns.value_or(b.time_ns);
    return ka > kb;
  });

  r.notes = job.notes;
  uint64_t sites_dropped = 0;
  for (const auto& p : r.processes) sites_dropped += p.callsites_dropped;
  if (r.calls_without_site > 0)
    r.notes.push_back(fmt::format("{} cop{} had no captured call site{}", r.calls_without_site,
                                  r.calls_without_site == 1 ? "y" : "ies",
                                  sites_dropped ? " (the shim's call-site table was full)" : ""));
  return r;
}

}  // namespace cuxfer::analyses
