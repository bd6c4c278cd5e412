#include "analyzer/check/verdicts.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "policy/site_matcher.h"

namespace cuxfer::check {

namespace {

using analyses::FindingKind;

// What one scope of the run measured.
struct Measured {
  uint64_t copies = 0, bytes = 0, cpu_blocked_ns = 0;
  std::vector<uint32_t> site_ids;  // report call-site ids (Scope::Site)
  uint64_t pageable_bytes = 0;     // Scope::Range
  std::vector<std::pair<FindingKind, uint64_t>> range_findings;  // Scope::Range: copies per finding
};

// Which site entry each report call site belongs to, by the policy's rule
// (policy/site_matcher.h): a native site is its build id + offset; a Python
// site is the entry of its file and function whose line is nearest (an entry
// without a function needs the exact line). -1: none.
std::vector<int> assign_sites(const Budget& budget, const CheckedRun& run) {
  std::vector<int> owner(run.report->callsites.size(), -1);
  for (size_t i = 0; i < owner.size() && i < run.site_names.size(); ++i) {
    if (!run.site_names[i]) continue;
    const policy::Site& name = *run.site_names[i];
    int best_distance = -1;
    for (size_t e = 0; e < budget.entries.size(); ++e) {
      const BudgetEntry& entry = budget.entries[e];
      if (entry.scope != Scope::Site || entry.site.python() != name.python()) continue;
      int distance;
      if (name.python()) {
        distance = policy::python_entry_distance(entry.site.python_file, entry.site.python_function,
                                                 entry.site.python_line,
                                                 {name.python_file, name.python_function, name.python_line});
      } else {
        distance = entry.site.build_id == name.build_id && entry.site.offset == name.offset ? 0 : -1;
      }
      if (distance >= 0 && (best_distance < 0 || distance < best_distance)) {
        best_distance = distance;
        owner[i] = static_cast<int>(e);
      }
    }
  }
  return owner;
}

// Copies a finding of `kind` counts at the given call sites (all sites when
// `sites` is null); a finding that counts none is still there: 1.
uint64_t finding_copies(const analyses::Report& report, FindingKind kind, const std::vector<uint32_t>* sites) {
  uint64_t total = 0;
  for (const analyses::Finding& f : report.findings) {
    if (f.kind != kind) continue;
    if (!sites) {
      total += std::max<uint64_t>(f.calls, 1);
      continue;
    }
    for (uint32_t id : f.callsites) {
      if (std::find(sites->begin(), sites->end(), id) == sites->end()) continue;
      uint64_t calls = 0;
      for (const analyses::FindingSite& s : f.sites)
        if (s.callsite == id) calls += s.calls;
      total += std::max<uint64_t>(calls, 1);
    }
  }
  return total;
}

uint64_t with_margin(uint64_t value, double percent) {
  const double extra = std::ceil(static_cast<double>(value) * percent / 100.0);
  return extra >= 1.8e19 - static_cast<double>(value) ? UINT64_MAX : value + static_cast<uint64_t>(extra);
}

}  // namespace

size_t CheckResult::violations() const {
  return static_cast<size_t>(std::count_if(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return !v.kept; }));
}

CheckResult check_budget(const Budget& budget, const CheckedRun& run) {
  const analyses::Report& report = *run.report;
  CheckResult out;
  std::vector<Measured> measured(budget.entries.size());
  const std::vector<int> owner = assign_sites(budget, run);
  for (size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] < 0) continue;
    const analyses::CallSiteTotals& cs = report.callsites[i];
    Measured& m = measured[static_cast<size_t>(owner[i])];
    m.copies += cs.calls;
    m.bytes += cs.bytes;
    m.cpu_blocked_ns += cs.cpu_blocked_ns;
    m.site_ids.push_back(cs.id);
  }
  for (uint32_t e = 0; e < budget.entries.size(); ++e) {
    const BudgetEntry& entry = budget.entries[e];
    Measured& m = measured[e];
    if (entry.scope == Scope::Run) {
      m.copies = report.totals.calls;
      m.bytes = report.totals.bytes;
      m.cpu_blocked_ns = report.totals.cpu_blocked_ns;
    } else if (entry.scope == Scope::Class) {
      for (const analyses::ClassTotals& c : report.classes)
        if (analyses::class_name(c.cls) == entry.class_name) {
          m.copies += c.calls;
          m.bytes += c.bytes;
          m.cpu_blocked_ns += c.cpu_blocked_ns;
        }
    } else if (entry.scope == Scope::Range) {
      const analyses::RangeTotals* range = nullptr;
      for (const analyses::RangeTotals& r : report.ranges)
        if (r.path == entry.range) range = &r;
      if (range) {
        m.copies = range->calls;
        m.bytes = range->bytes;
        m.cpu_blocked_ns = range->cpu_blocked_ns;
        m.pageable_bytes = range->pageable_bytes;
        for (const analyses::RangeFinding& f : range->findings) {
          FindingKind k;
          if (analyses::parse_finding_kind(f.kind, k)) m.range_findings.emplace_back(k, f.calls);
        }
      } else {
        out.unmatched_site_entries.push_back(e);
      }
    } else if (m.site_ids.empty()) {
      out.unmatched_site_entries.push_back(e);
    }
    const auto add = [&](Measure what, uint64_t value, uint64_t limit) {
      Verdict v;
      v.entry = e;
      v.measure = what;
      v.measured = value;
      v.limit = limit;
      v.kept = value <= limit;
      out.verdicts.push_back(v);
    };
    if (entry.max_bytes) add(Measure::Bytes, m.bytes, *entry.max_bytes);
    if (entry.max_copies) add(Measure::Copies, m.copies, *entry.max_copies);
    if (entry.max_pageable_bytes)
      add(Measure::PageableBytes, entry.scope == Scope::Range ? m.pageable_bytes : report.pageable_share.pageable_bytes,
          *entry.max_pageable_bytes);
    if (entry.cpu_blocked) {
      add(Measure::CpuBlocked, m.cpu_blocked_ns, entry.cpu_blocked->limit_ns());
      out.verdicts.back().time = entry.cpu_blocked;
    }
    for (FindingKind k : entry.forbid_findings) {
      uint64_t n = 0;
      if (entry.scope == Scope::Range) {
        for (const auto& [kind, calls] : m.range_findings)
          if (kind == k) n += calls;
      } else {
        n = finding_copies(report, k, entry.scope == Scope::Run ? nullptr : &m.site_ids);
      }
      add(Measure::Finding, n, 0);
      Verdict& v = out.verdicts.back();
      v.finding = k;
    }
  }
  return out;
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string program_mismatch(const Budget& budget, const analyses::Report& report) {
  if (budget.program.empty()) return {};
  std::vector<std::string> seen;
  for (const analyses::ProcessSummary& p : report.processes) {
    const std::string name = base_name(p.exe);
    if (name == budget.program) return {};
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
  }
  std::string names;
  for (const auto& n : seen) names += (names.empty() ? "'" : ", '") + n + "'";
  return "the budget is for program '" + budget.program + "', the traces are of " +
         (names.empty() ? std::string("no process") : names);
}

bool raised_by_measured_time(FindingKind k) {
  // rewrite_candidates: the copies' measured time against the rewrite's
  // prediction; sync_copy_idle: how long the GPU stood idle. Noise between
  // two runs of one program can raise them or not, as it moves any time.
  return k == FindingKind::RewriteCandidates || k == FindingKind::SyncCopyIdle;
}

Budget budget_from_run(const CheckedRun& run, const BudgetMargins& margins, const std::string& generator) {
  const analyses::Report& report = *run.report;
  Budget b;
  b.generator = generator;
  b.program = base_name(report.program);
  b.command = report.argv;
  const auto time_limit = [&](uint64_t baseline) -> std::optional<TimeLimit> {
    if (baseline == 0) return std::nullopt;
    return TimeLimit{baseline, margins.time_tolerance_percent};
  };
  BudgetEntry whole;
  whole.scope = Scope::Run;
  whole.max_bytes = with_margin(report.totals.bytes, margins.bytes_percent);
  whole.max_copies = with_margin(report.totals.calls, margins.bytes_percent);
  whole.max_pageable_bytes = with_margin(report.pageable_share.pageable_bytes, margins.bytes_percent);
  whole.cpu_blocked = time_limit(report.totals.cpu_blocked_ns);
  for (FindingKind k : analyses::kAllFindingKinds)
    if (!raised_by_measured_time(k) && std::none_of(report.findings.begin(), report.findings.end(),
                                                    [&](const analyses::Finding& f) { return f.kind == k; }))
      whole.forbid_findings.push_back(k);
  b.entries.push_back(std::move(whole));

  // Classes in the order class_names() gives (the same budget for the same run).
  for (const std::string& name : class_names()) {
    uint64_t copies = 0, bytes = 0, ns = 0;
    for (const analyses::ClassTotals& c : report.classes)
      if (analyses::class_name(c.cls) == name) copies += c.calls, bytes += c.bytes, ns += c.cpu_blocked_ns;
    if (copies == 0) continue;
    BudgetEntry e;
    e.scope = Scope::Class;
    e.class_name = name;
    e.max_bytes = with_margin(bytes, margins.bytes_percent);
    e.max_copies = with_margin(copies, margins.bytes_percent);
    e.cpu_blocked = time_limit(ns);
    b.entries.push_back(std::move(e));
  }

  // NVTX ranges, in the report's path order (a range before its nested ones).
  for (const analyses::RangeTotals& r : report.ranges) {
    BudgetEntry e;
    e.scope = Scope::Range;
    e.range = r.path;
    e.max_bytes = with_margin(r.bytes, margins.bytes_percent);
    e.max_copies = with_margin(r.calls, margins.bytes_percent);
    e.max_pageable_bytes = with_margin(r.pageable_bytes, margins.bytes_percent);
    e.cpu_blocked = time_limit(r.cpu_blocked_ns);
    b.entries.push_back(std::move(e));
  }

  // Sites: the same site in several processes is one entry.
  std::map<std::string, size_t> by_identity;
  std::vector<BudgetEntry> sites;
  for (size_t i = 0; i < report.callsites.size() && i < run.site_names.size(); ++i) {
    if (!run.site_names[i] || report.callsites[i].calls == 0) continue;
    const policy::Site& name = *run.site_names[i];
    auto [it, fresh] = by_identity.try_emplace(policy::site_identity(name), sites.size());
    if (fresh) {
      BudgetEntry e;
      e.scope = Scope::Site;
      e.site = name;
      e.site.kind = policy::SiteKind::Call;
      e.max_bytes = 0, e.max_copies = 0;
      e.cpu_blocked = TimeLimit{0, margins.time_tolerance_percent};
      sites.push_back(std::move(e));
    }
    BudgetEntry& e = sites[it->second];
    *e.max_bytes += report.callsites[i].bytes;
    *e.max_copies += report.callsites[i].calls;
    e.cpu_blocked->baseline_ns += report.callsites[i].cpu_blocked_ns;
  }
  for (BudgetEntry& e : sites) {
    e.max_bytes = with_margin(*e.max_bytes, margins.bytes_percent);
    e.max_copies = with_margin(*e.max_copies, margins.bytes_percent);
    if (e.cpu_blocked->baseline_ns == 0) e.cpu_blocked.reset();
    b.entries.push_back(std::move(e));
  }
  return b;
}

}  // namespace cuxfer::check
