#include "analyzer/analyses/policy_candidates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "analyzer/text/units.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::analyses {

bool identify_site(const model::Job& job, uint32_t site_index, policy::SiteKind kind, policy::Site& out,
                   std::string& why) {
  const model::Site& s = job.sites[site_index];
  out.kind = kind;
  out.symbol = s.frame.function;
  out.source = s.frame.file.empty() ? "" : s.frame.file + ":" + std::to_string(s.frame.line);
  if (s.frame.python) {
    if (s.frame.file.empty()) {
      why = "its Python code object was not in the trace";
      return false;
    }
    out.python_file = s.frame.file;
    out.python_function = s.frame.function;
    out.python_line = s.frame.line;
    return true;
  }
  const auto& modules = job.processes[s.process].trace.modules;
  const trace::ModuleInfo* m = symbolize::find_module(modules, s.frame.address);
  if (!m) {
    why = "no recorded module holds its return address";
    return false;
  }
  if (!policy::normalize_build_id(m->build_id, out.build_id)) {
    why = "module " + m->path + " has no build id";
    return false;
  }
  out.offset = s.frame.address - m->base;
  out.module = m->path;
  return true;
}

namespace {

bool identify(const model::Job& job, uint32_t site, policy::SiteKind kind, policy::Site& out, std::string& why) {
  return identify_site(job, site, kind, out, why);
}

using trace::Direction;
using trace::EventKind;
using trace::MemKind;

// A site's kind and identity (policy::site_identity: build id + offset, or a Python line).
using SiteKey = std::pair<policy::SiteKind, std::string>;
SiteKey key_of(const policy::Site& s) { return {s.kind, policy::site_identity(s)}; }
bool unset(const policy::Site& s) { return s.build_id.empty() && !s.python(); }

struct Candidate {
  policy::Entry entry;
  // By finding name (FindingKind names, and kWholeUploads, which is the
  // zero-copy rule's own), summed over processes.
  std::map<std::string, uint64_t> gain_by_finding;
  std::vector<std::string> reasons;
  bool reuses_buffer = false;
  unsigned directions = 0;  // bit 0 H2D, bit 1 D2H
  std::vector<policy::Site> copy_sites;  // see PolicyCandidates::copy_sites
};

// Per job site: copies of a pageable host buffer (same process, address and
// size, at least the registration minimum) more than once, and directions.
struct SiteUse {
  std::vector<uint8_t> reuses;
  std::vector<uint8_t> directions;
};
SiteUse site_use(const model::Job& job, uint64_t register_min) {
  SiteUse u{std::vector<uint8_t>(job.sites.size()), std::vector<uint8_t>(job.sites.size())};
  std::set<std::tuple<uint32_t, uint64_t, uint64_t>> seen;  // (site, address, bytes); a site is one process
  for (const model::Call& c : job.calls) {
    if (c.kind() != EventKind::Copy || c.failed() || c.site == model::kNoSite) continue;
    if (c.cls.memory != MemKind::Pageable) continue;
    const bool h2d = c.cls.direction == Direction::HtoD, d2h = c.cls.direction == Direction::DtoH;
    if (!h2d && !d2h) continue;
    u.directions[c.site] |= h2d ? 1 : 2;
    if (c.bytes() >= register_min && !seen.emplace(c.site, c.event->address, c.bytes()).second) u.reuses[c.site] = 1;
  }
  return u;
}

// A device allocation of one process, live from `t_alloc` until `t_free`.
struct Allocation {
  uint64_t address, bytes, t_alloc, t_free;
  uint32_t site;
};

class AllocationIndex {  // per process, sorted by address
 public:
  explicit AllocationIndex(const model::Job& job) : by_process_(job.processes.size()), max_bytes_(job.processes.size()) {
    std::vector<std::vector<const model::Call*>> frees(job.processes.size());
    for (const model::Call& c : job.calls) {
      if (c.failed()) continue;
      if (c.kind() == EventKind::DeviceAlloc && c.event->address)
        by_process_[c.process].push_back({c.event->address, c.bytes(), c.event->t_enter_ns, UINT64_MAX, c.site});
      else if (c.kind() == EventKind::DeviceFree)
        frees[c.process].push_back(&c);
    }
    for (size_t p = 0; p < by_process_.size(); ++p) {
      auto& allocs = by_process_[p];
      std::sort(allocs.begin(), allocs.end(), [](const Allocation& a, const Allocation& b) {
        return a.address != b.address ? a.address < b.address : a.t_alloc < b.t_alloc;
      });
      // Each free ends the latest allocation of its address made before it.
      for (const model::Call* f : frees[p]) {
        Allocation* best = nullptr;
        for (auto it = std::lower_bound(allocs.begin(), allocs.end(), f->event->address,
                                        [](const Allocation& a, uint64_t addr) { return a.address < addr; });
             it != allocs.end() && it->address == f->event->address; ++it)
          if (it->t_alloc <= f->event->t_enter_ns && it->t_free == UINT64_MAX) best = &*it;
        if (best) best->t_free = f->event->t_enter_ns;
      }
      for (const Allocation& a : allocs) max_bytes_[p] = std::max(max_bytes_[p], a.bytes);
    }
  }
  // The allocation that held `pointer` at `time`, or null.
  const Allocation* find(uint32_t process, uint64_t pointer, uint64_t time) const {
    const auto& allocs = by_process_[process];
    auto it = std::upper_bound(allocs.begin(), allocs.end(), pointer,
                               [](uint64_t addr, const Allocation& a) { return addr < a.address; });
    while (it != allocs.begin()) {
      --it;
      if (it->address + max_bytes_[process] <= pointer) break;  // none further down can reach it
      if (pointer < it->address + it->bytes && it->t_alloc <= time && time <= it->t_free) return &*it;
    }
    return nullptr;
  }

 private:
  std::vector<std::vector<Allocation>> by_process_;
  std::vector<uint64_t> max_bytes_;
};

// The device pointer of each copy that has a fingerprint event, keyed by
// (process, correlation id): the shim records it there (record/fingerprint.h).
std::unordered_map<uint64_t, uint64_t> device_pointers(const model::Job& job) {
  std::unordered_map<uint64_t, uint64_t> out;
  for (const model::Call& s : job.shim_calls)
    if (s.kind() == EventKind::Fingerprint) out[(uint64_t{s.process} << 32) | s.event->correlation_id] = s.event->stream;
  return out;
}

// The copy call sites an allocation entry changes, named as call entries (once each).
void add_copy_sites(const model::Job& job, const std::set<uint32_t>& sites, Candidate& c) {
  for (uint32_t site : sites) {
    policy::Site id;
    std::string why;
    if (!identify(job, site, policy::SiteKind::Call, id, why)) continue;
    if (std::none_of(c.copy_sites.begin(), c.copy_sites.end(),
                     [&](const policy::Site& s) { return policy::same_site(s, id); }))
      c.copy_sites.push_back(id);
  }
}

std::string site_display(const model::Job& job, uint32_t site_index) {
  return job.sites[site_index].frame.display();
}

}  // namespace

namespace {

// derive_policy's four steps, over the candidates they share: call sites
// (register or stage), allocation sites of tiny-copy storms (zero copy),
// allocation sites uploaded whole again and again (speculative zero copy),
// then the entries, largest estimated gain first.
class Derivation {
 public:
  Derivation(const model::Job& job, const Report& report, const Thresholds& t) : job(job), report(report), t(t) {}
  void call_sites();
  void storm_allocations();
  void whole_uploads(Speculation speculation);
  PolicyCandidates entries();

 private:
  void skip(const std::string& line) {
    if (skipped_lines.insert(line).second) out.skipped.push_back(line);
  }
  const model::Job& job;
  const Report& report;
  const Thresholds& t;
  PolicyCandidates out;
  std::map<SiteKey, Candidate> candidates;
  std::set<std::string> skipped_lines;
};

void Derivation::call_sites() {
  // The rewrite's thresholds, as the what-if uses them.
  uint64_t stage_min[2] = {t.stage_min_h2d, t.stage_min_d2h};
  if (t.profile) {
    const uint32_t threads = std::clamp(t.profile->cores / 2, 1u, 8u);
    for (int dir = 0; dir < 2; ++dir) stage_min[dir] = t.profile->stage_min(dir, threads).value_or(UINT64_MAX);
  }
  const SiteUse use = site_use(job, t.register_min);

  // Call sites: register or stage.
  for (const Finding& f : report.findings) {
    if (f.kind != FindingKind::RewriteCandidates && f.kind != FindingKind::LargePageable && f.kind != FindingKind::AsyncPageable) continue;
    for (const FindingSite& fs : f.sites) {
      if (fs.callsite == 0 || fs.callsite > job.sites.size()) continue;
      const uint32_t site = fs.callsite - 1;
      policy::Site id;
      std::string why;
      if (!identify(job, site, policy::SiteKind::Call, id, why)) {
        skip(site_display(job, site) + " (" + finding_kind_name(f.kind) + "): " + why);
        continue;
      }
      Candidate& c = candidates[key_of(id)];
      if (unset(c.entry.site)) {
        c.entry.site = id;
        c.copy_sites.push_back(id);
      }
      c.gain_by_finding[finding_kind_name(f.kind)] += fs.estimated_recoverable_ns.value_or(0);
      c.reuses_buffer |= use.reuses[site] != 0;
      c.directions |= use.directions[site];
      c.reasons.push_back(std::string(finding_kind_name(f.kind)) + ": " + std::to_string(fs.calls) + (fs.calls == 1 ? " copy, " : " copies, ") + text::format_bytes(fs.bytes) +
                          ", " + text::format_duration(fs.time_ns));
    }
  }
  for (auto& [key, c] : candidates) {
    policy::Entry& e = c.entry;
    if (c.reuses_buffer) {
      e.path = policy::Path::Register;
      e.min_bytes = t.register_min;
      c.reasons.push_back("copies the same host buffer more than once: registered in place");
    } else {
      e.path = policy::Path::Stage;
      if (c.gain_by_finding.count(finding_kind_name(FindingKind::RewriteCandidates))) {
        uint64_t m = UINT64_MAX;
        for (int dir = 0; dir < 2; ++dir)
          if (c.directions & (1u << dir)) m = std::min(m, stage_min[dir]);
        e.min_bytes = m == UINT64_MAX ? 0 : m;
      } else if (c.gain_by_finding.count(finding_kind_name(FindingKind::LargePageable))) {
        e.min_bytes = t.large_bytes;
      }
      c.reasons.push_back("no reused buffer: staged through pinned buffers");
    }
  }
}

void Derivation::storm_allocations() {
  // Allocation sites: zero-copy for the device buffers of tiny-copy storms.
  std::unordered_set<uint32_t> storm_sites;  // site ids (index + 1)
  for (const Finding& f : report.findings)
    if (f.kind == FindingKind::TinyStorm)
      for (const FindingSite& fs : f.sites)
        if (fs.callsite) storm_sites.insert(fs.callsite);
  if (storm_sites.empty()) return;
  const auto device_ptr = device_pointers(job);
  const AllocationIndex allocations(job);
  const double memcpy_gbps = t.profile && !t.profile->host_memcpy.empty() ? t.profile->memcpy_gbps(1)
                                                                           : kNominalHostMemcpyGbps;
  struct ZeroCopyAcc {
    uint64_t h2d = 0, d2h = 0, bytes = 0, cpu_ns = 0, gain_ns = 0;
    std::set<std::string> from;
    std::set<uint32_t> copy_sites;  // job site indices of the copies
  };
  std::map<SiteKey, ZeroCopyAcc> zero;
  std::map<uint32_t, uint64_t> untied;  // storm site -> copies with no device pointer recorded
  std::map<uint32_t, uint64_t> unowned;  // storm site -> copies into no recorded allocation
  for (const model::Call& c : job.calls) {
    if (c.kind() != EventKind::Copy || c.failed() || c.site == model::kNoSite) continue;
    if (!storm_sites.count(c.site + 1) || c.bytes() > t.tiny_bytes) continue;
    const trace::Event& e = *c.event;
    const bool h2d = c.cls.direction == Direction::HtoD && e.dst_kind == static_cast<uint8_t>(MemKind::Device);
    const bool d2h = c.cls.direction == Direction::DtoH && e.src_kind == static_cast<uint8_t>(MemKind::Device);
    if (!h2d && !d2h) continue;
    auto ptr = device_ptr.find((uint64_t{c.process} << 32) | e.correlation_id);
    if (ptr == device_ptr.end()) {
      ++untied[c.site];
      continue;
    }
    const Allocation* a = allocations.find(c.process, ptr->second, e.t_enter_ns);
    if (!a) {
      ++unowned[c.site];
      continue;
    }
    if (a->site == model::kNoSite) {
      skip("a device allocation of " + text::format_bytes(a->bytes) + " (tiny_storm at " +
           site_display(job, c.site) + "): its call site was not recorded");
      continue;
    }
    policy::Site id;
    std::string why;
    if (!identify(job, a->site, policy::SiteKind::Allocation, id, why)) {
      skip(site_display(job, a->site) + " (allocation, tiny_storm): " + why);
      continue;
    }
    ZeroCopyAcc& z = zero[key_of(id)];
    Candidate& cand = candidates[key_of(id)];
    if (unset(cand.entry.site)) cand.entry.site = id;
    const double host = static_cast<double>(kZeroCopyAccessNs) + static_cast<double>(c.bytes()) / memcpy_gbps;
    const uint64_t host_ns = static_cast<uint64_t>(std::llround(host));
    z.h2d += h2d;
    z.d2h += d2h;
    z.bytes += c.bytes();
    z.cpu_ns += c.cpu_ns();
    z.gain_ns += c.cpu_ns() > host_ns ? c.cpu_ns() - host_ns : 0;
    z.from.insert(site_display(job, c.site));
    z.copy_sites.insert(c.site);
  }
  for (auto& [key, z] : zero) {
    Candidate& c = candidates[key];
    c.entry.path = policy::Path::ZeroCopy;
    add_copy_sites(job, z.copy_sites, c);
    c.gain_by_finding[finding_kind_name(FindingKind::TinyStorm)] += z.gain_ns;
    std::string from;
    for (const auto& s : z.from) from += (from.empty() ? "" : ", ") + s;
    c.reasons.push_back("tiny_storm: " + std::to_string(z.h2d) + " tiny H2D and " + std::to_string(z.d2h) +
                        " tiny D2H copies (" + text::format_bytes(z.bytes) + ", " +
                        text::format_duration(z.cpu_ns) + " CPU-blocked) from " + from +
                        " into this allocation; mapped pinned host memory makes each a host memcpy, estimated at " +
                        std::to_string(kZeroCopyAccessNs) + " ns + bytes at " +
                        fmt::format("{:.1f}", memcpy_gbps) + " GB/s; kernels then read it over the bus");
  }
  for (const auto& [site, n] : untied)
    skip(std::to_string(n) + " tiny copies at " + site_display(job, site) +
         " (tiny_storm): no device pointer recorded (the shim records it with a copy's fingerprint, from "
         "CUXFER_FINGERPRINT_MIN bytes): record with CUXFER_FINGERPRINT_MIN=1 to tie them to their allocation");
  for (const auto& [site, n] : unowned)
    skip(std::to_string(n) + " tiny copies at " + site_display(job, site) +
         " (tiny_storm): their device pointer is in no recorded device allocation");
}

void Derivation::whole_uploads(Speculation speculation) {
  // Allocation sites whose whole contents are uploaded again and again (the
  // copies' fingerprints give the device pointer: from 1 MiB by default). Zero
  // copy is speculative there: a kernel that reads the data once streams it
  // over the link while it computes and the upload disappears; one that
  // re-reads it loses. Only `cuxfer tune` can tell, and the entry says so.
  // The report lists no such finding: held back, such a candidate is one line
  // in `held_back` (none for a site that a finding already gives an entry).
  const auto device_ptr = device_pointers(job);
  const AllocationIndex allocations(job);
  struct Whole {
    uint64_t uploads = 0, bytes = 0, time_ns = 0;
    uint32_t allocation_site = 0;  // a job site index of the allocation, for held_back's line
    std::set<uint32_t> copy_sites;
  };
  std::map<SiteKey, Whole> whole;
  std::map<SiteKey, policy::Site> ids;
  for (const model::Call& c : job.calls) {
    if (c.kind() != EventKind::Copy || c.failed() || c.cls.direction != Direction::HtoD) continue;
    if (c.event->dst_kind != static_cast<uint8_t>(MemKind::Device) || c.bytes() < t.large_bytes) continue;
    auto ptr = device_ptr.find((uint64_t{c.process} << 32) | c.event->correlation_id);
    if (ptr == device_ptr.end()) continue;
    const Allocation* a = allocations.find(c.process, ptr->second, c.event->t_enter_ns);
    if (!a || a->address != ptr->second || a->bytes != c.bytes() || a->site == model::kNoSite) continue;
    policy::Site id;
    std::string why;
    if (!identify(job, a->site, policy::SiteKind::Allocation, id, why)) continue;
    const SiteKey key = key_of(id);
    ids[key] = id;
    Whole& w = whole[key];
    w.allocation_site = a->site;
    ++w.uploads;
    w.bytes += c.bytes();
    w.time_ns += c.has_gpu_time() ? std::max(c.gpu_ns, c.cpu_ns()) : c.cpu_ns();
    if (c.site != model::kNoSite) w.copy_sites.insert(c.site);
  }
  std::vector<std::pair<uint64_t, std::string>> held;  // (time, line), largest time first below
  for (auto& [key, w] : whole) {
    if (w.uploads < 2) continue;  // uploaded once: nothing recurring to save
    if (speculation == Speculation::HoldBack) {
      if (!candidates.count(key))
        held.emplace_back(w.time_ns, job.sites[w.allocation_site].frame.short_display() +
                                         ": zero_copy: all " + text::format_bytes(w.bytes / w.uploads) +
                                         " of this allocation uploaded " + std::to_string(w.uploads) +
                                         " times (" + text::format_duration(w.time_ns) + ")");
      continue;
    }
    Candidate& c = candidates[key];
    if (unset(c.entry.site)) c.entry.site = ids[key];
    c.entry.path = policy::Path::ZeroCopy;
    add_copy_sites(job, w.copy_sites, c);
    c.gain_by_finding[kWholeUploads] += w.time_ns;
    c.reasons.push_back("whole_uploads (speculative: measure it with cuxfer tune): all " +
                        text::format_bytes(w.bytes / w.uploads) + " of this allocation uploaded " +
                        std::to_string(w.uploads) + " times (" + text::format_duration(w.time_ns) +
                        "); mapped host memory removes the uploads, but kernels then read it over the bus: "
                        "a win only if they read it about once");
  }
  std::stable_sort(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [time, line] : held) out.held_back.push_back(std::move(line));
}

PolicyCandidates Derivation::entries() {
  // Entries: the largest finding's estimate (findings overlap, never add up).
  std::vector<Candidate*> kept;
  for (auto& [key, c] : candidates) {
    if (c.gain_by_finding.empty()) continue;
    uint64_t gain = 0;
    for (const auto& [finding, g] : c.gain_by_finding) {
      gain = std::max(gain, g);
      c.entry.findings.push_back(finding);
    }
    if (gain == 0) {
      const policy::Site& s = c.entry.site;
      skip((s.symbol.empty() ? fmt::format("{}+0x{:x}", s.module, s.offset) : s.symbol) + " (" +
           policy::path_name(c.entry.path) + "): no estimated gain");
      continue;
    }
    c.entry.estimated_gain_ns = gain;
    for (const auto& r : c.reasons) c.entry.reason += (c.entry.reason.empty() ? "" : "; ") + r;
    kept.push_back(&c);
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Candidate* a, const Candidate* b) {
    return a->entry.estimated_gain_ns.value_or(0) > b->entry.estimated_gain_ns.value_or(0);
  });
  for (Candidate* c : kept) {
    // Speculative when nothing but the speculative pattern supports it.
    out.speculative.push_back(c->gain_by_finding.size() == 1 && c->gain_by_finding.count(kWholeUploads));
    out.policy.entries.push_back(std::move(c->entry));
    out.copy_sites.push_back(std::move(c->copy_sites));
  }
  return std::move(out);
}

}  // namespace

PolicyCandidates derive_policy(const model::Job& job, const Report& report, const Thresholds& t,
                               Speculation speculation) {
  Derivation d(job, report, t);
  d.call_sites();
  d.storm_allocations();
  d.whole_uploads(speculation);
  return d.entries();
}

}  // namespace cuxfer::analyses
