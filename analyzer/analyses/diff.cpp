#include "analyzer/analyses/diff.h"

#include <algorithm>
#include <climits>
#include <map>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

namespace {

constexpr const char* kNoSiteKey = "(no call site)";

void add_call(DiffSide& s, const model::Call& c) {
  if (c.failed()) {
    ++s.failed_calls;
    return;
  }
  ++s.calls;
  s.copy_bytes += c.bytes();
  s.cpu_blocked_ns += c.cpu_ns();
  if (c.staged()) {
    ++s.staged_calls;
    s.staged_bytes += c.bytes();
  }
  if (c.has_gpu_time()) s.gpu_ns = s.gpu_ns.value_or(0) + c.gpu_ns;
  auto it = std::find_if(s.classes.begin(), s.classes.end(),
                         [&](const DiffClassCount& k) { return k.cls == c.cls; });
  if (it == s.classes.end()) {
    s.classes.push_back({c.cls, 0, 0});
    it = s.classes.end() - 1;
  }
  ++it->calls;
  it->bytes += c.bytes();
}

void sort_classes(DiffSide& s) {
  std::sort(s.classes.begin(), s.classes.end(), [](const DiffClassCount& a, const DiffClassCount& b) {
    if (a.cls.direction != b.cls.direction) return a.cls.direction < b.cls.direction;
    return a.cls.memory < b.cls.memory;
  });
}

struct RunSites {
  std::map<std::string, DiffSide> sides;
  std::map<std::string, std::string> display, label;
  DiffRun run;
};

RunSites collect(const model::Job& job) {
  RunSites out;
  std::vector<std::string> keys(job.sites.size());
  for (size_t i = 0; i < job.sites.size(); ++i) keys[i] = site_key(job.sites[i].frame);
  for (const auto& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy) continue;
    const std::string& key = c.site == model::kNoSite ? std::string(kNoSiteKey) : keys[c.site];
    if (!out.display.count(key)) {
      out.display[key] = c.site == model::kNoSite ? kNoSiteKey : job.sites[c.site].frame.display();
      out.label[key] = c.site == model::kNoSite ? kNoSiteKey : job.sites[c.site].frame.short_display();
    }
    add_call(out.sides[key], c);
    add_call(out.run.totals, c);
  }
  for (auto& [k, s] : out.sides) sort_classes(s);
  sort_classes(out.run.totals);

  out.run.processes = static_cast<uint32_t>(job.processes.size());
  uint64_t start = UINT64_MAX, end = 0;
  for (const auto& p : job.processes) {
    if (p.trace.has_process) start = std::min(start, p.trace.process.start_realtime_ns);
    if (model::rewrite_pin_on(p.trace)) out.run.rewrite = true;
    if (p.trace.has_status && p.trace.status.simulated) out.run.simulated = true;
    out.run.traces.push_back(p.trace.path);
  }
  for (const auto& c : job.calls) {
    const model::Process& p = job.processes[c.process];
    if (p.trace.has_process) end = std::max(end, p.realtime_of(c.event->t_exit_ns));
    if (c.staged()) out.run.rewrite = true;
  }
  if (start != UINT64_MAX && end > start) out.run.wall_ns = end - start;
  return out;
}

// A run read from job summaries: the same sides from the per-site and
// per-process tallies (tally.h: each site's successful copies per class,
// staged, failed; each process's copies without a site as one more site).
void add_site_tally(DiffSide& s, const SiteTally& t) {
  s.calls += t.out.calls;
  s.copy_bytes += t.out.bytes;
  s.cpu_blocked_ns += t.out.cpu_blocked_ns;
  s.failed_calls += t.out.failed_calls;
  s.staged_calls += t.staged_calls;
  s.staged_bytes += t.staged_bytes;
  if (t.out.gpu_ns) s.gpu_ns = s.gpu_ns.value_or(0) + *t.out.gpu_ns;
  for (unsigned k = 0; k < kClasses; ++k) {
    if (!t.class_calls[k]) continue;
    const model::TransferClass cls = class_of_index(k);
    auto it = std::find_if(s.classes.begin(), s.classes.end(), [&](const DiffClassCount& c) { return c.cls == cls; });
    if (it == s.classes.end()) {
      s.classes.push_back({cls, 0, 0});
      it = s.classes.end() - 1;
    }
    it->calls += t.class_calls[k];
    it->bytes += t.class_bytes[k];
  }
}

RunSites collect(const model::Job& job, const JobTally& tally) {
  RunSites out;
  for (size_t i = 0; i < job.sites.size() && i < tally.sites.size(); ++i) {
    const SiteTally& t = tally.sites[i];
    if (!t.used) continue;
    const std::string key = site_key(job.sites[i].frame);
    out.display.try_emplace(key, job.sites[i].frame.display());
    out.label.try_emplace(key, job.sites[i].frame.short_display());
    add_site_tally(out.sides[key], t);
    add_site_tally(out.run.totals, t);
  }
  for (const ProcessTally& p : tally.processes) {
    if (!p.no_site.used) continue;
    out.display.try_emplace(kNoSiteKey, kNoSiteKey);
    out.label.try_emplace(kNoSiteKey, kNoSiteKey);
    add_site_tally(out.sides[kNoSiteKey], p.no_site);
    add_site_tally(out.run.totals, p.no_site);
  }
  for (auto& [k, s] : out.sides) sort_classes(s);
  sort_classes(out.run.totals);
  out.run.processes = static_cast<uint32_t>(job.processes.size());
  uint64_t start = UINT64_MAX, end = 0;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const model::Process& p = job.processes[i];
    if (p.trace.has_process) start = std::min(start, p.trace.process.start_realtime_ns);
    if (model::rewrite_pin_on(p.trace)) out.run.rewrite = true;
    if (p.trace.has_status && p.trace.status.simulated) out.run.simulated = true;
    out.run.traces.push_back(p.trace.path);
    if (i < tally.processes.size()) {
      end = std::max(end, tally.processes[i].last_end_realtime_ns);
      if (tally.processes[i].staged_calls) out.run.rewrite = true;
    }
  }
  if (start != UINT64_MAX && end > start) out.run.wall_ns = end - start;
  return out;
}

// The median of the values (the mean of the middle two for an even count,
// rounded down); 0 for none.
uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  if (v.size() % 2) return v[mid];
  const uint64_t a = v[mid - 1], b = v[mid];
  return a / 2 + b / 2 + (a % 2 + b % 2) / 2;
}

// Each field's median over the runs' sides. GPU time only when every run has
// it; a class's counts are its medians, and a class whose median is nothing is left out.
DiffSide median_side(const std::vector<const DiffSide*>& sides) {
  DiffSide out;
  auto field = [&](uint64_t DiffSide::*f) {
    std::vector<uint64_t> v;
    for (const DiffSide* s : sides) v.push_back(s->*f);
    return median(std::move(v));
  };
  out.calls = field(&DiffSide::calls);
  out.copy_bytes = field(&DiffSide::copy_bytes);
  out.staged_calls = field(&DiffSide::staged_calls);
  out.staged_bytes = field(&DiffSide::staged_bytes);
  out.cpu_blocked_ns = field(&DiffSide::cpu_blocked_ns);
  out.failed_calls = field(&DiffSide::failed_calls);
  std::vector<uint64_t> gpu;
  for (const DiffSide* s : sides)
    if (s->gpu_ns) gpu.push_back(*s->gpu_ns);
  if (gpu.size() == sides.size()) out.gpu_ns = median(std::move(gpu));
  std::vector<model::TransferClass> classes;
  for (const DiffSide* s : sides)
    for (const auto& k : s->classes)
      if (std::find(classes.begin(), classes.end(), k.cls) == classes.end()) classes.push_back(k.cls);
  for (const auto& cls : classes) {
    std::vector<uint64_t> calls, bytes;
    for (const DiffSide* s : sides) {
      auto it = std::find_if(s->classes.begin(), s->classes.end(),
                             [&](const DiffClassCount& k) { return k.cls == cls; });
      calls.push_back(it == s->classes.end() ? 0 : it->calls);
      bytes.push_back(it == s->classes.end() ? 0 : it->bytes);
    }
    DiffClassCount k{cls, median(std::move(calls)), median(std::move(bytes))};
    if (k.calls || k.bytes) out.classes.push_back(k);
  }
  sort_classes(out);
  return out;
}

// One side of the comparison: its runs' sites, medians and samples.
struct SideSites {
  std::map<std::string, DiffSide> sides;  // per site key: the medians over the runs
  std::map<std::string, std::string> display, label;
  DiffRun run;
};

// The first place where a run did other work than the side's first run, or "".
std::string work_spread(const std::vector<RunSites>& runs) {
  static const DiffSide kNone;
  for (size_t r = 1; r < runs.size(); ++r) {
    std::map<std::string, bool> keys;
    for (const auto* run : {&runs[0], &runs[r]})
      for (const auto& [key, side] : run->sides) keys[key] = true;
    for (const auto& [key, unused] : keys) {
      auto first = runs[0].sides.find(key), other = runs[r].sides.find(key);
      const std::string difference = work_difference(first == runs[0].sides.end() ? kNone : first->second,
                                                     other == runs[r].sides.end() ? kNone : other->second);
      if (difference.empty()) continue;
      const auto& labels = first == runs[0].sides.end() ? runs[r].label : runs[0].label;
      const std::string trace = runs[r].run.traces.empty() ? "" : " (" + runs[r].run.traces.front() + ")";
      return fmt::format("run {}{} against run 1: {}: {}", r + 1, trace, labels.at(key), difference);
    }
  }
  return {};
}

SideSites combine(const std::vector<DiffInput>& inputs) {
  std::vector<RunSites> runs;
  for (const DiffInput& in : inputs) runs.push_back(in.tally ? collect(*in.job, *in.tally) : collect(*in.job));
  SideSites out;
  std::map<std::string, bool> keys;
  for (const RunSites& r : runs)
    for (const auto& [key, side] : r.sides) {
      keys[key] = true;
      out.display.try_emplace(key, r.display.at(key));
      out.label.try_emplace(key, r.label.at(key));
    }
  static const DiffSide kNone;  // a site a run never copied at
  for (const auto& [key, unused] : keys) {
    std::vector<const DiffSide*> per_run;
    for (const RunSites& r : runs) {
      auto it = r.sides.find(key);
      per_run.push_back(it == r.sides.end() ? &kNone : &it->second);
    }
    out.sides[key] = median_side(per_run);
  }
  std::vector<const DiffSide*> totals;
  std::vector<uint64_t> processes, walls;
  for (const RunSites& r : runs) {
    totals.push_back(&r.run.totals);
    processes.push_back(r.run.processes);
    walls.push_back(r.run.wall_ns);
    out.run.rewrite |= r.run.rewrite;
    out.run.simulated |= r.run.simulated;
    out.run.traces.insert(out.run.traces.end(), r.run.traces.begin(), r.run.traces.end());
    out.run.samples.push_back({r.run.traces, r.run.totals.cpu_blocked_ns, r.run.wall_ns});
  }
  out.run.runs = static_cast<uint32_t>(runs.size());
  out.run.totals = median_side(totals);
  out.run.processes = static_cast<uint32_t>(median(std::move(processes)));
  out.run.wall_ns = median(std::move(walls));
  out.run.work_spread = work_spread(runs);
  return out;
}

// C(n, k) as a double (exact for the run counts a diff sees).
double binomial(uint32_t n, uint32_t k) {
  double c = 1;
  for (uint32_t i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

std::string describe(const std::vector<DiffClassCount>& v, const model::TransferClass& cls) {
  for (const auto& k : v)
    if (k.cls == cls) return fmt::format("{} calls/{} B", k.calls, k.bytes);
  return "none";
}

}  // namespace

std::string work_difference(const DiffSide& base, const DiffSide& now) {
  if (base.classes == now.classes) return {};
  std::vector<model::TransferClass> all;
  for (const auto* side : {&base, &now})
    for (const auto& k : side->classes)
      if (std::find(all.begin(), all.end(), k.cls) == all.end()) all.push_back(k.cls);
  std::string out;
  for (const auto& cls : all) {
    std::string b = describe(base.classes, cls), n = describe(now.classes, cls);
    if (b == n) continue;
    if (!out.empty()) out += "; ";
    out += fmt::format("{}: {} -> {}", class_name(cls), b, n);
  }
  return out;
}

TimeRecoveredNoise judge_noise(const std::vector<uint64_t>& base_ns, const std::vector<uint64_t>& now_ns) {
  TimeRecoveredNoise n;
  const auto m = static_cast<uint32_t>(base_ns.size()), k = static_cast<uint32_t>(now_ns.size());
  if (m == 0 || k == 0) return n;
  n.pairs_min_ns = INT64_MAX;
  n.pairs_max_ns = INT64_MIN;
  for (uint64_t b : base_ns)
    for (uint64_t a : now_ns) {
      const int64_t d = static_cast<int64_t>(b) - static_cast<int64_t>(a);
      n.pairs_min_ns = std::min(n.pairs_min_ns, d);
      n.pairs_max_ns = std::max(n.pairs_max_ns, d);
    }
  n.separated = n.pairs_min_ns > 0 || n.pairs_max_ns < 0;
  n.chance = std::min(1.0, 2.0 / binomial(m + k, m));
  for (n.runs_for_separation = 2;
       2.0 / binomial(2 * n.runs_for_separation, n.runs_for_separation) > kNoiseAlpha;)
    ++n.runs_for_separation;
  if (m == 1 && k == 1)
    n.verdict = NoiseVerdict::OneRunEach;
  else if (!n.separated)
    n.verdict = NoiseVerdict::Within;
  else
    n.verdict = n.chance <= kNoiseAlpha ? NoiseVerdict::Beyond : NoiseVerdict::NotConclusive;
  return n;
}

Diff diff_jobs(const model::Job& base, const model::Job& now) { return diff_runs({&base}, {&now}); }

Diff diff_runs(const std::vector<const model::Job*>& base_jobs,
               const std::vector<const model::Job*>& now_jobs) {
  std::vector<DiffInput> b, n;
  for (const model::Job* j : base_jobs) b.push_back({j, nullptr});
  for (const model::Job* j : now_jobs) n.push_back({j, nullptr});
  return diff_inputs(b, n);
}

Diff diff_inputs(const std::vector<DiffInput>& base_inputs, const std::vector<DiffInput>& now_inputs) {
  Diff d;
  SideSites b = combine(base_inputs), n = combine(now_inputs);
  d.base = std::move(b.run);
  d.now = std::move(n.run);
  std::map<std::string, DiffSite> sites;
  for (auto& [key, side] : b.sides) {
    DiffSite& s = sites[key];
    s.key = key;
    s.display = b.display[key];
    s.label = b.label[key];
    s.in_base = true;
    s.base = side;
  }
  for (auto& [key, side] : n.sides) {
    DiffSite& s = sites[key];
    s.key = key;
    if (s.display.empty()) {
      s.display = n.display[key];
      s.label = n.label[key];
    }
    s.in_new = true;
    s.now = side;
  }
  for (auto& [key, s] : sites) {
    s.difference = work_difference(s.base, s.now);
    s.same_work = s.difference.empty();
    if (!s.same_work) d.same_work = false;
    d.sites.push_back(std::move(s));
  }
  if (!d.base.work_spread.empty() || !d.now.work_spread.empty()) d.same_work = false;
  std::stable_sort(d.sites.begin(), d.sites.end(), [](const DiffSite& x, const DiffSite& y) {
    bool xm = x.in_base && x.in_new, ym = y.in_base && y.in_new;
    if (xm != ym) return xm;
    int64_t xr = x.time_recovered_ns(), yr = y.time_recovered_ns();
    if (xr != yr) return xr > yr;
    return std::max(x.base.cpu_blocked_ns, x.now.cpu_blocked_ns) >
           std::max(y.base.cpu_blocked_ns, y.now.cpu_blocked_ns);
  });
  std::vector<uint64_t> base_ns, now_ns;
  for (const auto& s : d.base.samples) base_ns.push_back(s.cpu_blocked_ns);
  for (const auto& s : d.now.samples) now_ns.push_back(s.cpu_blocked_ns);
  d.noise = judge_noise(base_ns, now_ns);
  if (!d.base.totals.gpu_ns || !d.now.totals.gpu_ns)
    d.notes.push_back(d.base.runs > 1 || d.now.runs > 1
                          ? "GPU time is compared only where every run has it (CUPTI active in all)"
                          : "GPU time is compared only where both runs have it (CUPTI active in both)");
  return d;
}

}  // namespace cuxfer::analyses
