// Per-device totals of a job: what each GPU (per process: device ordinals are
// per process) moved in each direction, with the time it took. Peer copies are
// counted on their destination device, and per (source, destination) pair.
//
// Counted during the one pass over the calls (add_device_copy in tally.h, a
// flat slot per process and device instead of a std::map looked up per copy:
// tally.h says why one pass); device_totals() only lists the slots.
#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

std::vector<DeviceTotals> device_totals(const model::Job& job, const JobTally& tally) {
  std::vector<DeviceTotals> out;  // process, then device order
  for (uint32_t p = 0; p < tally.devices.by_process.size(); ++p) {
    const auto& slots = tally.devices.by_process[p];
    for (size_t i = 0; i < slots.size(); ++i) {
      const DeviceAcc& a = slots[i];
      if (a.out.calls == 0) continue;
      DeviceTotals d = a.out;
      d.pid = job.processes[p].pid();
      d.device = static_cast<int>(i) - DeviceTally::kOffset;
      if (a.gpu) d.gpu_ns = a.gpu_ns;
      d.h2d_bytes = a.dir_bytes[static_cast<unsigned>(trace::Direction::HtoD)];
      d.d2h_bytes = a.dir_bytes[static_cast<unsigned>(trace::Direction::DtoH)];
      d.d2d_bytes = a.dir_bytes[static_cast<unsigned>(trace::Direction::DtoD)];
      d.peer_bytes = a.dir_bytes[static_cast<unsigned>(trace::Direction::Peer)];
      out.push_back(d);
    }
  }
  return out;
}

void add_peer_copy(DeviceTally& t, const model::Call& c) {
  // The shim writes the source device + 1 in a device-to-device copy's address (trace/event.h).
  const uint64_t src = c.event->address;
  const int src_device = src >= 1 && src <= 128 ? static_cast<int>(src) - 1 : -1;
  PeerPair& p = t.peers[{c.process, src_device, c.event->device}];
  p.src_device = src_device;
  p.dst_device = c.event->device;
  ++p.calls;
  p.bytes += c.bytes();
  p.cpu_blocked_ns += c.cpu_ns();
  if (c.has_gpu_time()) p.gpu_ns = p.gpu_ns.value_or(0) + c.gpu_ns;
}

std::vector<PeerPair> peer_pairs(const model::Job& job, const JobTally& tally) {
  std::vector<PeerPair> out;
  for (const auto& [key, p] : tally.devices.peers) {
    out.push_back(p);
    out.back().pid = job.processes[std::get<0>(key)].pid();
  }
  return out;
}

// On its own (tests, callers of one part): a whole tally.
std::vector<DeviceTotals> device_totals(const model::Job& job) { return device_totals(job, tally_calls(job, {})); }

}  // namespace cuxfer::analyses
