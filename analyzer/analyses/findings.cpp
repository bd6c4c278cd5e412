// The findings: patterns in the copies that cost time and have a known fix.
// Each returns zero or one Finding that aggregates every call site where the
// pattern occurs, with a per-site breakdown. A copy may appear in more than
// one finding (a large async pageable copy is both async_pageable and
// large_pageable): findings are read one at a time, never summed.
#include <algorithm>
#include <cmath>
#include <map>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {
namespace {

using trace::Direction;
using trace::MemKind;

bool is_ok_copy(const model::Call& c) { return c.kind() == trace::EventKind::Copy && !c.failed(); }

uint32_t site_id(const model::Call& c) { return c.site == model::kNoSite ? 0 : c.site + 1; }

struct SiteAcc {
  FindingSite out;
  uint64_t recoverable = 0;
  uint64_t time_for_gbps = 0;
  uint64_t first_enter = UINT64_MAX, last_enter = 0;
};

// Sorts per-site breakdowns by time and fills the finding's site list.
void finish_sites(std::map<uint32_t, SiteAcc>& by_site, Finding& f) {
  for (auto& [id, a] : by_site) f.sites.push_back(a.out);
  std::stable_sort(f.sites.begin(), f.sites.end(),
                   [](const FindingSite& a, const FindingSite& b) { return a.time_ns > b.time_ns; });
  for (const auto& s : f.sites)
    if (s.callsite != 0) f.callsites.push_back(s.callsite);
}

// Aggregate bandwidth of pinned or registered transfers of at least
// `min_bytes` in one direction, over the calls whose time measures the
// transfer. Empty when the run has none.
std::optional<double> measured_pinned_gbps(const model::Job& job, Direction dir, uint64_t min_bytes) {
  uint64_t bytes = 0, ns = 0;
  for (const auto& c : job.calls) {
    if (!is_ok_copy(c) || c.cls.direction != dir || c.bytes() < min_bytes) continue;
    if (c.cls.memory != MemKind::Pinned && c.cls.memory != MemKind::Registered) continue;
    if (c.has_gpu_time()) {
      bytes += c.bytes();
      ns += c.gpu_ns;
    } else if (model::cpu_time_measures_transfer(*c.event, c.cls)) {
      bytes += c.bytes();
      ns += c.cpu_ns();
    }
  }
  if (ns == 0) return std::nullopt;
  return static_cast<double>(bytes) / static_cast<double>(ns);
}

// Median time until an async copy from pinned memory returns, per direction.
std::optional<uint64_t> measured_async_return_ns(const model::Job& job, Direction dir) {
  std::vector<uint64_t> ns;
  for (const auto& c : job.calls)
    if (is_ok_copy(c) && c.async() && c.cls.direction == dir &&
        (c.cls.memory == MemKind::Pinned || c.cls.memory == MemKind::Registered))
      ns.push_back(c.cpu_ns());
  if (ns.empty()) return std::nullopt;
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  return ns[ns.size() / 2];
}

}  // namespace

std::vector<Finding> find_async_pageable(const model::Job& job, const Thresholds& t) {
  const std::optional<uint64_t> return_ns[2] = {measured_async_return_ns(job, Direction::HtoD),
                                                measured_async_return_ns(job, Direction::DtoH)};
  Finding f;
  f.kind = "async_pageable";
  f.title = "Async copies with pageable host memory ran synchronously";
  f.time_basis = "cpu_blocked";
  std::map<uint32_t, SiteAcc> by_site;
  uint64_t recoverable = 0;
  bool measured = false;
  for (const auto& c : job.calls) {
    if (!is_ok_copy(c) || !c.async() || !model::crosses_host_link(c.cls.direction) ||
        !model::is_pageable(c.cls))
      continue;
    const auto& ret = return_ns[c.cls.direction == Direction::HtoD ? 0 : 1];
    measured |= ret.has_value();
    uint64_t would_return = ret.value_or(t.nominal_async_return_ns);
    uint64_t r = c.cpu_ns() > would_return ? c.cpu_ns() - would_return : 0;
    ++f.calls;
    f.bytes += c.bytes();
    f.time_ns += c.cpu_ns();
    f.max_ns = std::max(f.max_ns, c.cpu_ns());
    recoverable += r;
    SiteAcc& a = by_site[site_id(c)];
    a.out.callsite = site_id(c);
    ++a.out.calls;
    a.out.bytes += c.bytes();
    a.out.time_ns += c.cpu_ns();
    a.out.max_ns = std::max(a.out.max_ns, c.cpu_ns());
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + r;
  }
  if (f.calls == 0) return {};
  f.estimated_recoverable_ns = recoverable;
  f.reference_source = measured ? "median return time of async copies from pinned memory in "
                                  "this run"
                                : "nominal: an async copy from pinned memory returns in about 3 us";
  f.advice =
      "An async copy from pageable memory does not overlap anything: the driver stages it "
      "through its own pinned buffer and the call returns only once the source has been "
      "consumed (H2D) or the copy has completed (D2H). Allocate the host buffer pinned "
      "(cudaMallocHost/cudaHostAlloc; PyTorch: pin_memory=True), or pin a long-lived buffer "
      "in place once with cudaHostRegister. The estimate is the CPU-blocked time beyond what "
      "a pinned async copy takes to return.";
  finish_sites(by_site, f);
  return {std::move(f)};
}

std::vector<Finding> find_large_pageable(const model::Job& job, const Thresholds& t) {
  const std::optional<double> measured[2] = {measured_pinned_gbps(job, Direction::HtoD, t.large_bytes),
                                             measured_pinned_gbps(job, Direction::DtoH, t.large_bytes)};
  Finding f;
  f.kind = "large_pageable";
  f.title = "Large transfers through pageable host memory";
  std::map<uint32_t, SiteAcc> by_site;
  uint64_t recoverable = 0, gpu_calls = 0;
  bool used_measured = false, used_nominal = false;
  double ref_for_title = 0;
  const model::MachineProfile* profile = t.profile;
  for (const auto& c : job.calls) {
    if (!is_ok_copy(c) || !model::crosses_host_link(c.cls.direction) || !model::is_pageable(c.cls) ||
        c.bytes() < t.large_bytes)
      continue;
    const int dir = c.cls.direction == Direction::HtoD ? 0 : 1;
    const auto& m = measured[dir];
    double ref = profile ? profile->pinned_gbps(dir, c.bytes()) : m.value_or(t.nominal_pinned_gbps);
    if (!profile) (m ? used_measured : used_nominal) = true;
    ref_for_title = std::max(ref_for_title, ref);
    uint64_t time = c.has_gpu_time() ? c.gpu_ns : c.cpu_ns();
    gpu_calls += c.has_gpu_time();
    auto pinned_ns = static_cast<uint64_t>(std::llround(static_cast<double>(c.bytes()) / ref));
    uint64_t r = time > pinned_ns ? time - pinned_ns : 0;
    ++f.calls;
    f.bytes += c.bytes();
    f.time_ns += time;
    f.max_ns = std::max(f.max_ns, time);
    recoverable += r;
    SiteAcc& a = by_site[site_id(c)];
    a.out.callsite = site_id(c);
    ++a.out.calls;
    a.out.bytes += c.bytes();
    a.out.time_ns += time;
    a.out.max_ns = std::max(a.out.max_ns, time);
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + r;
  }
  if (f.calls == 0) return {};
  for (auto& [id, a] : by_site)
    if (a.out.time_ns) a.out.achieved_gbps = static_cast<double>(a.out.bytes) / a.out.time_ns;
  f.time_basis = gpu_calls == f.calls ? "gpu" : gpu_calls == 0 ? "cpu_blocked" : "mixed";
  if (f.time_ns) f.achieved_gbps = static_cast<double>(f.bytes) / static_cast<double>(f.time_ns);
  f.reference_gbps = ref_for_title;
  f.reference_source = profile ? "machine profile " + profile->path + " (cuxfer calibrate " + profile->created +
                                      ", " + profile->gpu_name + "): pinned bandwidth at each transfer's size"
                       : used_measured && !used_nominal
                           ? "measured: pinned transfers of at least the same size in this run"
                       : used_measured ? "measured in this run for one direction, nominal (~50 GB/s pinned "
                                         "PCIe) for the other"
                                       : "nominal: ~50 GB/s, pinned DMA on PCIe Gen5 x16 (none measured in "
                                         "this run; `cuxfer calibrate` measures this machine)";
  f.estimated_recoverable_ns = recoverable;
  f.advice =
      "The driver copies pageable memory twice (into its own pinned staging buffer, then by "
      "DMA), at a fraction of the link's bandwidth. Use pinned buffers for large transfers "
      "(cudaMallocHost/cudaHostAlloc; PyTorch: pin_memory=True), or register a reused buffer "
      "once with cudaHostRegister (it pays off after about one reuse at 16 MiB, a few at "
      "1 MiB). The estimate assumes the pinned bandwidth shown.";
  finish_sites(by_site, f);
  return {std::move(f)};
}

std::vector<Finding> find_tiny_storm(const model::Job& job, const Thresholds& t) {
  std::map<uint32_t, SiteAcc> by_site;
  for (const auto& c : job.calls) {
    if (!is_ok_copy(c) || c.bytes() > t.tiny_bytes || c.site == model::kNoSite) continue;
    SiteAcc& a = by_site[site_id(c)];
    a.out.callsite = site_id(c);
    ++a.out.calls;
    a.out.bytes += c.bytes();
    a.out.time_ns += c.cpu_ns();
    a.out.max_ns = std::max(a.out.max_ns, c.cpu_ns());
    a.first_enter = std::min(a.first_enter, c.event->t_enter_ns);
    a.last_enter = std::max(a.last_enter, c.event->t_enter_ns);
  }
  Finding f;
  f.kind = "tiny_storm";
  f.title = "Storms of tiny copies from one call site";
  f.time_basis = "cpu_blocked";
  for (auto it = by_site.begin(); it != by_site.end();) {
    SiteAcc& a = it->second;
    if (a.out.calls < t.storm_calls) {
      it = by_site.erase(it);
      continue;
    }
    if (a.last_enter > a.first_enter)
      a.out.calls_per_second =
          static_cast<double>(a.out.calls - 1) * 1e9 / static_cast<double>(a.last_enter - a.first_enter);
    f.calls += a.out.calls;
    f.bytes += a.out.bytes;
    f.time_ns += a.out.time_ns;
    f.max_ns = std::max(f.max_ns, a.out.max_ns);
    if (a.out.calls_per_second)
      f.calls_per_second = std::max(f.calls_per_second.value_or(0), *a.out.calls_per_second);
    ++it;
  }
  if (f.calls == 0) return {};
  f.advice =
      "Every copy pays a fixed cost of several microseconds whatever its size. Gather the "
      "values into one buffer and copy it once, keep them on the device, or read results back "
      "once per step instead of once per item. No recoverable time is estimated: it depends on "
      "how far the copies can be batched.";
  finish_sites(by_site, f);
  return {std::move(f)};
}

}  // namespace cuxfer::analyses
