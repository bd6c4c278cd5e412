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
#include "analyzer/analyses/duplicates.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "analyzer/analyses/finding_builder.h"

namespace cuxfer::analyses {
namespace {

void add_to(std::vector<FindingsTally::SiteSum>& sites, const FingerprintedCopy& c) {
  if (c.site_id >= sites.size()) sites.resize(size_t{c.site_id} + 1);
  FindingsTally::SiteSum& s = sites[c.site_id];
  // Every byte of such a copy moved nothing new: all its time is recoverable.
  ++s.calls;
  s.bytes += c.bytes;
  s.time_ns += c.time_ns;
  s.max_ns = std::max(s.max_ns, c.time_ns);
  s.recoverable_ns += c.time_ns;
}

constexpr const char* kDuplicateTitle = "The same bytes uploaded again to the same device buffer (likely)";
constexpr const char* kRoundTripTitle = "Data downloaded and uploaded back unchanged (likely)";
constexpr const char* kReference =
    "all of these copies' time: they move nothing new (sampled fingerprints; see advice)";
constexpr const char* kDuplicateAdvice =
    "These uploads sent a device buffer the bytes it already held, as far as the recorded copies show "
    "(same sampled fingerprint as the last upload to it or download from it). Keep the data resident on "
    "the GPU and upload only what changed. Check first: a kernel may have changed the buffer in between "
    "(the shim does not see kernels' writes), and fingerprints sample 33 words, not every byte.";
constexpr const char* kRoundTripAdvice =
    "These uploads sent back bytes that an earlier download brought to the host unchanged (same sampled "
    "fingerprint): a device -> host -> device round trip. Keep the data on the GPU (copy device to device, "
    "or do the host step on the GPU). Fingerprints sample 33 words, not every byte.";

}  // namespace

void Fingerprints::add(uint32_t correlation_id, uint64_t hash, uint64_t device_ptr) {
  entries_.push_back({{hash, device_ptr}, correlation_id, static_cast<uint32_t>(entries_.size())});
}

void Fingerprints::finish() {
  // By id, then in the order added (its index while there are fewer than
  // 2^32 entries; a stable sort beyond), the last of each id kept.
  if (entries_.size() <= UINT32_MAX)
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.correlation_id != b.correlation_id ? a.correlation_id < b.correlation_id : a.order < b.order;
    });
  else
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.correlation_id < b.correlation_id; });
  size_t kept = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i + 1 < entries_.size() && entries_[i + 1].correlation_id == entries_[i].correlation_id) continue;
    entries_[kept++] = entries_[i];
  }
  entries_.resize(kept);  // not shrunk: a copy costs more than the pages past the end, mostly never touched
}

uint32_t Fingerprints::find(uint32_t correlation_id) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), correlation_id,
                             [](const Entry& e, uint32_t id) { return e.correlation_id < id; });
  if (it == entries_.end() || it->correlation_id != correlation_id) return kNone;
  return static_cast<uint32_t>(it - entries_.begin());
}

void add_fingerprinted_copy(const model::Call& c, const Fingerprints& prints,
                            std::vector<FingerprintedCopy>& copies) {
  if (c.kind() != trace::EventKind::Copy || c.failed()) return;
  const uint32_t print = prints.find(c.event->correlation_id);
  if (print == Fingerprints::kNone) return;
  FingerprintedCopy f;
  f.t_enter_ns = c.event->t_enter_ns;
  f.bytes = c.bytes();
  f.time_ns = c.has_gpu_time() ? c.gpu_ns : c.cpu_ns();
  f.print = print;
  f.site_id = c.site == model::kNoSite ? 0 : c.site + 1;
  f.order = static_cast<uint32_t>(copies.size());
  f.direction = c.cls.direction;
  copies.push_back(f);
}

void add_repeated_copies(std::vector<FingerprintedCopy>& copies, const Fingerprints& prints,
                         FindingsTally& f) {
  // By entry time, trace order among equal times (`order` while there are
  // fewer than 2^32 copies, a stable sort beyond: no buffer the size of the copies).
  if (copies.size() <= UINT32_MAX)
    std::sort(copies.begin(), copies.end(), [](const FingerprintedCopy& a, const FingerprintedCopy& b) {
      return a.t_enter_ns != b.t_enter_ns ? a.t_enter_ns < b.t_enter_ns : a.order < b.order;
    });
  else
    std::stable_sort(
        copies.begin(), copies.end(),
        [](const FingerprintedCopy& a, const FingerprintedCopy& b) { return a.t_enter_ns < b.t_enter_ns; });
  std::unordered_map<uint64_t, uint64_t> device_holds;  // device pointer ^ size -> fingerprint last seen there
  std::unordered_set<uint64_t> downloaded;              // fingerprints brought to the host
  for (const FingerprintedCopy& c : copies) {
    const Fingerprint& print = prints[c.print];
    const uint64_t where = print.device_ptr * 0x9E3779B97F4A7C15ull ^ c.bytes;
    if (c.direction == trace::Direction::DtoH) {
      device_holds[where] = print.hash;
      downloaded.insert(print.hash);
    } else if (c.direction == trace::Direction::HtoD) {
      auto held = device_holds.find(where);
      if (held != device_holds.end() && held->second == print.hash)
        add_to(f.duplicate_sites, c);
      else if (downloaded.count(print.hash))
        add_to(f.round_trip_sites, c);
      device_holds[where] = print.hash;
    }
  }
}

std::vector<Finding> repeated_copy_findings(const FindingsTally& f) {
  std::vector<Finding> out;
  for (FindingKind kind : {FindingKind::DuplicateUploads, FindingKind::RoundTrips}) {
    const bool duplicates = kind == FindingKind::DuplicateUploads;
    Finding finding;
    FindingBuilder b(finding);
    const std::vector<FindingsTally::SiteSum>& sites = duplicates ? f.duplicate_sites : f.round_trip_sites;
    for (uint32_t id = 0; id < sites.size(); ++id) {
      const FindingsTally::SiteSum& s = sites[id];
      if (s.calls > 0) b.add_sum(id, s.calls, s.bytes, s.time_ns, s.max_ns, s.recoverable_ns);
    }
    if (finding.calls == 0) continue;
    b.finish();
    finding.kind = kind;
    finding.title = duplicates ? kDuplicateTitle : kRoundTripTitle;
    finding.time_basis = "mixed";
    finding.reference_source = kReference;
    finding.advice = duplicates ? kDuplicateAdvice : kRoundTripAdvice;
    out.push_back(std::move(finding));
  }
  return out;
}

void add_job_repeated_copies(const model::Job& job, FindingsTally& f) {
  // Each process's fingerprints, then its fingerprinted copies, walked on
  // their own: the process's, as a streamed report walks them.
  std::vector<Fingerprints> prints(job.processes.size());
  bool any = false;
  for (const auto& s : job.shim_calls)
    if (s.kind() == trace::EventKind::Fingerprint && s.process < prints.size()) {
      prints[s.process].add(s.event->correlation_id, s.event->address, s.event->stream);
      any = true;
    }
  if (!any) return;
  for (Fingerprints& p : prints) p.finish();
  std::vector<std::vector<FingerprintedCopy>> copies(job.processes.size());
  for (const auto& c : job.calls)
    if (c.process < copies.size()) add_fingerprinted_copy(c, prints[c.process], copies[c.process]);
  for (size_t p = 0; p < copies.size(); ++p) add_repeated_copies(copies[p], prints[p], f);
}

std::vector<Finding> find_duplicates_and_round_trips(const model::Job& job, const Thresholds&) {
  FindingsTally f;
  add_job_repeated_copies(job, f);
  return repeated_copy_findings(f);
}

}  // namespace cuxfer::analyses
