// Unified (managed) memory: what CUPTI's unified-memory records say moved, per
// allocation site, and the finding "managed_migrations" where pages migrated
// on demand (a kernel or the CPU touched a page that lived on the other side,
// and waited for it) instead of being prefetched.
//
// The shim turns these records on after the app's first managed allocation
// (CUXFER_CUPTI_UM); a process says so in its notes, so "no records" is told
// apart from "not recorded". Records carry an address, not a call: each is
// attributed to the managed allocation whose range held that address when the
// record started (the latest such allocation, as addresses are reused).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {
namespace {

using Interval = std::pair<uint64_t, uint64_t>;

constexpr const char* kUmOnNote = "cupti: unified memory records on";
constexpr const char* kUmUnavailableNote = "cupti: unified memory records unavailable: ";

uint64_t union_ns(std::vector<Interval>& spans) {
  std::sort(spans.begin(), spans.end());
  uint64_t total = 0, lo = 0, hi = 0;
  bool open = false;
  for (auto [b, e] : spans) {
    if (e <= b) continue;
    if (open && b <= hi) {
      hi = std::max(hi, e);
      continue;
    }
    if (open) total += hi - lo;
    lo = b;
    hi = e;
    open = true;
  }
  return open ? total + hi - lo : total;
}

struct Alloc {
  uint64_t begin = 0, end = 0, t = 0;
  uint32_t site = 0;  // callsite id (site + 1), 0 unknown
};

// The managed allocations of one process, by start address; reused addresses
// keep every allocation, in time order.
class AllocIndex {
 public:
  void add(const Alloc& a) { by_start_[a.begin].push_back(a); }
  const Alloc* find(uint64_t address, uint64_t t) const {
    auto it = by_start_.upper_bound(address);
    if (it == by_start_.begin()) return nullptr;
    --it;
    const Alloc* best = nullptr;
    for (const Alloc& a : it->second)
      if (address < a.end && (a.t <= t || !best)) best = &a;
    return best;
  }

 private:
  std::map<uint64_t, std::vector<Alloc>> by_start_;
};

// Per-site accumulation, with the intervals whose union is the on-demand time.
struct SiteAcc {
  ManagedTotals totals;
  uint64_t on_demand_htod = 0, on_demand_dtoh = 0;
  uint64_t largest_allocation = 0;
  std::vector<Interval> on_demand;
};

bool on_demand_cause(uint8_t cause) {
  // Coherence: a processor touched a page resident elsewhere. Prefetch is the
  // driver's speculative migration around such a fault (on the H200 it moves
  // most of the bytes of a faulting kernel): the app asked for none of it.
  // Unknown is what drivers report for fault-driven migrations on some platforms.
  return cause == static_cast<uint8_t>(trace::UmCause::Coherence) ||
         cause == static_cast<uint8_t>(trace::UmCause::Prefetch) ||
         cause == static_cast<uint8_t>(trace::UmCause::Unknown);
}

// The app's own cudaMemPrefetchAsync.
bool prefetch_cause(uint8_t cause) { return cause == static_cast<uint8_t>(trace::UmCause::User); }

// (process index, callsite) -> accumulation, filled from the whole job.
std::map<std::pair<uint32_t, uint32_t>, SiteAcc> accumulate(const model::Job& job, Managed& m) {
  std::map<std::pair<uint32_t, uint32_t>, SiteAcc> acc;
  std::vector<AllocIndex> allocs(job.processes.size());
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::ManagedAlloc || c.failed() || c.event->address == 0) continue;
    const uint32_t site = c.site == model::kNoSite ? 0 : c.site + 1;
    allocs[c.process].add({c.event->address, c.event->address + c.bytes(), c.event->t_enter_ns, site});
    SiteAcc& a = acc[{c.process, site}];
    a.totals.allocations += 1;
    a.totals.allocated_bytes += c.bytes();
    a.largest_allocation = std::max(a.largest_allocation, c.bytes());
  }
  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) {
    const model::Process& p = job.processes[pi];
    bool on = false;
    for (const auto& n : p.trace.notes) {
      if (n == kUmOnNote) on = true;
      else if (n.rfind(kUmUnavailableNote, 0) == 0)
        m.unavailable.push_back(fmt::format("pid {}: {}", p.pid(), n.substr(std::char_traits<char>::length(kUmUnavailableNote))));
    }
    m.records_on |= on;
    for (const trace::GpuRecord& g : p.trace.gpu_records) {
      if (g.kind != static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory)) continue;
      const Alloc* a = allocs[pi].find(trace::um_address(g), g.start_ns);
      SiteAcc& s = acc[{pi, a ? a->site : 0}];
      ManagedTotals& t = s.totals;
      const auto counter = static_cast<trace::UmCounter>(g.cupti_copy_kind);
      const uint64_t dur = g.end_ns > g.start_ns ? g.end_ns - g.start_ns : 0;
      switch (counter) {
        case trace::UmCounter::HtoD:
        case trace::UmCounter::DtoH: {
          const bool htod = counter == trace::UmCounter::HtoD;
          (htod ? t.htod_bytes : t.dtoh_bytes) += g.bytes;
          (htod ? t.htod_migrations : t.dtoh_migrations) += 1;
          t.migration_ns += dur;
          if (on_demand_cause(g.src_kind)) {
            t.on_demand_bytes += g.bytes;
            (htod ? s.on_demand_htod : s.on_demand_dtoh) += g.bytes;
            s.on_demand.emplace_back(g.start_ns, g.end_ns);
          } else if (prefetch_cause(g.src_kind)) {
            t.prefetched_bytes += g.bytes;
          }
          break;
        }
        case trace::UmCounter::GpuPageFault:
          t.gpu_fault_groups += g.bytes;
          s.on_demand.emplace_back(g.start_ns, g.end_ns);
          break;
        case trace::UmCounter::CpuPageFault:
          t.cpu_faults += 1;
          break;
        default:
          break;
      }
    }
  }
  return acc;
}

void add_into(ManagedTotals& into, const ManagedTotals& t) {
  into.allocations += t.allocations;
  into.allocated_bytes += t.allocated_bytes;
  into.htod_bytes += t.htod_bytes;
  into.dtoh_bytes += t.dtoh_bytes;
  into.htod_migrations += t.htod_migrations;
  into.dtoh_migrations += t.dtoh_migrations;
  into.on_demand_bytes += t.on_demand_bytes;
  into.prefetched_bytes += t.prefetched_bytes;
  into.migration_ns += t.migration_ns;
  into.on_demand_ns += t.on_demand_ns;
  into.gpu_fault_groups += t.gpu_fault_groups;
  into.cpu_faults += t.cpu_faults;
}

bool moved_anything(const ManagedTotals& t) {
  return t.htod_bytes || t.dtoh_bytes || t.gpu_fault_groups || t.cpu_faults;
}

}  // namespace

Managed managed_totals(const model::Job& job) {
  Managed m;
  auto acc = accumulate(job, m);
  for (auto& [key, s] : acc) {
    s.totals.pid = job.processes[key.first].pid();
    s.totals.callsite = key.second;
    // Allocation sites are not copy sites: the report's call-site table does not list them.
    if (key.second > 0 && key.second <= job.sites.size()) s.totals.frame = job.sites[key.second - 1].frame;
    s.totals.on_demand_ns = union_ns(s.on_demand);
    add_into(m.total, s.totals);
    if (moved_anything(s.totals) || s.totals.allocations) m.sites.push_back(s.totals);
  }
  std::stable_sort(m.sites.begin(), m.sites.end(), [](const ManagedTotals& a, const ManagedTotals& b) {
    return a.on_demand_ns != b.on_demand_ns ? a.on_demand_ns > b.on_demand_ns
                                            : a.htod_bytes + a.dtoh_bytes > b.htod_bytes + b.dtoh_bytes;
  });
  return m;
}

std::vector<Finding> find_managed_migrations(const model::Job& job, const Managed& m, const Thresholds& t) {
  if (!m.records_on) return {};
  Managed scratch;
  auto acc = accumulate(job, scratch);
  Finding f;
  f.kind = FindingKind::ManagedMigrations;
  f.title = "Managed memory migrated on demand (page faults) instead of prefetched";
  f.time_basis = "gpu";
  const model::MachineProfile* profile = t.profile;
  uint64_t recoverable = 0;
  double reference = 0;
  for (auto& [key, s] : acc) {
    const uint64_t bytes = s.on_demand_htod + s.on_demand_dtoh;
    if (bytes < t.large_bytes) continue;
    const uint64_t time = union_ns(s.on_demand);
    // A prefetch moves the same bytes at the pinned rate in large transfers:
    // the allocation's size is the transfer size it would use.
    const uint64_t size = std::max<uint64_t>(s.largest_allocation, bytes);
    const double h2d = profile ? profile->pinned_gbps(0, size) : t.nominal_pinned_gbps;
    const double d2h = profile ? profile->pinned_gbps(1, size) : t.nominal_pinned_gbps;
    reference = std::max(reference, h2d);
    const auto prefetch_ns = static_cast<uint64_t>(static_cast<double>(s.on_demand_htod) / h2d +
                                                   static_cast<double>(s.on_demand_dtoh) / d2h);
    const uint64_t r = time > prefetch_ns ? time - prefetch_ns : 0;
    const uint64_t migrations = s.totals.htod_migrations + s.totals.dtoh_migrations;
    FindingSite fs;
    fs.callsite = key.second;
    fs.calls = migrations;
    fs.bytes = bytes;
    fs.time_ns = time;
    fs.estimated_recoverable_ns = r;
    if (time) fs.achieved_gbps = static_cast<double>(bytes) / static_cast<double>(time);
    f.calls += migrations;
    f.bytes += bytes;
    f.time_ns += time;
    f.max_ns = std::max(f.max_ns, time);
    recoverable += r;
    f.sites.push_back(fs);
  }
  if (f.sites.empty()) return {};
  std::stable_sort(f.sites.begin(), f.sites.end(), [](const FindingSite& a, const FindingSite& b) {
    return a.estimated_recoverable_ns.value_or(0) > b.estimated_recoverable_ns.value_or(0);
  });
  for (const auto& s : f.sites)
    if (s.callsite) f.callsites.push_back(s.callsite);
  f.estimated_recoverable_ns = recoverable;
  if (f.time_ns) f.achieved_gbps = static_cast<double>(f.bytes) / static_cast<double>(f.time_ns);
  f.reference_gbps = reference;
  f.reference_source = profile ? "machine profile " + profile->path + ": pinned bandwidth at the allocation's size"
                               : "nominal (~50 GB/s pinned PCIe): no machine profile (cuxfer calibrate)";
  f.advice =
      "Pages of these managed allocations (call sites: where they were allocated) moved only when a kernel or the "
      "CPU touched them, each stall served by the driver's fault handler. Prefetch them instead: "
      "cudaMemPrefetchAsync to the GPU on the kernels' stream before the kernels that use them, and to "
      "cudaCpuDeviceId before the host reads them; or cudaMemAdvise (SetPreferredLocation, SetReadMostly) for data "
      "both sides read. Estimate: the on-demand time (migrations and GPU fault handling, overlaps counted once) "
      "minus the same bytes at the pinned rate; an asynchronous prefetch may also overlap with compute.";
  return {std::move(f)};
}

}  // namespace cuxfer::analyses
