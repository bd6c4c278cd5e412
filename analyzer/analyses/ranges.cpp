// Copies per NVTX range (report.h, RangeTotals).
#include "analyzer/analyses/report.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace cuxfer::analyses {
namespace {

// Whether finding `k`, raised at a call's site, is about that call: a site
// may make copies of several classes, and a range counts only the copies the
// finding describes (the predicates of totals.cpp and rewrite_whatif.cpp).
// Findings about a site's whole traffic (sync_copy_idle, duplicates, round
// trips, managed migrations) count every copy made there.
bool finding_covers(FindingKind k, const model::Call& c, const Thresholds& t) {
  const bool pageable = model::is_pageable(c.cls) && model::crosses_host_link(c.cls.direction);
  switch (k) {
    case FindingKind::AsyncPageable: return pageable && c.async();
    case FindingKind::LargePageable: return pageable && c.bytes() >= t.large_bytes;
    case FindingKind::RewriteCandidates: return pageable;
    case FindingKind::TinyStorm: return c.bytes() <= t.tiny_bytes;
    default: return true;
  }
}

}  // namespace

std::vector<RangeTotals> range_totals(const model::Job& job, const std::vector<Finding>& findings,
                                      const Thresholds& thresholds) {
  if (job.call_ranges.empty()) return {};
  // Each stack's paths from the outermost range in: what a copy in it counts toward.
  std::vector<std::vector<std::string>> prefixes(job.ranges.size());
  for (size_t i = 0; i < job.ranges.size(); ++i) {
    std::string path;
    for (const auto& n : job.ranges[i].names) {
      path += (path.empty() ? "" : " / ") + n;
      prefixes[i].push_back(path);
    }
  }
  // Call sites of each finding (FindingSite::callsite is Job::sites index + 1).
  struct FindingSites {
    FindingKind kind;
    std::unordered_set<uint32_t> sites;
  };
  std::vector<FindingSites> finding_sites;
  for (const auto& f : findings) {
    std::unordered_set<uint32_t> sites;
    for (const auto& s : f.sites)
      if (s.callsite != 0) sites.insert(s.callsite - 1);
    if (!sites.empty()) finding_sites.push_back({f.kind, std::move(sites)});
  }
  struct Acc {
    RangeTotals t;
    std::map<std::string, RangeClass> classes;
    std::map<std::string, uint64_t> findings;
  };
  std::map<std::string, Acc> by_path;
  for (size_t i = 0; i < job.calls.size(); ++i) {
    const uint32_t r = job.range_of(i);
    const model::Call& c = job.calls[i];
    if (r == model::kNoRange || c.kind() != trace::EventKind::Copy) continue;
    for (size_t d = 0; d < prefixes[r].size(); ++d) {
      Acc& a = by_path[prefixes[r][d]];
      if (a.t.depth == 0) {
        a.t.path = prefixes[r][d];
        a.t.name = job.ranges[r].names[d];
        a.t.depth = static_cast<uint32_t>(d + 1);
      }
      if (c.failed()) {
        ++a.t.failed_calls;
        continue;
      }
      ++a.t.calls;
      a.t.bytes += c.bytes();
      a.t.cpu_blocked_ns += c.cpu_ns();
      if (model::is_pageable(c.cls) && model::crosses_host_link(c.cls.direction)) a.t.pageable_bytes += c.bytes();
      if (c.has_gpu_time()) {
        a.t.gpu_ns = a.t.gpu_ns.value_or(0) + c.gpu_ns;
        ++a.t.gpu_calls;
      }
      RangeClass& k = a.classes[class_name(c.cls)];
      ++k.calls;
      k.bytes += c.bytes();
      if (c.site != model::kNoSite)
        for (const auto& f : finding_sites)
          if (f.sites.count(c.site) && finding_covers(f.kind, c, thresholds)) ++a.findings[finding_kind_name(f.kind)];
    }
  }
  std::vector<RangeTotals> out;
  for (auto& [path, a] : by_path) {
    for (auto& [name, k] : a.classes) {
      k.cls = name;
      a.t.classes.push_back(k);
    }
    std::stable_sort(a.t.classes.begin(), a.t.classes.end(),
                     [](const RangeClass& x, const RangeClass& y) { return x.bytes > y.bytes; });
    for (const auto& [kind, n] : a.findings) a.t.findings.push_back({kind, n});
    std::stable_sort(a.t.findings.begin(), a.t.findings.end(),
                     [](const RangeFinding& x, const RangeFinding& y) { return x.calls > y.calls; });
    out.push_back(std::move(a.t));
  }
  return out;
}

}  // namespace cuxfer::analyses
