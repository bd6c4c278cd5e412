#include "analyzer/analyses/diff.h"

#include <algorithm>
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
  }
  for (const auto& c : job.calls) {
    const model::Process& p = job.processes[c.process];
    if (p.trace.has_process) end = std::max(end, p.realtime_of(c.event->t_exit_ns));
    if (c.staged()) out.run.rewrite = true;
  }
  if (start != UINT64_MAX && end > start) out.run.wall_ns = end - start;
  return out;
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

Diff diff_jobs(const model::Job& base, const model::Job& now) {
  Diff d;
  RunSites b = collect(base), n = collect(now);
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
  std::stable_sort(d.sites.begin(), d.sites.end(), [](const DiffSite& x, const DiffSite& y) {
    bool xm = x.in_base && x.in_new, ym = y.in_base && y.in_new;
    if (xm != ym) return xm;
    int64_t xr = x.time_recovered_ns(), yr = y.time_recovered_ns();
    if (xr != yr) return xr > yr;
    return std::max(x.base.cpu_blocked_ns, x.now.cpu_blocked_ns) >
           std::max(y.base.cpu_blocked_ns, y.now.cpu_blocked_ns);
  });
  if (!d.base.totals.gpu_ns || !d.now.totals.gpu_ns)
    d.notes.push_back("GPU time is compared only where both runs have it (CUPTI active in both)");
  return d;
}

}  // namespace cuxfer::analyses
