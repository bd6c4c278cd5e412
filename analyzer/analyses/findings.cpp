// The findings: patterns in the copies that cost time and have a known fix.
// Each returns zero or one Finding that aggregates every call site where the
// pattern occurs, with a per-site breakdown. A copy may appear in more than
// one finding (a large async pageable copy is both async_pageable and
// large_pageable): findings are read one at a time, never summed. Their
// inputs come from tally_calls() (totals.cpp, add_finding_inputs).
#include <algorithm>
#include <cmath>
#include <map>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {
namespace {

struct SiteAcc {
  FindingSite out;  // out.calls == 0: the site has no copy in the finding
};

// Per call site id (Job::sites index + 1, 0 = none): a vector, not a map, as
// ids are dense and each qualifying copy looks its site up.
using SiteAccs = std::vector<SiteAcc>;

SiteAcc& site_acc(SiteAccs& by_site, uint32_t site_id) {
  SiteAcc& a = by_site[site_id];
  a.out.callsite = site_id;
  return a;
}

// Fills the finding's site list in id order, then sorts it by time.
void finish_sites(const SiteAccs& by_site, Finding& f) {
  for (const SiteAcc& a : by_site)
    if (a.out.calls > 0) f.sites.push_back(a.out);
  std::stable_sort(f.sites.begin(), f.sites.end(),
                   [](const FindingSite& a, const FindingSite& b) { return a.time_ns > b.time_ns; });
  for (const auto& s : f.sites)
    if (s.callsite != 0) f.callsites.push_back(s.callsite);
}

// Aggregate bandwidth of pinned or registered transfers of at least the
// large-transfer size in one direction, over the calls whose time measures
// the transfer. Empty when the run has none.
std::optional<double> measured_pinned_gbps(const FindingsTally& t, int dir) {
  if (t.pinned_large_ns[dir] == 0) return std::nullopt;
  return static_cast<double>(t.pinned_large_bytes[dir]) / static_cast<double>(t.pinned_large_ns[dir]);
}

// Median time until an async copy from pinned memory returns, per direction:
// the value at index n / 2 of the times sorted, over the pass's times and a
// summary's histogram together.
std::optional<uint64_t> measured_async_return_ns(const FindingsTally& t, int dir) {
  const auto& histogram = t.pinned_async_return_histogram[dir];
  if (histogram.empty()) {
    std::vector<uint64_t> ns = t.pinned_async_return_ns[dir];
    if (ns.empty()) return std::nullopt;
    std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
    return ns[ns.size() / 2];
  }
  std::map<uint64_t, uint64_t> all = histogram;
  for (uint64_t ns : t.pinned_async_return_ns[dir]) ++all[ns];
  uint64_t n = 0;
  for (const auto& [ns, count] : all) n += count;
  uint64_t seen = 0;
  for (const auto& [ns, count] : all) {
    seen += count;
    if (seen > n / 2) return ns;
  }
  return std::nullopt;
}

size_t site_ids(const JobTally& tally) { return tally.sites.size() + 1; }

// One async_pageable copy's estimate: its CPU-blocked time beyond what an
// async copy from pinned memory takes to return.
uint64_t async_recoverable(const AsyncPageableCopy& c, const std::optional<uint64_t>& return_ns, const Thresholds& t) {
  const uint64_t would_return = return_ns.value_or(t.nominal_async_return_ns);
  return c.cpu_ns > would_return ? c.cpu_ns - would_return : 0;
}

// One large_pageable copy's reference bandwidth (the profile's at its size,
// else the run's measured one, else nominal) and estimate against it.
double large_reference(const LargePageableCopy& c, const std::optional<double>& measured, const Thresholds& t) {
  return t.profile ? t.profile->pinned_gbps(c.dir, c.bytes) : measured.value_or(t.nominal_pinned_gbps);
}
uint64_t large_recoverable(const LargePageableCopy& c, double ref) {
  const auto pinned_ns = static_cast<uint64_t>(std::llround(static_cast<double>(c.bytes) / ref));
  return c.time > pinned_ns ? c.time - pinned_ns : 0;
}

// The copies summed per site in the pass (FindingsTally::async_sites,
// large_sites) into the finding and its sites, as listed copies add up.
void add_site_sums(const std::vector<FindingsTally::SiteSum>& sums, Finding& f, uint64_t& recoverable,
                   SiteAccs& by_site) {
  for (uint32_t id = 0; id < sums.size(); ++id) {
    const FindingsTally::SiteSum& s = sums[id];
    if (s.calls == 0) continue;
    f.calls += s.calls;
    f.bytes += s.bytes;
    f.time_ns += s.time_ns;
    f.max_ns = std::max(f.max_ns, s.max_ns);
    recoverable += s.recoverable_ns;
    SiteAcc& a = site_acc(by_site, id);
    a.out.calls += s.calls;
    a.out.bytes += s.bytes;
    a.out.time_ns += s.time_ns;
    a.out.max_ns = std::max(a.out.max_ns, s.max_ns);
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + s.recoverable_ns;
  }
}

void add_to_sum(FindingsTally::SiteSum& s, uint64_t bytes, uint64_t time, uint64_t recoverable) {
  ++s.calls;
  s.bytes += bytes;
  s.time_ns += time;
  s.max_ns = std::max(s.max_ns, time);
  s.recoverable_ns += recoverable;
}

}  // namespace

Thresholds::RunReferences run_references(const FindingsTally& f) {
  Thresholds::RunReferences r;
  for (int dir = 0; dir < 2; ++dir) {
    r.async_return_ns[dir] = measured_async_return_ns(f, dir);
    r.pinned_gbps[dir] = measured_pinned_gbps(f, dir);
  }
  return r;
}

void add_summed_async(FindingsTally& f, const AsyncPageableCopy& c, const Thresholds& t) {
  const std::optional<uint64_t>& return_ns = t.known->async_return_ns[c.dir];
  f.async_measured |= return_ns.has_value();
  add_to_sum(f.async_sites[c.site_id], c.bytes, c.cpu_ns, async_recoverable(c, return_ns, t));
}

void add_summed_large(FindingsTally& f, const LargePageableCopy& c, const Thresholds& t) {
  const std::optional<double>& measured = t.known->pinned_gbps[c.dir];
  const double ref = large_reference(c, measured, t);
  if (!t.profile) (measured ? f.large_used_measured : f.large_used_nominal) = true;
  f.large_ref_max = std::max(f.large_ref_max, ref);
  f.large_gpu_calls += c.gpu;
  add_to_sum(f.large_sites[c.site_id], c.bytes, c.time, large_recoverable(c, ref));
}

std::vector<Finding> find_async_pageable(const JobTally& tally, const Thresholds& t) {
  const Thresholds::RunReferences refs = t.known ? *t.known : run_references(tally.findings);
  const std::optional<uint64_t>(&return_ns)[2] = refs.async_return_ns;
  Finding f;
  f.kind = FindingKind::AsyncPageable;
  f.title = "Async copies with pageable host memory ran synchronously";
  f.time_basis = "cpu_blocked";
  SiteAccs by_site(site_ids(tally));
  uint64_t recoverable = 0;
  bool measured = false;
  for (size_t i = 0; i < tally.findings.async_pageable.size(); ++i) {
    const AsyncPageableCopy& c = tally.findings.async_pageable[i];
    const auto& ret = return_ns[c.dir];
    measured |= ret.has_value();
    const uint64_t n = tally.findings.async_count(i);  // equal copies (a summary's)
    uint64_t r = async_recoverable(c, ret, t) * n;
    f.calls += n;
    f.bytes += c.bytes * n;
    f.time_ns += c.cpu_ns * n;
    f.max_ns = std::max(f.max_ns, c.cpu_ns);
    recoverable += r;
    SiteAcc& a = site_acc(by_site, c.site_id);
    a.out.calls += n;
    a.out.bytes += c.bytes * n;
    a.out.time_ns += c.cpu_ns * n;
    a.out.max_ns = std::max(a.out.max_ns, c.cpu_ns);
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + r;
  }
  add_site_sums(tally.findings.async_sites, f, recoverable, by_site);
  measured |= tally.findings.async_measured;
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

std::vector<Finding> find_large_pageable(const JobTally& tally, const Thresholds& t) {
  const Thresholds::RunReferences refs = t.known ? *t.known : run_references(tally.findings);
  const std::optional<double>(&measured)[2] = refs.pinned_gbps;
  Finding f;
  f.kind = FindingKind::LargePageable;
  f.title = "Large transfers through pageable host memory";
  SiteAccs by_site(site_ids(tally));
  uint64_t recoverable = 0, gpu_calls = 0;
  bool used_measured = false, used_nominal = false;
  double ref_for_title = 0;
  const model::MachineProfile* profile = t.profile;
  for (size_t i = 0; i < tally.findings.large_pageable.size(); ++i) {
    const LargePageableCopy& c = tally.findings.large_pageable[i];
    const auto& m = measured[c.dir];
    const double ref = large_reference(c, m, t);
    if (!profile) (m ? used_measured : used_nominal) = true;
    ref_for_title = std::max(ref_for_title, ref);
    const uint64_t n = tally.findings.large_count(i);  // equal copies (a summary's)
    gpu_calls += c.gpu ? n : 0;
    uint64_t r = large_recoverable(c, ref) * n;
    f.calls += n;
    f.bytes += c.bytes * n;
    f.time_ns += c.time * n;
    f.max_ns = std::max(f.max_ns, c.time);
    recoverable += r;
    SiteAcc& a = site_acc(by_site, c.site_id);
    a.out.calls += n;
    a.out.bytes += c.bytes * n;
    a.out.time_ns += c.time * n;
    a.out.max_ns = std::max(a.out.max_ns, c.time);
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + r;
  }
  add_site_sums(tally.findings.large_sites, f, recoverable, by_site);
  const FindingsTally& summed = tally.findings;
  gpu_calls += summed.large_gpu_calls;
  used_measured |= summed.large_used_measured;
  used_nominal |= summed.large_used_nominal;
  ref_for_title = std::max(ref_for_title, summed.large_ref_max);
  if (f.calls == 0) return {};
  for (SiteAcc& a : by_site)
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

std::vector<Finding> find_tiny_storm(const JobTally& tally, const Thresholds& t) {
  Finding f;
  f.kind = FindingKind::TinyStorm;
  f.title = "Storms of tiny copies from one call site";
  f.time_basis = "cpu_blocked";
  SiteAccs by_site(site_ids(tally));
  for (uint32_t id = 1; id < tally.findings.storm.size(); ++id) {
    const StormSite& s = tally.findings.storm[id];
    if (s.calls == 0 || s.calls < t.storm_calls) continue;
    FindingSite& out = site_acc(by_site, id).out;
    out.calls = s.calls;
    out.bytes = s.bytes;
    out.time_ns = s.time_ns;
    out.max_ns = s.max_ns;
    if (s.last_enter > s.first_enter)
      out.calls_per_second =
          static_cast<double>(s.calls - 1) * 1e9 / static_cast<double>(s.last_enter - s.first_enter);
    f.calls += out.calls;
    f.bytes += out.bytes;
    f.time_ns += out.time_ns;
    f.max_ns = std::max(f.max_ns, out.max_ns);
    if (out.calls_per_second)
      f.calls_per_second = std::max(f.calls_per_second.value_or(0), *out.calls_per_second);
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

// The findings on their own, each a pass of its own: analyze() uses the tally.
std::vector<Finding> find_async_pageable(const model::Job& job, const Thresholds& t) {
  return find_async_pageable(tally_calls(job, t), t);
}
std::vector<Finding> find_large_pageable(const model::Job& job, const Thresholds& t) {
  return find_large_pageable(tally_calls(job, t), t);
}
std::vector<Finding> find_tiny_storm(const model::Job& job, const Thresholds& t) {
  return find_tiny_storm(tally_calls(job, t), t);
}

}  // namespace cuxfer::analyses
