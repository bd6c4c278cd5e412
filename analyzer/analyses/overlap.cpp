// Copy/compute overlap, from CUPTI kernel records (`cuxfer record --kernels`):
// how much DMA time ran while kernels ran on the same device, and how long
// synchronous copies kept a GPU without any kernel between its first and last
// kernel (the finding "sync_copy_idle"). All times share the trace's clock
// (GPU records are timestamped on the events' CLOCK_MONOTONIC). overlap.h
// says how a copy is measured while the records are still coming.
#include "analyzer/analyses/overlap.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "analyzer/analyses/finding_builder.h"

namespace cuxfer::analyses {
namespace {

bool is_kernel(const trace::GpuRecord& r) {
  return r.kind == static_cast<uint8_t>(trace::GpuRecordKind::Kernel) && r.end_ns > r.start_ns;
}

// std::push_heap makes a max-heap: these make min-heaps.
bool starts_later(const std::pair<uint64_t, uint64_t>& a, const std::pair<uint64_t, uint64_t>& b) {
  return a.first > b.first;
}

}  // namespace

bool kernels_recorded(const model::Process& p) {
  for (const auto& n : p.trace.notes)
    if (n == "cupti: kernel records on") return true;
  return false;
}

void add_kernel_extents(KernelExtents& x, std::span<const trace::GpuRecord> records) {
  for (const trace::GpuRecord& r : records) {
    if (!is_kernel(r)) continue;
    KernelExtent& e = x[r.device];
    ++e.kernels;
    e.first = std::min(e.first, r.start_ns);
    e.last = std::max(e.last, r.end_ns);
  }
}

KernelOverlapFeed::KernelOverlapFeed(uint32_t pid, KernelExtents extents, Window w)
    : pid_(pid), extents_(std::move(extents)), window_(w) {}

KernelOverlapFeed::Device& KernelOverlapFeed::device(uint32_t d) {
  if (last_ && d == last_device_) return *last_;
  auto [it, added] = devices_.try_emplace(d);
  if (added) {
    if (auto e = extents_.find(d); e != extents_.end()) it->second.extent = e->second;
    if (devices_.size() > window_.max_devices) give_up(Inexact::ManyDevices);
  }
  last_device_ = d;
  last_ = &it->second;
  return it->second;
}

void KernelOverlapFeed::add_kernels(std::span<const trace::GpuRecord> records) {
  for (const trace::GpuRecord& r : records) {
    if (inexact()) return;
    if (!is_kernel(r)) continue;
    Device& d = device(r.device);
    ++d.out.kernels;
    // A copy that ended before the watermark may already be answered without it.
    if (r.start_ns < d.watermark) {
      give_up(Inexact::KernelLate);
      return;
    }
    d.waiting_kernels.emplace_back(r.start_ns, r.end_ns);
    std::push_heap(d.waiting_kernels.begin(), d.waiting_kernels.end(), starts_later);
    if (d.waiting_kernels.size() > window_.kernel_lag) {
      place_next(d);
      let_go(d);
    }
  }
}

void KernelOverlapFeed::place_next(Device& d) {
  std::pop_heap(d.waiting_kernels.begin(), d.waiting_kernels.end(), starts_later);
  const Interval k = d.waiting_kernels.back();
  d.waiting_kernels.pop_back();
  d.watermark = std::max(d.watermark, k.first);
  // Placed in start order: only the last interval can meet this one.
  if (!d.busy.empty() && k.first <= d.busy.back().second)
    d.busy.back().second = std::max(d.busy.back().second, k.second);
  else
    d.busy.push_back(k);
}

void KernelOverlapFeed::push_watermark(Device& d, uint64_t to) {
  while (!d.waiting_kernels.empty() && d.waiting_kernels.front().first < to) place_next(d);
  d.watermark = std::max(d.watermark, to);
  answer_ready(d);
  let_go(d);
}

void KernelOverlapFeed::answer_ready(Device& d) {
  // The sums do not depend on the order of the answers: one sweep, in the
  // order the copies came, keeps the others.
  size_t kept = 0;
  for (const Question& q : d.questions)
    if (q.end <= d.watermark)
      answer(d, q);
    else
      d.questions[kept++] = q;
  d.questions.resize(kept);
}

void KernelOverlapFeed::sweep(Device& d) {
  answer_ready(d);
  // Too many wait (few kernels among many copies): the watermark moves to
  // answer all but a quarter of the limit, those that end first; a kernel
  // record that starts before it later makes the feed inexact, never a
  // different number.
  const size_t limit = window_.max_waiting_copies;
  if (d.questions.size() > limit / 2) {
    const size_t last = d.questions.size() - limit / 4 - 1;  // the latest end answered
    std::nth_element(d.questions.begin(), d.questions.begin() + static_cast<std::ptrdiff_t>(last),
                     d.questions.end(), [](const Question& a, const Question& b) { return a.end < b.end; });
    push_watermark(d, d.questions[last].end);
  }
  // The next sweep once as many more have come (at least 4,096, or the
  // limit): each waiting copy is looked at a constant number of times.
  d.sweep_at = d.questions.size() + std::max(std::min<size_t>(limit, 4096), d.questions.size());
}

void KernelOverlapFeed::let_go(Device& d) {
  const size_t keep = window_.keep_kernels;
  // Every kernel in: copies given from now on are answered from what is kept.
  if (keep == SIZE_MAX || d.watermark == UINT64_MAX || d.busy.size() <= std::max(2 * keep, d.let_go_at)) return;
  answer_ready(d);
  // Intervals that end before every waiting copy starts, and before the
  // watermark (no kernel still to come can join them), answer nothing more.
  uint64_t floor = d.watermark;
  for (const Question& q : d.questions) floor = std::min(floor, q.begin);
  while (d.busy.size() > keep && d.busy.front().second <= floor) {
    const Interval i = d.busy.front();
    d.dropped_ns += i.second - i.first;
    d.dropped_begin = std::min(d.dropped_begin, i.first);
    d.dropped_end = i.second;
    d.busy.pop_front();
  }
  // Waiting copies may hold the front: looked at again once `keep` more are placed.
  d.let_go_at = d.busy.size() + keep;
  if (d.busy.size() > window_.max_kernels) give_up(Inexact::HeldKernels);
}

uint64_t KernelOverlapFeed::covered(const Device& d, uint64_t b, uint64_t e) const {
  if (e <= b) return 0;
  uint64_t n = 0;
  auto it = std::upper_bound(d.busy.begin(), d.busy.end(), Interval{b, UINT64_MAX});
  if (it != d.busy.begin()) --it;
  for (; it != d.busy.end() && it->first < e; ++it) {
    const uint64_t lo = std::max(b, it->first), hi = std::min(e, it->second);
    if (hi > lo) n += hi - lo;
  }
  return n;
}

void KernelOverlapFeed::answer(Device& d, const Question& q) {
  const uint64_t under = std::min(q.ns, covered(d, q.begin, q.end));
  if (!q.cpu) {
    d.out.dma_under_kernels_ns += under;
    return;
  }
  const uint64_t idle = q.ns - under;
  d.out.sync_copy_idle_ns += idle;
  if (idle == 0) return;
  if (q.site_id >= sites_.size()) sites_.resize(q.site_id + 1);
  FindingsTally::SiteSum& s = sites_[q.site_id];
  ++s.calls;
  s.bytes += q.bytes;
  s.time_ns += q.ns;
  s.max_ns = std::max(s.max_ns, q.ns);
  s.recoverable_ns += idle;
}

void KernelOverlapFeed::ask(Device& d, const Question& q) {
  if (q.end > q.begin) {
    if (q.begin < d.dropped_end && q.end > d.dropped_begin) {
      give_up(Inexact::CopyLate);
      return;
    }
    if (q.end > d.watermark) {
      // Answered in sweeps, once no kernel still to come can start before its end.
      d.questions.push_back(q);
      if (d.questions.size() >= d.sweep_at) sweep(d);
      return;
    }
  }
  answer(d, q);
}

void KernelOverlapFeed::add_copies(std::span<const model::Call> calls) {
  for (const model::Call& c : calls) add_copy(c);
}

void KernelOverlapFeed::add_copy(const model::Call& c) {
  if (inexact() || c.kind() != trace::EventKind::Copy || c.failed() || c.event->device < 0) return;
  Device& d = device(static_cast<uint32_t>(c.event->device));
  const bool kernels = d.extent.kernels > 0;
  if (c.has_gpu_time()) {
    d.out.dma_ns += c.gpu_ns;
    if (kernels) ask(d, {c.gpu_begin_ns, c.gpu_end_ns, c.gpu_ns, 0, 0, false});
  }
  // Only between the device's first and last kernel: before and after, an
  // idle GPU had nothing to compute anyway.
  if (kernels && model::cpu_time_measures_transfer(*c.event, c.cls) && c.event->t_enter_ns >= d.extent.first &&
      c.event->t_exit_ns <= d.extent.last) {
    const uint64_t cpu = c.cpu_ns();
    d.out.sync_copy_ns += cpu;
    ask(d, {c.event->t_enter_ns, c.event->t_exit_ns, cpu, c.bytes(), c.site == model::kNoSite ? 0 : c.site + 1,
            true});
  }
}

void KernelOverlapFeed::finish_kernels() {
  for (auto& [id, d] : devices_) {
    if (inexact()) return;
    while (!d.waiting_kernels.empty()) place_next(d);
    d.watermark = UINT64_MAX;
    answer_ready(d);
  }
}

void KernelOverlapFeed::take(std::vector<DeviceOverlap>& devices,
                             std::vector<FindingsTally::SiteSum>& sites) const {
  for (const auto& [id, d] : devices_) {
    DeviceOverlap o = d.out;
    o.pid = pid_;
    o.device = id;
    o.kernel_busy_ns = d.dropped_ns;
    for (const Interval& i : d.busy) o.kernel_busy_ns += i.second - i.first;
    devices.push_back(o);
  }
  if (sites.size() < sites_.size()) sites.resize(sites_.size());
  for (size_t id = 0; id < sites_.size(); ++id) {
    FindingsTally::SiteSum& a = sites[id];
    const FindingsTally::SiteSum& b = sites_[id];
    a.calls += b.calls;
    a.bytes += b.bytes;
    a.time_ns += b.time_ns;
    a.max_ns = std::max(a.max_ns, b.max_ns);
    a.recoverable_ns += b.recoverable_ns;
  }
}

std::string kernel_window_reason(KernelOverlapFeed::Inexact why) {
  using Inexact = KernelOverlapFeed::Inexact;
  const KernelOverlapFeed::Window window;
  switch (why) {
    case Inexact::KernelLate:
      return fmt::format(
          "a kernel record starts before copies already measured against the kernels (more than {} kernel "
          "records out of time order): its kernel records lie too far from their copies",
          window.kernel_lag);
    case Inexact::CopyLate:
      return "a copy starts before kernels already let go: its copies lie too far from their kernel records";
    case Inexact::HeldKernels:
      return fmt::format("more than {} kernel intervals wait for the copies that may overlap them",
                         window.max_kernels);
    case Inexact::ManyDevices:
      return fmt::format("its records name more than {} devices", window.max_devices);
    case Inexact::No: break;
  }
  return "its kernel records cannot be measured a block at a time";
}

void tally_overlap(const model::Job& job, JobTally& tally) {
  std::vector<std::optional<KernelOverlapFeed>> feeds(job.processes.size());
  for (size_t p = 0; p < job.processes.size(); ++p) {
    const model::Process& process = job.processes[p];
    if (!kernels_recorded(process)) continue;
    tally.overlap.kernels_recorded = true;
    KernelExtents extents;
    add_kernel_extents(extents, process.trace.gpu_records);
    // The job holds every record: all placed before the copies come, nothing let go.
    KernelOverlapFeed& feed = feeds[p].emplace(process.pid(), std::move(extents), KernelOverlapFeed::unbounded());
    feed.add_kernels(process.trace.gpu_records);
    feed.finish_kernels();
  }
  if (!tally.overlap.kernels_recorded) return;
  for (const model::Call& c : job.calls)
    if (feeds[c.process]) feeds[c.process]->add_copy(c);
  for (const auto& feed : feeds)
    if (feed) feed->take(tally.overlap.devices, tally.findings.sync_idle_sites);
}

Overlap overlap_of(const JobTally& tally) {
  Overlap o;
  o.kernels_recorded = tally.overlap.kernels_recorded;
  if (o.kernels_recorded) o.devices = tally.overlap.devices;
  return o;
}

std::vector<Finding> find_sync_copy_idle(const JobTally& tally) {
  Finding f;
  f.kind = FindingKind::SyncCopyIdle;
  f.title = "Synchronous copies kept the GPU idle between kernels";
  FindingBuilder builder(f);
  const std::vector<FindingsTally::SiteSum>& sites = tally.findings.sync_idle_sites;
  for (size_t id = 0; id < sites.size(); ++id)
    if (sites[id].calls > 0)
      builder.add_sum(static_cast<uint32_t>(id), sites[id].calls, sites[id].bytes, sites[id].time_ns,
                      sites[id].max_ns, sites[id].recoverable_ns);
  if (f.calls == 0 || builder.recoverable() < 1'000'000) return {};  // under 1 ms in all: not worth a finding
  f.time_basis = "cpu_blocked";
  builder.finish();
  f.reference_source = "GPU idle time (no kernel on the device) while the copies blocked their thread; an upper "
                       "bound: what full copy/compute overlap would hide";
  f.advice =
      "While these copies ran, no kernel ran on their GPU, and the next kernel waited for the copy to return. "
      "Overlap them: copy from pinned memory with cudaMemcpyAsync on a stream other than the compute stream "
      "and prefetch the next batch while the current one computes (PyTorch: DataLoader(pin_memory=True) and "
      ".to(device, non_blocking=True)). `--rewrite=pin` makes such copies shorter, not concurrent.";
  return {std::move(f)};
}

// The job-holding entry points (report.h), from the same sums.
Overlap overlap_totals(const model::Job& job) {
  JobTally tally;
  tally_overlap(job, tally);
  return overlap_of(tally);
}

std::vector<Finding> find_sync_copy_idle(const model::Job& job, const Thresholds&) {
  JobTally tally;
  tally_overlap(job, tally);
  return find_sync_copy_idle(tally);
}

}  // namespace cuxfer::analyses
