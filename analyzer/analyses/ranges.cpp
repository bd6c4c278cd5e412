// Copies per NVTX range (report.h, RangeTotals), from the tally's per
// (range stack, site, class) sums (tally.h, RangeTally).
#include "analyzer/analyses/tally.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace cuxfer::analyses {
namespace {

// The copies of one range entry (a range stack, call site and class) that
// finding `k`, raised at that site, is about: a site may make copies of
// several classes, and a range counts only the copies the finding describes
// (the predicates of totals.cpp and rewrite_whatif.cpp). Findings about a
// site's whole traffic (sync_copy_idle, duplicates, round trips, managed
// migrations) count every copy made there.
uint64_t copies_covered(FindingKind k, const model::TransferClass& cls, const RangeCopies& r) {
  const bool pageable = model::is_pageable(cls) && model::crosses_host_link(cls.direction);
  switch (k) {
    case FindingKind::AsyncPageable:
      return pageable ? r.async_calls : 0;
    case FindingKind::LargePageable:
      return pageable ? r.large_calls : 0;
    case FindingKind::RewriteCandidates:
      return pageable ? r.calls : 0;
    case FindingKind::TinyStorm:
      return r.tiny_calls;
    default:
      return r.calls;
  }
}

}  // namespace

std::vector<RangeTotals> range_totals(const model::Job& job, const JobTally& tally,
                                      const std::vector<Finding>& findings) {
  if (tally.ranges.empty()) return {};
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
  // The entries in (stack, site, class) order: a path's name and depth are
  // those of the first stack (in Job::ranges order) that holds it, whatever
  // order the copies came in (names holding " / " make one path of
  // different stacks).
  std::vector<const RangeTally::value_type*> entries;
  entries.reserve(tally.ranges.size());
  for (const auto& e : tally.ranges)
    if (e.first.range < job.ranges.size()) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  struct Acc {
    RangeTotals t;
    std::map<std::string, RangeClass> classes;
    std::map<std::string, uint64_t> findings;
  };
  std::map<std::string, Acc> by_path;
  for (const auto* e : entries) {
    const RangeKey& key = e->first;
    const RangeCopies& r = e->second;
    const model::TransferClass cls = class_of_index(key.cls);
    for (size_t d = 0; d < prefixes[key.range].size(); ++d) {
      Acc& a = by_path[prefixes[key.range][d]];
      if (a.t.depth == 0) {
        a.t.path = prefixes[key.range][d];
        a.t.name = job.ranges[key.range].names[d];
        a.t.depth = static_cast<uint32_t>(d + 1);
      }
      a.t.failed_calls += r.failed_calls;
      if (r.calls == 0) continue;
      a.t.calls += r.calls;
      a.t.bytes += r.bytes;
      a.t.cpu_blocked_ns += r.cpu_blocked_ns;
      if (model::is_pageable(cls) && model::crosses_host_link(cls.direction)) a.t.pageable_bytes += r.bytes;
      if (r.gpu_calls > 0) {
        a.t.gpu_ns = a.t.gpu_ns.value_or(0) + r.gpu_ns;
        a.t.gpu_calls += r.gpu_calls;
      }
      RangeClass& k = a.classes[class_name(cls)];
      k.calls += r.calls;
      k.bytes += r.bytes;
      if (key.site != model::kNoSite)
        for (const auto& f : finding_sites)
          if (f.sites.count(key.site))
            if (const uint64_t n = copies_covered(f.kind, cls, r); n > 0)
              a.findings[finding_kind_name(f.kind)] += n;
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

std::vector<RangeTotals> range_totals(const model::Job& job, const std::vector<Finding>& findings,
                                      const Thresholds& thresholds) {
  return range_totals(job, tally_calls(job, thresholds), findings);
}

}  // namespace cuxfer::analyses
