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
// The same code (ManagedFeed) serves the whole job, every allocation fed
// before any record, and a streamed one, fed in file order.
#include "analyzer/analyses/managed.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace cuxfer::analyses {
namespace {

constexpr const char* kUmOnNote = "cupti: unified memory records on";
constexpr const char* kUmUnavailableNote = "cupti: unified memory records unavailable: ";

struct Alloc {
  uint64_t begin = 0, end = 0, t = 0;
  uint32_t site = 0;  // callsite id (site + 1), 0 unknown
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

bool is_managed_allocation(const model::Call& c) {
  return c.kind() == trace::EventKind::ManagedAlloc && !c.failed() && c.event->address != 0;
}

}  // namespace

bool IntervalUnion::add(uint64_t begin, uint64_t end, size_t max_kept) {
  if (end <= begin) return true;  // empty: adds nothing
  if (begin < floor_) return false;
  // Merged with every kept span it overlaps or touches.
  auto it = spans_.upper_bound(begin);
  if (it != spans_.begin() && std::prev(it)->second >= begin) --it;
  while (it != spans_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = spans_.erase(it);
  }
  spans_.emplace(begin, end);
  while (spans_.size() > max_kept) {
    const auto first = spans_.begin();
    settled_ += first->second - first->first;
    floor_ = first->second;
    spans_.erase(first);
  }
  return true;
}

IntervalUnion IntervalUnion::of_length(uint64_t length) {
  IntervalUnion u;
  u.settled_ = length;
  u.floor_ = UINT64_MAX;  // every add() refused: the spans are gone
  return u;
}

uint64_t IntervalUnion::length() const {
  uint64_t total = settled_;
  for (const auto& [b, e] : spans_) total += e - b;
  return total;
}

// The managed allocations of one process, by start address; reused addresses
// keep every allocation, in trace order. Beside each start, what the records
// that looked there found: enough to tell whether an allocation fed later
// would have changed what one of them took.
class ManagedFeed::Allocations {
 public:
  // False where `a` would have taken a record already looked up, or moved
  // one to another start: the records fed so far went elsewhere than in the
  // whole job.
  bool add(const Alloc& a) {
    if (auto it = by_start_.find(a.begin); it != by_start_.end()) {
      Start& s = it->second;
      // find() takes a later allocation at the same start when it holds the
      // address and began no later than the record, or when nothing before
      // it there held the address.
      const bool changes = s.looked && (s.min_unmatched_address < a.end ||
                                        (s.latest_record_start >= a.t && s.min_address < a.end));
      s.allocs.push_back(a);
      return !changes;
    }
    // A new start: records that looked at the start below it, at or past
    // its address, would look here instead.
    const auto above = by_start_.upper_bound(a.begin);
    const bool changes = above == by_start_.begin() ? below_looked_ && below_max_address_ >= a.begin
                                                    : std::prev(above)->second.looked &&
                                                          std::prev(above)->second.max_address >= a.begin;
    by_start_[a.begin].allocs.push_back(a);
    return !changes;
  }

  // The allocation a record at `address` starting at `t` goes to: the
  // latest at the highest start at or below the address that holds it and
  // began by `t` (or the first that holds it).
  const Alloc* find(uint64_t address, uint64_t t) {
    auto it = by_start_.upper_bound(address);
    if (it == by_start_.begin()) {
      below_looked_ = true;
      below_max_address_ = std::max(below_max_address_, address);
      return nullptr;
    }
    --it;
    Start& s = it->second;
    const Alloc* best = nullptr;
    for (const Alloc& a : s.allocs)
      if (address < a.end && (a.t <= t || !best)) best = &a;
    s.looked = true;
    s.max_address = std::max(s.max_address, address);
    s.min_address = std::min(s.min_address, address);
    s.latest_record_start = std::max(s.latest_record_start, t);
    if (!best) s.min_unmatched_address = std::min(s.min_unmatched_address, address);
    return best;
  }

 private:
  struct Start {
    std::vector<Alloc> allocs;  // trace order
    // Of the records that looked here (address at or past this start, below the next):
    bool looked = false;
    uint64_t max_address = 0, min_address = UINT64_MAX;
    uint64_t latest_record_start = 0;
    uint64_t min_unmatched_address = UINT64_MAX;  // of those that found no allocation here
  };
  std::map<uint64_t, Start> by_start_;
  // Records below every start: the highest address among them.
  bool below_looked_ = false;
  uint64_t below_max_address_ = 0;
};

ManagedFeed::ManagedFeed(uint32_t process, size_t max_kept)
    : process_(process), max_kept_(max_kept), allocations_(std::make_unique<Allocations>()) {}
ManagedFeed::~ManagedFeed() = default;
ManagedFeed::ManagedFeed(ManagedFeed&&) noexcept = default;
ManagedFeed& ManagedFeed::operator=(ManagedFeed&&) noexcept = default;

void ManagedFeed::add_calls(std::span<const model::Call> calls) {
  for (const model::Call& c : calls) {
    if (!is_managed_allocation(c)) continue;
    const uint32_t site = c.site == model::kNoSite ? 0 : c.site + 1;
    const Alloc a{c.event->address, c.event->address + c.bytes(), c.event->t_enter_ns, site};
    if (!allocations_->add(a) && !inexact_)
      inexact_ = fmt::format(
          "a managed allocation (at {:#x}) is written after a unified-memory record it would have taken",
          a.begin);
    ManagedSiteTally& s = sites_[{process_, site}];
    s.totals.allocations += 1;
    s.totals.allocated_bytes += c.bytes();
    s.largest_allocation = std::max(s.largest_allocation, c.bytes());
  }
}

void ManagedFeed::add_records(std::span<const trace::GpuRecord> records) {
  for (const trace::GpuRecord& g : records) {
    if (g.kind != static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory)) continue;
    const Alloc* a = allocations_->find(trace::um_address(g), g.start_ns);
    ManagedSiteTally& s = sites_[{process_, a ? a->site : 0}];
    ManagedTotals& t = s.totals;
    const auto counter = static_cast<trace::UmCounter>(g.cupti_copy_kind);
    const uint64_t dur = g.end_ns > g.start_ns ? g.end_ns - g.start_ns : 0;
    bool merged = true;
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
          merged = s.on_demand.add(g.start_ns, g.end_ns, max_kept_);
        } else if (prefetch_cause(g.src_kind)) {
          t.prefetched_bytes += g.bytes;
        }
        break;
      }
      case trace::UmCounter::GpuPageFault:
        t.gpu_fault_groups += g.bytes;
        merged = s.on_demand.add(g.start_ns, g.end_ns, max_kept_);
        break;
      case trace::UmCounter::CpuPageFault:
        t.cpu_faults += 1;
        break;
      default:
        break;
    }
    if (!merged && !inexact_)
      inexact_ = fmt::format(
          "a unified-memory record starts before {} disjoint on-demand intervals of its site that came "
          "earlier end",
          max_kept_);
  }
}

void ManagedFeed::take(ManagedTally& into) {
  for (auto& [key, s] : sites_) into[key] = std::move(s);
  sites_.clear();
}

// The whole job's tally: each process's allocations, then its records.
ManagedTally managed_tally(const model::Job& job) {
  std::vector<ManagedFeed> feeds;
  feeds.reserve(job.processes.size());
  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) feeds.emplace_back(pi, SIZE_MAX);
  for (const model::Call& c : job.calls) feeds[c.process].add_calls({&c, 1});
  ManagedTally tally;
  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) {
    feeds[pi].add_records(job.processes[pi].trace.gpu_records);
    feeds[pi].take(tally);
  }
  return tally;
}

namespace {

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

Managed managed_of(const model::Job& job, const ManagedTally& tally) {
  Managed m;
  for (const model::Process& p : job.processes) {
    bool on = false;
    for (const auto& n : p.trace.notes) {
      if (n == kUmOnNote)
        on = true;
      else if (n.rfind(kUmUnavailableNote, 0) == 0)
        m.unavailable.push_back(
            fmt::format("pid {}: {}", p.pid(), n.substr(std::char_traits<char>::length(kUmUnavailableNote))));
    }
    m.records_on |= on;
  }
  for (const auto& [key, s] : tally) {
    ManagedTotals t = s.totals;
    t.pid = job.processes[key.first].pid();
    t.callsite = key.second;
    // Allocation sites are not copy sites: the report's call-site table does not list them.
    if (key.second > 0 && key.second <= job.sites.size()) t.frame = job.sites[key.second - 1].frame;
    t.on_demand_ns = s.on_demand.length();
    add_into(m.total, t);
    if (moved_anything(t) || t.allocations) m.sites.push_back(std::move(t));
  }
  std::stable_sort(m.sites.begin(), m.sites.end(), [](const ManagedTotals& a, const ManagedTotals& b) {
    return a.on_demand_ns != b.on_demand_ns ? a.on_demand_ns > b.on_demand_ns
                                            : a.htod_bytes + a.dtoh_bytes > b.htod_bytes + b.dtoh_bytes;
  });
  return m;
}

Managed managed_totals(const model::Job& job) { return managed_of(job, managed_tally(job)); }

std::vector<Finding> find_managed_migrations(const model::Job& job, const Managed& m, const Thresholds& t) {
  if (!m.records_on) return {};
  return managed_migration_findings(job, managed_tally(job), m, t);
}

std::vector<Finding> managed_migration_findings(const model::Job&, const ManagedTally& tally,
                                                const Managed& m, const Thresholds& t) {
  if (!m.records_on) return {};
  Finding f;
  f.kind = FindingKind::ManagedMigrations;
  f.title = "Managed memory migrated on demand (page faults) instead of prefetched";
  f.time_basis = "gpu";
  const model::MachineProfile* profile = t.profile;
  uint64_t recoverable = 0;
  double reference = 0;
  for (const auto& [key, s] : tally) {
    const uint64_t bytes = s.on_demand_htod + s.on_demand_dtoh;
    if (bytes < t.large_bytes) continue;
    const uint64_t time = s.on_demand.length();
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
