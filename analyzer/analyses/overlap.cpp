// Copy/compute overlap, from CUPTI kernel records (`cuxfer record --kernels`):
// how much DMA time ran while kernels ran on the same device, and how long
// synchronous copies kept a GPU without any kernel between its first and last
// kernel (the finding "sync_copy_idle"). All times share the trace's clock
// (GPU records are timestamped on the events' CLOCK_MONOTONIC).
#include <algorithm>
#include <map>

#include "analyzer/analyses/finding_builder.h"

namespace cuxfer::analyses {
namespace {

using Interval = std::pair<uint64_t, uint64_t>;

bool kernels_recorded(const model::Process& p) {
  for (const auto& n : p.trace.notes)
    if (n == "cupti: kernel records on") return true;
  return false;
}

// Kernel intervals of one device, merged into a sorted, disjoint union.
struct Busy {
  std::vector<Interval> spans;
  uint64_t kernels = 0;
  uint64_t first = UINT64_MAX, last = 0;

  void finish() {
    std::sort(spans.begin(), spans.end());
    std::vector<Interval> merged;
    for (auto s : spans) {
      if (!merged.empty() && s.first <= merged.back().second) merged.back().second = std::max(merged.back().second, s.second);
      else merged.push_back(s);
    }
    spans.swap(merged);
  }
  uint64_t busy_ns() const {
    uint64_t n = 0;
    for (auto [b, e] : spans) n += e - b;
    return n;
  }
  // Time of [b, e) covered by kernels.
  uint64_t covered(uint64_t b, uint64_t e) const {
    if (e <= b) return 0;
    uint64_t n = 0;
    auto it = std::upper_bound(spans.begin(), spans.end(), Interval{b, UINT64_MAX});
    if (it != spans.begin()) --it;
    for (; it != spans.end() && it->first < e; ++it) {
      const uint64_t lo = std::max(b, it->first), hi = std::min(e, it->second);
      if (hi > lo) n += hi - lo;
    }
    return n;
  }
};

// Per process, per device.
std::map<std::pair<uint32_t, uint32_t>, Busy> kernel_busy(const model::Job& job) {
  std::map<std::pair<uint32_t, uint32_t>, Busy> out;
  for (uint32_t p = 0; p < job.processes.size(); ++p) {
    if (!kernels_recorded(job.processes[p])) continue;
    for (const auto& g : job.processes[p].trace.gpu_records) {
      if (g.kind != static_cast<uint8_t>(trace::GpuRecordKind::Kernel) || g.end_ns <= g.start_ns) continue;
      Busy& b = out[{p, g.device}];
      b.spans.emplace_back(g.start_ns, g.end_ns);
      ++b.kernels;
      b.first = std::min(b.first, g.start_ns);
      b.last = std::max(b.last, g.end_ns);
    }
  }
  for (auto& [k, b] : out) b.finish();
  return out;
}

bool is_copy(const model::Call& c) { return c.kind() == trace::EventKind::Copy && !c.failed(); }

}  // namespace

Overlap overlap_totals(const model::Job& job) {
  Overlap o;
  for (const auto& p : job.processes) o.kernels_recorded |= kernels_recorded(p);
  if (!o.kernels_recorded) return o;
  auto busy = kernel_busy(job);
  std::map<std::pair<uint32_t, uint32_t>, DeviceOverlap> dev;
  for (const auto& [key, b] : busy) {
    DeviceOverlap& d = dev[key];
    d.pid = job.processes[key.first].pid();
    d.device = key.second;
    d.kernels = b.kernels;
    d.kernel_busy_ns = b.busy_ns();
  }
  for (const auto& c : job.calls) {
    if (!is_copy(c) || c.event->device < 0 || !kernels_recorded(job.processes[c.process])) continue;
    const std::pair<uint32_t, uint32_t> key{c.process, static_cast<uint32_t>(c.event->device)};
    auto bit = busy.find(key);
    DeviceOverlap& d = dev[key];
    d.pid = job.processes[c.process].pid();
    d.device = key.second;
    if (c.has_gpu_time()) {
      d.dma_ns += c.gpu_ns;
      if (bit != busy.end())
        d.dma_under_kernels_ns += std::min(c.gpu_ns, bit->second.covered(c.gpu_begin_ns, c.gpu_end_ns));
    }
    if (model::cpu_time_measures_transfer(*c.event, c.cls) && bit != busy.end() &&
        c.event->t_enter_ns >= bit->second.first && c.event->t_exit_ns <= bit->second.last) {
      const uint64_t cpu = c.cpu_ns();
      d.sync_copy_ns += cpu;
      d.sync_copy_idle_ns += cpu - std::min(cpu, bit->second.covered(c.event->t_enter_ns, c.event->t_exit_ns));
    }
  }
  for (auto& [k, d] : dev) o.devices.push_back(d);
  return o;
}

std::vector<Finding> find_sync_copy_idle(const model::Job& job, const Thresholds&) {
  auto busy = kernel_busy(job);
  if (busy.empty()) return {};
  Finding f;
  f.kind = FindingKind::SyncCopyIdle;
  f.title = "Synchronous copies kept the GPU idle between kernels";
  FindingBuilder builder(f);
  for (const auto& c : job.calls) {
    if (!is_copy(c) || c.event->device < 0 || !model::cpu_time_measures_transfer(*c.event, c.cls)) continue;
    auto bit = busy.find({c.process, static_cast<uint32_t>(c.event->device)});
    if (bit == busy.end()) continue;
    const Busy& b = bit->second;
    // Only between the device's first and last kernel: before and after, an
    // idle GPU had nothing to compute anyway.
    if (c.event->t_enter_ns < b.first || c.event->t_exit_ns > b.last) continue;
    const uint64_t cpu = c.cpu_ns();
    const uint64_t idle = cpu - std::min(cpu, b.covered(c.event->t_enter_ns, c.event->t_exit_ns));
    if (idle == 0) continue;
    builder.add(c, cpu, idle);
  }
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

}  // namespace cuxfer::analyses
