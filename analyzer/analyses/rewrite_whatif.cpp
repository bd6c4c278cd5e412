// The finding "rewrite_candidates": what `cuxfer record --rewrite=pin` should
// bring to a run recorded without it, copy by copy, with the shim's own rules
// (docs/report.md, "Rewrite what-if"):
//   - a pageable 1D H2D/D2H copy of a buffer (same host address and size)
//     that is copied again, of at least the registration minimum, runs in
//     place from its second copy on: predicted at the pinned bandwidth;
//   - otherwise one of at least the direction's staging threshold is staged:
//     predicted by the staging model (machine profile), or at 70 % of the
//     pinned reference without one (what staging reached on the H200);
//   - anything else passes through unchanged.
// Predictions are estimates and labelled so; a run recorded with the rewrite
// is compared with `cuxfer diff` instead, which measures.
//
// The per-copy work runs inside the one pass over the calls (tally_calls,
// tally.h says why): add_rewrite_copy() below, called for each successful
// pageable H2D/D2H copy, in call order. find_rewrite_candidates() only
// finishes the sums (O(call sites)).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/text/units.h"

namespace cuxfer::analyses {
namespace {

using trace::Direction;

bool rewrite_was_on(const model::Job& job, uint32_t process) { return model::rewrite_pin_on(job.processes[process].trace); }

size_t buffer_hash(uint32_t process, uint64_t address, uint64_t bytes) {
  uint64_t h = address * 0x9E3779B97F4A7C15ull ^ (bytes + 0x632BE59BD9B4E019ull + (uint64_t{process} << 40));
  return static_cast<size_t>(h ^ (h >> 29));
}

}  // namespace

// Inline here (its only caller is add_rewrite_copy below); growing is apart.
inline bool BufferSet::insert(uint32_t process, uint64_t address, uint64_t bytes) {
  if (2 * (size_ + 1) > slots_.size()) [[unlikely]] grow();  // keep at most half full: short probes
  const size_t mask = slots_.size() - 1;
  for (size_t i = buffer_hash(process, address, bytes) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used) {
      s = {address, bytes, process, true};
      ++size_;
      return true;
    }
    if (s.address == address && s.bytes == bytes && s.process == process) return false;
  }
}

void BufferSet::grow() {
  std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
  old.swap(slots_);
  size_ = 0;
  for (const Slot& s : old)
    if (s.used) insert(s.process, s.address, s.bytes);
}

void start_rewrite_whatif(RewriteTally& r, const model::Job& job, const Thresholds& t) {
  r.profile = t.profile;
  r.threads = r.profile ? std::clamp(r.profile->cores / 2, 1u, 8u) : 8;
  r.stage_min[0] = t.stage_min_h2d;
  r.stage_min[1] = t.stage_min_d2h;
  if (r.profile)
    for (int dir = 0; dir < 2; ++dir) r.stage_min[dir] = r.profile->stage_min(dir, r.threads).value_or(UINT64_MAX);
  r.register_min = t.register_min;
  r.nominal_pinned_gbps = t.nominal_pinned_gbps;
  r.on.assign(job.processes.size(), 0);
  for (uint32_t p = 0; p < job.processes.size(); ++p) r.on[p] = rewrite_was_on(job, p);
  r.sites.assign(job.sites.size() + 1, {});
}

void add_rewrite_copy(RewriteTally& r, const model::Call& c, bool measured_by_cpu) {
  // The caller checked: a successful pageable H2D/D2H copy.
  if (r.on[c.process] || c.bytes() == 0) return;
  if (c.event->flags & (trace::kFlagStaged | trace::kFlagRegistered)) return;
  if (!c.has_gpu_time() && !measured_by_cpu) return;
  const uint64_t bytes = c.bytes();
  const uint64_t time = c.has_gpu_time() ? c.gpu_ns : c.cpu_ns();
  const int dir = c.cls.direction == Direction::HtoD ? 0 : 1;
  const double pinned = r.profile ? r.profile->pinned_gbps(dir, bytes) : r.nominal_pinned_gbps;
  // Registered in place from its second copy on: a buffer (same process, host
  // address and size) of at least the registration minimum copied before.
  // (Copied before implies copied at least twice, the shim's reuse rule.)
  const bool later_use = bytes >= r.register_min && !r.seen.insert(c.process, c.event->address, bytes);
  // Otherwise staged from the direction's threshold on; smaller ones pass
  // through: no change predicted. (Counted with 0/1 adds: which of the two
  // varies from copy to copy.)
  const bool staged = !later_use && bytes >= r.stage_min[dir];
  if (!later_use && !staged) return;
  r.registered += later_use;
  r.staged += staged;
  const double predicted =
      later_use ? static_cast<double>(bytes) / pinned
                : r.profile ? r.profile->staged_ns(dir, bytes, r.threads) : static_cast<double>(bytes) / (0.7 * pinned);
  const uint64_t p = static_cast<uint64_t>(std::llround(std::min<double>(predicted, static_cast<double>(time))));
  ++r.calls;
  r.largest = std::max(r.largest, bytes);
  r.bytes += bytes;
  r.time_ns += time;
  r.max_ns = std::max(r.max_ns, time);
  r.gpu_calls += c.has_gpu_time();
  r.predicted_ns += p;
  RewriteSite& s = r.sites[c.site == model::kNoSite ? 0 : c.site + 1];
  ++s.calls;
  s.bytes += bytes;
  s.time_ns += time;
  s.max_ns = std::max(s.max_ns, time);
  s.recoverable_ns += time - p;
}

namespace {

// What the rewrite would do with the candidates, a clause per path taken:
// "14 of these copies reuse a buffer ..., 1 would be staged ...". A path no
// copy takes is left out ("0 of these copies reuse" told the user nothing).
std::string rewrite_paths(const RewriteTally& r) {
  std::vector<std::string> clauses;
  if (r.registered)
    clauses.push_back(text::format_count(r.registered) + " of these copies " +
                      (r.registered == 1 ? "reuses" : "reuse") +
                      " a buffer the rewrite would register in place after its first copy");
  if (r.staged)
    clauses.push_back(text::format_count(r.staged) + (clauses.empty() ? (r.staged == 1 ? " copy" : " copies") : "") +
                      " would be staged through pinned buffers");
  std::string out;
  for (const auto& c : clauses) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

std::vector<Finding> find_rewrite_candidates(const JobTally& tally, const Thresholds& t) {
  const RewriteTally& r = tally.rewrite;
  if (r.calls == 0 || r.time_ns <= r.predicted_ns) return {};
  const model::MachineProfile* profile = r.profile;
  Finding f;
  f.kind = FindingKind::RewriteCandidates;
  f.title = "Copies that --rewrite=pin would speed up";
  f.calls = r.calls;
  f.bytes = r.bytes;
  f.time_ns = r.time_ns;
  f.max_ns = r.max_ns;
  f.estimated_recoverable_ns = r.time_ns - r.predicted_ns;
  f.time_basis = r.gpu_calls == f.calls ? "gpu" : r.gpu_calls == 0 ? "cpu_blocked" : "mixed";
  if (f.time_ns) f.achieved_gbps = static_cast<double>(f.bytes) / static_cast<double>(f.time_ns);
  // The pinned bandwidth at the largest candidate's size (the plot's ceiling).
  f.reference_gbps = profile ? profile->pinned_gbps(0, r.largest) : t.nominal_pinned_gbps;
  f.reference_source = profile ? "machine profile " + profile->path + ": pinned curve and staging model"
                               : "no machine profile: pinned ~" + std::to_string(static_cast<int>(t.nominal_pinned_gbps)) +
                                     " GB/s, staging at 70 % of it (run cuxfer calibrate for this machine's curves)";
  for (uint32_t id = 0; id < r.sites.size(); ++id) {  // id order, then by recoverable time
    const RewriteSite& a = r.sites[id];
    if (a.calls == 0) continue;
    FindingSite s;
    s.callsite = id;
    s.calls = a.calls;
    s.bytes = a.bytes;
    s.time_ns = a.time_ns;
    s.max_ns = a.max_ns;
    s.estimated_recoverable_ns = a.recoverable_ns;
    if (a.time_ns) s.achieved_gbps = static_cast<double>(a.bytes) / static_cast<double>(a.time_ns);
    f.sites.push_back(s);
  }
  std::stable_sort(f.sites.begin(), f.sites.end(), [](const FindingSite& a, const FindingSite& b) {
    return a.estimated_recoverable_ns.value_or(0) > b.estimated_recoverable_ns.value_or(0);
  });
  for (const auto& s : f.sites)
    if (s.callsite != 0) f.callsites.push_back(s.callsite);
  f.advice = "Record again with `cuxfer record --rewrite=pin` (no rebuild): " + rewrite_paths(r) +
             ". Compare the two runs with `cuxfer diff` to measure what it brought. The estimate uses the "
             "shim's rules and the reference shown.";
  return {std::move(f)};
}

// On its own (tests, callers of one part): a whole tally.
std::vector<Finding> find_rewrite_candidates(const model::Job& job, const Thresholds& t) {
  return find_rewrite_candidates(tally_calls(job, t), t);
}

}  // namespace cuxfer::analyses
