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
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {
namespace {

using trace::Direction;

bool rewrite_was_on(const model::Job& job, uint32_t process) {
  for (const auto& note : job.processes[process].trace.notes)
    if (note.rfind(model::kRewritePinNote, 0) == 0) return true;
  return false;
}

struct Key {
  uint32_t process;
  uint64_t address, bytes;
  bool operator==(const Key& o) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = k.address * 0x9E3779B97F4A7C15ull ^ (k.bytes + 0x632BE59BD9B4E019ull + (uint64_t{k.process} << 40));
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
// Per buffer: copies in the run, and copies seen so far in the second pass.
struct Uses {
  uint32_t total = 0, seen = 0;
};

}  // namespace

std::vector<Finding> find_rewrite_candidates(const model::Job& job, const Thresholds& t) {
  const model::MachineProfile* profile = t.profile;
  const uint32_t threads = profile ? std::clamp(profile->cores / 2, 1u, 8u) : 8;
  uint64_t stage_min[2] = {t.stage_min_h2d, t.stage_min_d2h};
  if (profile)
    for (int dir = 0; dir < 2; ++dir) stage_min[dir] = profile->stage_min(dir, threads).value_or(UINT64_MAX);

  std::vector<bool> on(job.processes.size());
  for (uint32_t p = 0; p < job.processes.size(); ++p) on[p] = rewrite_was_on(job, p);
  // Reuse of a buffer: copies of the same host range (only buffers large
  // enough to be registered matter).
  auto candidate = [&](const model::Call& c) {
    return c.kind() == trace::EventKind::Copy && c.bytes() >= t.register_min && !c.failed() &&
           model::is_pageable(c.cls) && model::crosses_host_link(c.cls.direction) && !on[c.process];
  };
  size_t n = 0;
  for (const auto& c : job.calls) n += candidate(c);
  if (n == 0 && std::none_of(job.calls.begin(), job.calls.end(), [](const model::Call& c) {
        return model::is_pageable(c.cls) && model::crosses_host_link(c.cls.direction);
      }))
    return {};
  std::unordered_map<Key, Uses, KeyHash> uses;
  uses.reserve(n);  // no rehash while counting
  for (const auto& c : job.calls)
    if (candidate(c)) ++uses[{c.process, c.event->address, c.bytes()}].total;

  Finding f;
  f.kind = "rewrite_candidates";
  f.title = "Copies that --rewrite=pin would speed up";
  struct Acc {
    FindingSite out;
    uint64_t predicted = 0;
  };
  std::map<uint32_t, Acc> by_site;
  uint64_t registered = 0, staged = 0, predicted_total = 0, gpu_calls = 0, largest = 0;
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy || c.failed() || on[c.process] || !model::is_pageable(c.cls) ||
        !model::crosses_host_link(c.cls.direction) || c.bytes() == 0)
      continue;
    if (c.event->flags & (trace::kFlagStaged | trace::kFlagRegistered)) continue;
    const bool measured_by_cpu = model::cpu_time_measures_transfer(*c.event, c.cls);
    if (!c.has_gpu_time() && !measured_by_cpu) continue;
    const uint64_t time = c.has_gpu_time() ? c.gpu_ns : c.cpu_ns();
    const int dir = c.cls.direction == Direction::HtoD ? 0 : 1;
    const double pinned = profile ? profile->pinned_gbps(dir, c.bytes()) : t.nominal_pinned_gbps;
    bool reused = false, later_use = false;
    if (c.bytes() >= t.register_min) {
      Uses& u = uses[{c.process, c.event->address, c.bytes()}];
      reused = u.total >= 2;
      later_use = u.seen++ > 0;
    }
    double predicted;
    if (reused && later_use) {
      predicted = static_cast<double>(c.bytes()) / pinned;
      ++registered;
    } else if (c.bytes() >= stage_min[dir]) {
      predicted = profile ? profile->staged_ns(dir, c.bytes(), threads) : static_cast<double>(c.bytes()) / (0.7 * pinned);
      ++staged;
    } else {
      continue;  // passes through: no change predicted
    }
    const uint64_t p = static_cast<uint64_t>(std::llround(std::min<double>(predicted, static_cast<double>(time))));
    ++f.calls;
    largest = std::max(largest, c.bytes());
    f.bytes += c.bytes();
    f.time_ns += time;
    f.max_ns = std::max(f.max_ns, time);
    gpu_calls += c.has_gpu_time();
    predicted_total += p;
    const uint32_t id = c.site == model::kNoSite ? 0 : c.site + 1;
    Acc& a = by_site[id];
    a.out.callsite = id;
    ++a.out.calls;
    a.out.bytes += c.bytes();
    a.out.time_ns += time;
    a.out.max_ns = std::max(a.out.max_ns, time);
    a.out.estimated_recoverable_ns = a.out.estimated_recoverable_ns.value_or(0) + (time - p);
  }
  if (f.calls == 0 || f.time_ns <= predicted_total) return {};
  f.estimated_recoverable_ns = f.time_ns - predicted_total;
  f.time_basis = gpu_calls == f.calls ? "gpu" : gpu_calls == 0 ? "cpu_blocked" : "mixed";
  if (f.time_ns) f.achieved_gbps = static_cast<double>(f.bytes) / static_cast<double>(f.time_ns);
  // The pinned bandwidth at the largest candidate's size (the plot's ceiling).
  f.reference_gbps = profile ? profile->pinned_gbps(0, largest) : t.nominal_pinned_gbps;
  f.reference_source = profile ? "machine profile " + profile->path + ": pinned curve and staging model"
                               : "no machine profile: pinned ~" + std::to_string(static_cast<int>(t.nominal_pinned_gbps)) +
                                     " GB/s, staging at 70 % of it (run cuxfer calibrate for this machine's curves)";
  for (auto& [id, a] : by_site) {
    if (a.out.time_ns) a.out.achieved_gbps = static_cast<double>(a.out.bytes) / static_cast<double>(a.out.time_ns);
    f.sites.push_back(a.out);
  }
  std::stable_sort(f.sites.begin(), f.sites.end(), [](const FindingSite& a, const FindingSite& b) {
    return a.estimated_recoverable_ns.value_or(0) > b.estimated_recoverable_ns.value_or(0);
  });
  for (const auto& s : f.sites)
    if (s.callsite != 0) f.callsites.push_back(s.callsite);
  f.advice = "Record again with `cuxfer record --rewrite=pin` (no rebuild): " + std::to_string(registered) +
             " of these copies reuse a buffer the rewrite would register in place after its first copy, " +
             std::to_string(staged) +
             " would be staged through pinned buffers. Compare the two runs with `cuxfer diff` to measure "
             "what it brought. The estimate uses the shim's rules and the reference shown.";
  return {std::move(f)};
}

}  // namespace cuxfer::analyses
