// Per-device totals of a job: what each GPU (per process: device ordinals are
// per process) moved in each direction, with the time it took. Peer copies are
// counted on the device the call named as current/destination.
#include <map>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

std::vector<DeviceTotals> device_totals(const model::Job& job) {
  std::map<std::pair<uint32_t, int>, DeviceTotals> by;
  // Consecutive calls nearly always share process and device: look up on change only.
  std::pair<uint32_t, int> last{UINT32_MAX, 0};
  DeviceTotals* cur = nullptr;
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy || c.failed()) continue;
    const std::pair<uint32_t, int> key{c.process, c.event->device};
    if (key != last || !cur) {
      cur = &by[key];
      last = key;
    }
    DeviceTotals& d = *cur;
    d.pid = job.processes[c.process].pid();
    d.device = c.event->device;
    ++d.calls;
    d.bytes += c.bytes();
    d.cpu_blocked_ns += c.cpu_ns();
    if (c.has_gpu_time()) {
      d.gpu_ns = d.gpu_ns.value_or(0) + c.gpu_ns;
    }
    switch (c.cls.direction) {
      case trace::Direction::HtoD: d.h2d_bytes += c.bytes(); break;
      case trace::Direction::DtoH: d.d2h_bytes += c.bytes(); break;
      case trace::Direction::DtoD: d.d2d_bytes += c.bytes(); break;
      case trace::Direction::Peer: d.peer_bytes += c.bytes(); break;
      default: break;
    }
    if (model::crosses_host_link(c.cls.direction) && model::is_pageable(c.cls)) d.pageable_bytes += c.bytes();
  }
  std::vector<DeviceTotals> out;
  for (auto& [k, d] : by) out.push_back(d);
  return out;
}

}  // namespace cuxfer::analyses
