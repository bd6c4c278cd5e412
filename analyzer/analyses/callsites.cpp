// Copies per user call site, most CPU-blocked time first: the time the app's
// threads waited is what a change at that line can give back. The numbers
// come from tally_calls(); this names the sites and their main class.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

std::vector<CallSiteTotals> callsite_totals(const model::Job& job, JobTally& tally) {
  std::vector<CallSiteTotals> out;
  for (size_t i = 0; i < tally.sites.size(); ++i) {
    SiteTally& st = tally.sites[i];
    if (!st.used) continue;
    CallSiteTotals& s = st.out;
    const model::Site& site = job.sites[i];
    s.id = static_cast<uint32_t>(i + 1);
    s.pid = job.processes[site.process].pid();
    s.frame = site.frame;
    s.stack = site.stack;
    // The class with most bytes; the first in (direction, memory) order on a tie.
    uint64_t best = 0;
    for (unsigned k = 0; k < kClasses; ++k) {
      if (!(st.classes_seen >> k & 1)) continue;
      if (s.main_class.empty() || st.class_bytes[k] > best) {
        s.main_class = class_name(class_of_index(k));
        best = st.class_bytes[k];
      }
    }
    if (const int n = std::popcount(st.classes_seen); n > 1) s.main_class += fmt::format(" +{}", n - 1);
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const CallSiteTotals& a, const CallSiteTotals& b) {
    if (a.cpu_blocked_ns != b.cpu_blocked_ns) return a.cpu_blocked_ns > b.cpu_blocked_ns;
    return a.bytes > b.bytes;
  });
  return out;
}

std::vector<CallSiteTotals> callsite_totals(const model::Job& job, uint64_t* calls_without_site) {
  JobTally tally = tally_calls(job, {});
  if (calls_without_site) *calls_without_site = tally.calls_without_site;
  return callsite_totals(job, tally);
}

}  // namespace cuxfer::analyses
