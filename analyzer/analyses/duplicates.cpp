// Findings from the shim's sampled content fingerprints (EventKind::Fingerprint,
// shim/record/fingerprint.h; on by default for copies of >= 1 MiB):
//   duplicate_uploads  an H2D of the bytes the device buffer already held, as
//                      far as the recorded copies show (the last upload to it,
//                      or the last download from it, had the same fingerprint)
//   round_trips        an H2D of bytes that an earlier D2H brought to the host
//                      unchanged (downloaded, then uploaded back)
// Fingerprints sample the buffer (33 words), and kernels may change a device
// buffer between copies without the shim seeing it: both findings say
// "likely" and leave the call to the user.
#include <algorithm>
#include <unordered_map>

#include "analyzer/analyses/finding_builder.h"

namespace cuxfer::analyses {
namespace {

struct Print {
  uint64_t hash = 0, device_ptr = 0;
};

uint64_t copy_time(const model::Call& c) { return c.has_gpu_time() ? c.gpu_ns : c.cpu_ns(); }

}  // namespace

std::vector<Finding> find_duplicates_and_round_trips(const model::Job& job, const Thresholds&) {
  // (process, correlation id) -> fingerprint
  std::unordered_map<uint64_t, Print> prints;
  for (const auto& s : job.shim_calls)
    if (s.kind() == trace::EventKind::Fingerprint)
      prints[(uint64_t{s.process} << 32) | s.event->correlation_id] = {s.event->address, s.event->stream};
  if (prints.empty()) return {};

  struct Item {
    const model::Call* call;
    Print print;
  };
  std::vector<Item> items;
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy || c.failed()) continue;
    auto it = prints.find((uint64_t{c.process} << 32) | c.event->correlation_id);
    if (it != prints.end()) items.push_back({&c, it->second});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.call->process != b.call->process ? a.call->process < b.call->process
                                              : a.call->event->t_enter_ns < b.call->event->t_enter_ns;
  });

  Finding dup, trip;
  dup.kind = FindingKind::DuplicateUploads;
  dup.title = "The same bytes uploaded again to the same device buffer (likely)";
  trip.kind = FindingKind::RoundTrips;
  trip.title = "Data downloaded and uploaded back unchanged (likely)";
  FindingBuilder dup_b(dup), trip_b(trip);
  uint32_t process = UINT32_MAX;
  std::unordered_map<uint64_t, uint64_t> device_holds;  // device pointer ^ size -> fingerprint last seen there
  std::unordered_map<uint64_t, bool> downloaded;        // fingerprints brought to the host
  for (const Item& it : items) {
    const model::Call& c = *it.call;
    if (c.process != process) {
      process = c.process;
      device_holds.clear();
      downloaded.clear();
    }
    const uint64_t where = it.print.device_ptr * 0x9E3779B97F4A7C15ull ^ c.bytes();
    if (c.cls.direction == trace::Direction::DtoH) {
      device_holds[where] = it.print.hash;
      downloaded[it.print.hash] = true;
    } else if (c.cls.direction == trace::Direction::HtoD) {
      auto held = device_holds.find(where);
      // Every byte of such a copy moved nothing new: all its time is recoverable.
      if (held != device_holds.end() && held->second == it.print.hash) dup_b.add(c, copy_time(c), copy_time(c));
      else if (downloaded.count(it.print.hash)) trip_b.add(c, copy_time(c), copy_time(c));
      device_holds[where] = it.print.hash;
    }
  }
  std::vector<Finding> out;
  for (auto* f : {&dup, &trip}) {
    if (f->calls == 0) continue;
    (f == &dup ? dup_b : trip_b).finish();
    f->time_basis = "mixed";
    f->reference_source = "all of these copies' time: they move nothing new (sampled fingerprints; see advice)";
    out.push_back(std::move(*f));
  }
  for (auto& f : out) {
    if (f.kind == FindingKind::DuplicateUploads)
      f.advice =
          "These uploads sent a device buffer the bytes it already held, as far as the recorded copies show "
          "(same sampled fingerprint as the last upload to it or download from it). Keep the data resident on "
          "the GPU and upload only what changed. Check first: a kernel may have changed the buffer in between "
          "(the shim does not see kernels' writes), and fingerprints sample 33 words, not every byte.";
    else
      f.advice =
          "These uploads sent back bytes that an earlier download brought to the host unchanged (same sampled "
          "fingerprint): a device -> host -> device round trip. Keep the data on the GPU (copy device to device, "
          "or do the host step on the GPU). Fingerprints sample 33 words, not every byte.";
  }
  return out;
}

}  // namespace cuxfer::analyses
