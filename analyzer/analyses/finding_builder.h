// Accumulates one finding and its per-call-site breakdown: the bookkeeping
// every finding shares (totals, per-site rows, largest first, call-site ids).
#pragma once

#include <algorithm>
#include <map>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

class FindingBuilder {
 public:
  explicit FindingBuilder(Finding& f) : f_(f) {}

  // One call: the time it took and the part of it the finding deems recoverable.
  void add(const model::Call& c, uint64_t time_ns, uint64_t recoverable_ns) {
    add_sum(c.site == model::kNoSite ? 0 : c.site + 1, 1, c.bytes(), time_ns, time_ns, recoverable_ns);
  }

  // Calls of one call site (id: Job::sites index + 1, 0 = none) summed
  // elsewhere: how many, their bytes, time and longest time, and the part
  // of their time deemed recoverable.
  void add_sum(uint32_t id, uint64_t calls, uint64_t bytes, uint64_t time_ns, uint64_t max_ns,
               uint64_t recoverable_ns) {
    f_.calls += calls;
    f_.bytes += bytes;
    f_.time_ns += time_ns;
    f_.max_ns = std::max(f_.max_ns, max_ns);
    recoverable_ += recoverable_ns;
    FindingSite& s = sites_[id];
    s.callsite = id;
    s.calls += calls;
    s.bytes += bytes;
    s.time_ns += time_ns;
    s.max_ns = std::max(s.max_ns, max_ns);
    s.estimated_recoverable_ns = s.estimated_recoverable_ns.value_or(0) + recoverable_ns;
  }

  uint64_t recoverable() const { return recoverable_; }

  // Sets the finding's estimate and its sites, most recoverable first.
  void finish() {
    f_.estimated_recoverable_ns = recoverable_;
    for (auto& [id, s] : sites_) f_.sites.push_back(s);
    std::stable_sort(f_.sites.begin(), f_.sites.end(), [](const FindingSite& a, const FindingSite& b) {
      return a.estimated_recoverable_ns.value_or(0) > b.estimated_recoverable_ns.value_or(0);
    });
    for (const auto& s : f_.sites)
      if (s.callsite != 0) f_.callsites.push_back(s.callsite);
  }

 private:
  Finding& f_;
  std::map<uint32_t, FindingSite> sites_;
  uint64_t recoverable_ = 0;
};

}  // namespace cuxfer::analyses
