// Copies per user call site, most CPU-blocked time first: the time the app's
// threads waited is what a change at that line can give back. The numbers
// come from tally_calls(); this names the sites and their main class, and
// gathers the sites of several processes that are one line of code into
// locations (the report's tables: eight ranks copying at train.py:42 are one
// row, not eight).
#include <algorithm>
#include <bit>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

namespace {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The class with most bytes; the first in (direction, memory) order on a
// tie; "+N" when N other classes occur too.
std::string main_class_of(uint64_t classes_seen, const std::array<uint64_t, kClasses>& class_bytes) {
  std::string out;
  uint64_t best = 0;
  for (unsigned k = 0; k < kClasses; ++k) {
    if (!(classes_seen >> k & 1)) continue;
    if (out.empty() || class_bytes[k] > best) {
      out = class_name(class_of_index(k));
      best = class_bytes[k];
    }
  }
  if (const int n = std::popcount(classes_seen); n > 1) out += fmt::format(" +{}", n - 1);
  return out;
}

template <typename T>
void sort_by_blocked_time(std::vector<T>& v) {
  std::stable_sort(v.begin(), v.end(), [](const T& a, const T& b) {
    if (a.cpu_blocked_ns != b.cpu_blocked_ns) return a.cpu_blocked_ns > b.cpu_blocked_ns;
    return a.bytes > b.bytes;
  });
}

bool same_stack(const std::vector<symbolize::Frame>& a, const std::vector<symbolize::Frame>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (site_key(a[i]) != site_key(b[i])) return false;
  return true;
}

}  // namespace

std::string site_key(const symbolize::Frame& f) {
  // A Python line: its function, file and line (docs/diff.md: edits of the
  // script move lines, so a moved copy is another site).
  if (f.python) return fmt::format("py!{} ({}:{})", f.function, f.file, f.line);
  std::string module = f.has_module() ? basename_of(f.module) : "?";
  if (!f.function.empty()) {
    if (!f.file.empty()) return fmt::format("{}!{} ({}:{})", module, f.function, f.file, f.line);
    return fmt::format("{}!{}", module, f.function);
  }
  if (f.has_module()) return fmt::format("{}+0x{:x}", module, f.offset);
  return fmt::format("?@0x{:x}", f.address);  // no module: only the address is left
}

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
    s.main_class = main_class_of(st.classes_seen, st.class_bytes);
    s.staged_bytes = st.staged_bytes;
    out.push_back(std::move(s));
  }
  sort_by_blocked_time(out);
  return out;
}

std::vector<LocationTotals> location_totals(const std::vector<CallSiteTotals>& sites, const JobTally& tally) {
  std::vector<LocationTotals> out;
  std::vector<uint64_t> classes_seen;
  std::vector<std::array<uint64_t, kClasses>> class_bytes;
  std::unordered_map<std::string, size_t> index;
  for (const CallSiteTotals& s : sites) {  // most CPU-blocked first: a location's first site is its largest
    std::string key = site_key(s.frame);
    auto [it, added] = index.try_emplace(key, out.size());
    if (added) {
      LocationTotals& l = out.emplace_back();
      l.key = std::move(key);
      l.id = s.id;
      l.pid = s.pid;
      l.frame = s.frame;
      l.stack = s.stack;
      classes_seen.push_back(0);
      class_bytes.emplace_back();
    }
    LocationTotals& l = out[it->second];
    l.callsites.push_back(s.id);
    if (std::find(l.pids.begin(), l.pids.end(), s.pid) == l.pids.end()) l.pids.push_back(s.pid);
    if (!added && !l.stacks_differ && !same_stack(l.stack, s.stack)) l.stacks_differ = true;
    l.calls += s.calls;
    l.bytes += s.bytes;
    l.cpu_blocked_ns += s.cpu_blocked_ns;
    l.max_cpu_ns = std::max(l.max_cpu_ns, s.max_cpu_ns);
    l.failed_calls += s.failed_calls;
    if (s.gpu_ns) l.gpu_ns = l.gpu_ns.value_or(0) + *s.gpu_ns;
    const SiteTally& st = tally.sites[s.id - 1];
    classes_seen[it->second] |= st.classes_seen;
    for (unsigned k = 0; k < kClasses; ++k) class_bytes[it->second][k] += st.class_bytes[k];
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].main_class = main_class_of(classes_seen[i], class_bytes[i]);
  sort_by_blocked_time(out);
  return out;
}

std::vector<FindingSite> finding_locations(const Finding& f, const std::vector<LocationTotals>& locations) {
  std::unordered_map<uint32_t, uint32_t> location_id;  // site id -> its location's id
  for (const LocationTotals& l : locations)
    for (uint32_t id : l.callsites) location_id[id] = l.id;
  std::vector<FindingSite> out;
  std::unordered_map<uint32_t, size_t> index;  // location id -> out index
  for (const FindingSite& s : f.sites) {
    const auto loc = s.callsite ? location_id.find(s.callsite) : location_id.end();
    if (loc == location_id.end()) {  // no location: as it is
      out.push_back(s);
      continue;
    }
    auto [it, added] = index.try_emplace(loc->second, out.size());
    if (added) {
      FindingSite& g = out.emplace_back(s);
      g.callsite = loc->second;
      g.processes = 1;
      continue;
    }
    FindingSite& g = out[it->second];
    ++g.processes;
    g.calls += s.calls;
    g.bytes += s.bytes;
    g.time_ns += s.time_ns;
    g.max_ns = std::max(g.max_ns, s.max_ns);
    if (s.estimated_recoverable_ns)
      g.estimated_recoverable_ns = g.estimated_recoverable_ns.value_or(0) + *s.estimated_recoverable_ns;
    if (g.achieved_gbps && s.achieved_gbps && g.time_ns)
      g.achieved_gbps = static_cast<double>(g.bytes) / static_cast<double>(g.time_ns);
    else if (!s.achieved_gbps)
      g.achieved_gbps.reset();
    if (s.calls_per_second)
      g.calls_per_second = std::max(g.calls_per_second.value_or(0), *s.calls_per_second);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FindingSite& a, const FindingSite& b) { return a.time_ns > b.time_ns; });
  return out;
}

std::vector<CallSiteTotals> callsite_totals(const model::Job& job, uint64_t* calls_without_site) {
  JobTally tally = tally_calls(job, {});
  if (calls_without_site) *calls_without_site = tally.calls_without_site;
  return callsite_totals(job, tally);
}

std::vector<LocationTotals> location_totals(const model::Job& job) {
  JobTally tally = tally_calls(job, {});
  return location_totals(callsite_totals(job, tally), tally);
}

}  // namespace cuxfer::analyses
