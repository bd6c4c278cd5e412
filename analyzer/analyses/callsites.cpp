// Copies per user call site, most CPU-blocked time first: the time the app's
// threads waited is what a change at that line can give back.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

std::vector<CallSiteTotals> callsite_totals(const model::Job& job, uint64_t* calls_without_site) {
  std::vector<CallSiteTotals> sites(job.sites.size());
  // Bytes per class per site, keyed by (direction, memory) packed in 16 bits.
  std::vector<std::map<uint16_t, uint64_t>> class_bytes(job.sites.size());
  std::vector<bool> used(job.sites.size(), false);
  uint64_t without = 0;
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy) continue;
    if (c.site == model::kNoSite) {
      ++without;
      continue;
    }
    CallSiteTotals& s = sites[c.site];
    used[c.site] = true;
    if (c.failed()) {
      ++s.failed_calls;
      continue;
    }
    ++s.calls;
    s.bytes += c.bytes();
    s.cpu_blocked_ns += c.cpu_ns();
    s.max_cpu_ns = std::max(s.max_cpu_ns, c.cpu_ns());
    if (c.has_gpu_time()) s.gpu_ns = s.gpu_ns.value_or(0) + c.gpu_ns;
    class_bytes[c.site][static_cast<uint16_t>(static_cast<unsigned>(c.cls.direction) << 8 |
                                              static_cast<unsigned>(c.cls.memory))] += c.bytes();
  }
  std::vector<CallSiteTotals> out;
  for (size_t i = 0; i < sites.size(); ++i) {
    if (!used[i]) continue;
    CallSiteTotals& s = sites[i];
    const model::Site& site = job.sites[i];
    s.id = static_cast<uint32_t>(i + 1);
    s.pid = job.processes[site.process].pid();
    s.frame = site.frame;
    s.stack = site.stack;
    uint64_t best = 0;
    for (const auto& [key, bytes] : class_bytes[i])
      if (s.main_class.empty() || bytes > best) {
        s.main_class =
            class_name({static_cast<trace::Direction>(key >> 8), static_cast<trace::MemKind>(key & 0xff)});
        best = bytes;
      }
    if (class_bytes[i].size() > 1) s.main_class += fmt::format(" +{}", class_bytes[i].size() - 1);
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const CallSiteTotals& a, const CallSiteTotals& b) {
    if (a.cpu_blocked_ns != b.cpu_blocked_ns) return a.cpu_blocked_ns > b.cpu_blocked_ns;
    return a.bytes > b.bytes;
  });
  if (calls_without_site) *calls_without_site = without;
  return out;
}

}  // namespace cuxfer::analyses
