#include "analyzer/analyses/report.h"
#include "analyzer/analyses/duplicates.h"
#include "analyzer/analyses/overlap.h"
#include "analyzer/analyses/tally.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace cuxfer::analyses {

const char* finding_kind_name(FindingKind k) {
  switch (k) {
    case FindingKind::AsyncPageable: return "async_pageable";
    case FindingKind::LargePageable: return "large_pageable";
    case FindingKind::TinyStorm: return "tiny_storm";
    case FindingKind::RewriteCandidates: return "rewrite_candidates";
    case FindingKind::SyncCopyIdle: return "sync_copy_idle";
    case FindingKind::DuplicateUploads: return "duplicate_uploads";
    case FindingKind::RoundTrips: return "round_trips";
    case FindingKind::ManagedMigrations: return "managed_migrations";
  }
  return "?";
}

bool parse_finding_kind(std::string_view name, FindingKind& out) {
  for (FindingKind k : kAllFindingKinds)
    if (name == finding_kind_name(k)) {
      out = k;
      return true;
    }
  return false;
}
bool is_multiprocessing_helper(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--multiprocessing-fork") return true;
    if (argv[i] == "-c" && i + 1 < argv.size() && argv[i + 1].find("from multiprocessing") != std::string::npos)
      return true;
  }
  return false;
}

ReadExtent read_extent(const Report& r) {
  ReadExtent e;
  for (const auto& p : r.processes) {
    ++e.traces;
    e.events += p.events;
    if (!p.complete) {
      if (!e.first_cut) e.first_cut = &p;
      ++e.cut;
    }
  }
  return e;
}

const ProcessSummary* command_process(const std::vector<ProcessSummary>& ps) {
  std::set<uint32_t> pids;
  for (const auto& p : ps) pids.insert(p.pid);
  // Ranked: a root before a child, the command before a multiprocessing
  // helper, then the earlier to start recording.
  auto better = [&](const ProcessSummary& a, const ProcessSummary& b) {
    const bool a_root = !pids.count(a.ppid), b_root = !pids.count(b.ppid);
    if (a_root != b_root) return a_root;
    const bool a_helper = is_multiprocessing_helper(a.argv), b_helper = is_multiprocessing_helper(b.argv);
    if (a_helper != b_helper) return !a_helper;
    return a.start_realtime_ns < b.start_realtime_ns;
  };
  const ProcessSummary* best = nullptr;
  for (const auto& p : ps)
    if (!best || better(p, *best)) best = &p;
  return best;
}

namespace {
// The staged copies as they would run from memory pinned at the source
// (RewriteTotals::staged_if_pinned_ns says how it is estimated).
void estimate_pinned_at_source(RewriteTotals& rw, const Thresholds& t) {
  if (rw.staged_calls == 0) return;
  double ns = static_cast<double>(rw.staged_async_calls) * static_cast<double>(t.nominal_async_return_ns);
  for (int dir = 0; dir < 2; ++dir) {
    if (rw.staged_sync_calls[dir] == 0) continue;
    const uint64_t mean = rw.staged_sync_bytes[dir] / rw.staged_sync_calls[dir];
    const double gbps = t.profile ? t.profile->pinned_gbps(dir, mean) : t.nominal_pinned_gbps;
    if (gbps > 0) ns += static_cast<double>(rw.staged_sync_bytes[dir]) / gbps;  // bytes / (GB/s) = ns
  }
  rw.staged_if_pinned_ns = static_cast<uint64_t>(ns);
  rw.pinned_basis = t.profile ? "this machine's profile" : fmt::format("nominal {:.0f} GB/s", t.nominal_pinned_gbps);
}
}  // namespace

Report analyze(const model::Job& job, const Thresholds& thresholds) {
  // One pass over the calls for every part (tally.h says why).
  JobTally tally = tally_calls(job, thresholds);
  return analyze_tally(job, tally, thresholds, true);
}

Report analyze_tally(const model::Job& job, JobTally& tally, const Thresholds& thresholds, bool events) {
  Report r;
  r.processes = process_summaries(job, tally);
  for (const auto& p : r.processes) r.simulated |= p.simulated;
  r.timing = job_timing(job, tally);
  if (const ProcessSummary* root = command_process(r.processes)) {
    r.program = root->exe;
    r.argv = root->argv;
  }

  uint64_t start = UINT64_MAX, end = 0;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const model::Process& p = job.processes[i];
    if (!p.trace.has_process) continue;
    start = std::min(start, p.trace.process.start_realtime_ns);
    end = std::max(end, tally.processes[i].last_end_realtime_ns);
  }
  if (start != UINT64_MAX) {
    r.start_realtime_ns = start;
    r.span_ns = end > start ? end - start : 0;
  }

  r.totals = tally.copies;
  r.classes = class_totals(tally);
  r.memsets = tally.memsets;
  r.allocations = tally.allocations;
  r.apis = api_totals(job, tally);
  r.pageable_share = tally.pageable;
  r.rewrite = rewrite_totals(job, tally);
  estimate_pinned_at_source(r.rewrite, thresholds);
  r.calls_without_site = tally.calls_without_site;
  r.callsites = callsite_totals(job, tally);
  r.locations = location_totals(r.callsites, tally);
  using FindingsOf = std::vector<Finding> (*)(const JobTally&, const Thresholds&);
  for (FindingsOf find : {FindingsOf{find_async_pageable}, FindingsOf{find_large_pageable},
                          FindingsOf{find_tiny_storm}})
    for (auto& f : find(tally, thresholds)) r.findings.push_back(std::move(f));
  for (auto& f : find_rewrite_candidates(tally, thresholds)) r.findings.push_back(std::move(f));
  r.devices = device_totals(job, tally);
  r.peer_pairs = peer_pairs(job, tally);
  // Overlap and sync_copy_idle: the tally's sums (overlap.h), whichever way
  // the job was read.
  r.overlap = overlap_of(tally);
  for (auto& f : find_sync_copy_idle(tally)) r.findings.push_back(std::move(f));
  // duplicate_uploads and round_trips: from the job's copies, or from the
  // sums of a streamed job's or a summary's (analyses/stream.h, summary.h).
  for (auto& f :
       events ? find_duplicates_and_round_trips(job, thresholds) : repeated_copy_findings(tally.findings))
    r.findings.push_back(std::move(f));
  if (events) {
    r.managed = managed_totals(job);
    for (auto& f : find_managed_migrations(job, r.managed, thresholds)) r.findings.push_back(std::move(f));
  } else if (tally.managed) {
    r.managed = managed_of(job, *tally.managed);
    for (auto& f : managed_migration_findings(job, *tally.managed, r.managed, thresholds))
      r.findings.push_back(std::move(f));
  }
  std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) {
    uint64_t ka = a.estimated_recoverable_ns.value_or(a.time_ns);
    uint64_t kb = b.estimated_recoverable_ns.value_or(b.time_ns);
    return ka > kb;
  });

  for (auto& f : r.findings) f.locations = finding_locations(f, r.locations);
  r.combined_estimate = combine_estimates(r.findings);
  r.ranks = rank_totals(job, tally, r.findings, r.locations);
  r.ranges = range_totals(job, tally, r.findings);

  r.notes = job.notes;
  if (auto note = copies_without_python_note(tally)) r.notes.push_back(std::move(*note));
  uint64_t sites_dropped = 0;
  for (const auto& p : r.processes) sites_dropped += p.callsites_dropped;
  if (r.calls_without_site > 0)
    r.notes.push_back(fmt::format("{} cop{} had no captured call site{}", r.calls_without_site,
                                  r.calls_without_site == 1 ? "y" : "ies",
                                  sites_dropped ? " (the shim's call-site table was full)" : ""));
  return r;
}

std::optional<CombinedEstimate> combine_estimates(const std::vector<Finding>& findings) {
  struct Site {
    uint64_t recoverable = 0, time = 0;
  };
  std::map<uint64_t, Site> sites;  // call site, or a finding that names none with an estimate
  CombinedEstimate c;
  uint64_t own_key = uint64_t{1} << 32;  // past every call-site id
  for (const Finding& f : findings) {
    if (!f.estimated_recoverable_ns) continue;
    ++c.findings;
    c.sum_ns += *f.estimated_recoverable_ns;
    bool per_site = false;
    for (const FindingSite& s : f.sites) {
      if (!s.estimated_recoverable_ns) continue;
      per_site = true;
      Site& x = sites[s.callsite];
      x.recoverable = std::max(x.recoverable, *s.estimated_recoverable_ns);
      x.time = std::max(x.time, s.time_ns);
    }
    if (!per_site) sites[own_key++] = {*f.estimated_recoverable_ns, std::max(f.time_ns, *f.estimated_recoverable_ns)};
  }
  if (c.findings < 2) return std::nullopt;
  for (const auto& [key, x] : sites) c.recoverable_ns += std::min(x.recoverable, x.time);
  return c;
}

}  // namespace cuxfer::analyses
