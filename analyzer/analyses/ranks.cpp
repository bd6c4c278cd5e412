#include "analyzer/analyses/ranks.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {
namespace {

std::optional<uint32_t> number(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> max_over_median(std::vector<uint64_t> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? static_cast<double>(v[n / 2])
                              : (static_cast<double>(v[n / 2 - 1]) + static_cast<double>(v[n / 2])) / 2;
  if (median <= 0) return std::nullopt;
  return static_cast<double>(v.back()) / median;
}

// The rank with the largest value; the lowest rank on a tie.
template <typename Get>
std::pair<uint32_t, uint64_t> largest(const std::vector<RankTotals>& ranks, Get get) {
  const RankTotals* best = &ranks.front();
  for (const auto& r : ranks)
    if (get(r) > get(*best)) best = &r;
  return {best->rank, get(*best)};
}

}  // namespace

std::optional<RankIdentity> parse_rank_note(std::string_view note) {
  constexpr std::string_view kPrefix = "rank: ";
  if (!note.starts_with(kPrefix)) return std::nullopt;
  note.remove_prefix(kPrefix.size());
  RankIdentity id;
  bool first = true;
  while (!note.empty()) {
    const size_t end = std::min(note.find(' '), note.size());
    const std::string_view word = note.substr(0, end);
    note.remove_prefix(std::min(end + 1, note.size()));
    if (first) {
      auto r = number(word);
      if (!r) return std::nullopt;
      id.rank = *r;
      first = false;
      continue;
    }
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "launcher")
      id.launcher = value;
    else if (key == "variable")
      id.variable = value;
    else if (key == "launch_id")
      id.launch_id = value;
    else if (key == "local_rank")
      id.local_rank = number(value);
    else if (key == "world_size")
      id.world_size = number(value);
  }
  if (first) return std::nullopt;
  return id;
}

std::optional<RankIdentity> rank_of(const trace::Trace& t) {
  for (const auto& n : t.notes)
    if (auto id = parse_rank_note(n)) return id;
  return std::nullopt;
}

std::optional<std::string> run_id_of(const trace::Trace& t) {
  constexpr std::string_view kPrefix = "run: ";
  for (const auto& n : t.notes)
    if (std::string_view(n).starts_with(kPrefix)) return n.substr(kPrefix.size());
  return std::nullopt;
}

RankSpread rank_spread(const std::vector<RankTotals>& ranks) {
  RankSpread s;
  std::tie(s.most_bytes_rank, s.most_bytes) = largest(ranks, [](const RankTotals& r) { return r.bytes; });
  std::tie(s.most_pageable_rank, s.most_pageable_bytes) =
      largest(ranks, [](const RankTotals& r) { return r.pageable_bytes; });
  std::tie(s.slowest_rank, s.slowest_cpu_blocked_ns) =
      largest(ranks, [](const RankTotals& r) { return r.cpu_blocked_ns; });
  std::vector<uint64_t> bytes, pageable, blocked;
  for (const auto& r : ranks) {
    bytes.push_back(r.bytes);
    pageable.push_back(r.pageable_bytes);
    blocked.push_back(r.cpu_blocked_ns);
  }
  s.bytes_imbalance = max_over_median(bytes);
  s.pageable_imbalance = max_over_median(pageable);
  s.cpu_blocked_imbalance = max_over_median(blocked);
  return s;
}

Ranks rank_totals(const model::Job& job, const std::vector<Finding>& findings) {
  return rank_totals(job, findings, {});
}

Ranks rank_totals(const model::Job& job, const std::vector<Finding>& findings,
                  const std::vector<LocationTotals>& locations) {
  return rank_totals(job, tally_calls(job, {}), findings, locations);
}

Ranks rank_totals(const model::Job& job, const JobTally& tally, const std::vector<Finding>& findings,
                  const std::vector<LocationTotals>& locations) {
  Ranks out;
  std::map<uint32_t, size_t> slot;  // rank -> index into out.ranks
  std::vector<int64_t> rank_of_process(job.processes.size(), -1);
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const auto id = rank_of(job.processes[i].trace);
    if (!id) continue;
    auto [it, added] = slot.try_emplace(id->rank, slot.size());
    if (added) {
      RankTotals r;
      r.rank = id->rank;
      r.host = job.processes[i].trace.process.hostname;
      r.launcher = id->launcher;
      out.ranks.push_back(std::move(r));
    }
    out.ranks[it->second].pids.push_back(job.processes[i].pid());
    rank_of_process[i] = static_cast<int64_t>(it->second);
  }
  if (out.ranks.size() < 2) return {};
  for (int64_t r : rank_of_process) out.unranked_processes += r < 0;

  // The copies per rank: the sums of its processes' tallies (tally.h).
  std::vector<std::array<RankClass, kClasses>> classes(out.ranks.size());
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const int64_t ri = rank_of_process[i];
    if (ri < 0) continue;
    const ProcessTally& p = tally.processes[i];
    RankTotals& r = out.ranks[static_cast<size_t>(ri)];
    r.failed_calls += p.failed_copies;
    r.copies += p.copies;
    r.bytes += p.bytes;
    r.cpu_blocked_ns += p.cpu_blocked_ns;
    r.pageable_bytes += p.pageable_bytes;
    if (p.has_gpu) r.gpu_ns = r.gpu_ns.value_or(0) + p.gpu_ns;
    for (unsigned k = 0; k < kClasses; ++k) {
      RankClass& rc = classes[static_cast<size_t>(ri)][k];
      rc.calls += p.classes[k].calls;
      rc.bytes += p.classes[k].bytes;
      rc.cpu_blocked_ns += p.classes[k].cpu_blocked_ns;
    }
  }
  // A location's sites belong to one process each, so to one rank.
  for (const LocationTotals& loc : locations)
    for (uint32_t site : loc.callsites) {
      if (site == 0 || site > job.sites.size()) continue;
      const int64_t ri = rank_of_process[job.sites[site - 1].process];
      if (ri < 0) continue;
      auto& mine = out.ranks[static_cast<size_t>(ri)].sites;
      if (std::find(mine.begin(), mine.end(), loc.id) == mine.end()) mine.push_back(loc.id);
    }
  for (auto& r : out.ranks) std::sort(r.sites.begin(), r.sites.end());
  for (size_t i = 0; i < out.ranks.size(); ++i)
    for (unsigned k = 0; k < kClasses; ++k)
      if (classes[i][k].calls) {
        RankClass rc = classes[i][k];
        rc.cls = class_name(class_of_index(k));
        out.ranks[i].classes.push_back(std::move(rc));
      }

  // Each finding's call sites belong to one process each, so to one rank.
  for (const Finding& f : findings) {
    std::vector<RankFinding> per_rank(out.ranks.size());
    for (const FindingSite& s : f.sites) {
      if (s.callsite == 0 || s.callsite > job.sites.size()) continue;
      const int64_t ri = rank_of_process[job.sites[s.callsite - 1].process];
      if (ri < 0) continue;
      RankFinding& rf = per_rank[static_cast<size_t>(ri)];
      rf.calls += s.calls;
      rf.bytes += s.bytes;
      rf.time_ns += s.time_ns;
    }
    for (size_t i = 0; i < out.ranks.size(); ++i)
      if (per_rank[i].calls) {
        per_rank[i].kind = finding_kind_name(f.kind);
        out.ranks[i].findings.push_back(std::move(per_rank[i]));
      }
  }
  for (auto& r : out.ranks)
    std::stable_sort(r.findings.begin(), r.findings.end(),
                     [](const RankFinding& a, const RankFinding& b) { return a.time_ns > b.time_ns; });
  std::sort(out.ranks.begin(), out.ranks.end(),
            [](const RankTotals& a, const RankTotals& b) { return a.rank < b.rank; });
  out.spread = rank_spread(out.ranks);
  return out;
}

Distribution distribution_of(std::vector<std::pair<uint64_t, uint32_t>> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());  // by value, then the lower id
  const size_t n = values.size();
  d.min = values.front().first;
  d.min_id = values.front().second;
  d.max = values.back().first;
  d.max_id = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == d.max; })->second;
  d.median = n % 2 ? values[n / 2].first : values[n / 2 - 1].first / 2 + values[n / 2].first / 2 +
                                               (values[n / 2 - 1].first % 2 + values[n / 2].first % 2) / 2;
  const size_t p95 = (n * 95 + 99) / 100;  // ceil(0.95 n), 1-based
  d.p95 = values[std::max<size_t>(p95, 1) - 1].first;
  return d;
}

namespace {

uint64_t median_of(std::vector<uint64_t> v) {
  std::vector<std::pair<uint64_t, uint32_t>> p;
  p.reserve(v.size());
  for (uint64_t x : v) p.push_back({x, 0});
  return distribution_of(std::move(p)).median;
}

// More than twice the median, less than half of it, or not 0 over a median 0.
bool far_from(uint64_t value, uint64_t median) {
  if (median == 0) return value > 0;
  return value > 2 * median || 2 * value < median;
}

double distance(uint64_t value, uint64_t median) {
  if (median == 0) return value ? 1e18 : 0;
  const double r = static_cast<double>(value) / static_cast<double>(median);
  return r >= 1 ? r : (value ? 1 / r : 1e18);
}

struct Metric {
  const char* name;
  uint64_t (*of)(const RankTotals&);
  uint64_t (*of_class)(const RankClass&);  // the class's part of it
};

uint64_t class_pageable_bytes(const RankClass& c) {
  const bool pageable = c.cls.find("pageable") != std::string::npos;
  const bool host_link = c.cls.starts_with("H2D") || c.cls.starts_with("D2H");
  return pageable && host_link ? c.bytes : 0;
}

}  // namespace

RankDigest digest_ranks(const std::vector<RankTotals>& ranks) {
  RankDigest d;
  if (ranks.empty()) return d;
  const Metric metrics[] = {
      {"copies", [](const RankTotals& r) { return r.copies; }, [](const RankClass& c) { return c.calls; }},
      {"bytes", [](const RankTotals& r) { return r.bytes; }, [](const RankClass& c) { return c.bytes; }},
      {"pageable", [](const RankTotals& r) { return r.pageable_bytes; }, class_pageable_bytes},
      {"CPU-blocked", [](const RankTotals& r) { return r.cpu_blocked_ns; },
       [](const RankClass& c) { return c.cpu_blocked_ns; }},
  };
  Distribution* dists[] = {&d.copies, &d.bytes, &d.pageable, &d.cpu_blocked};
  // Every class and finding kind any rank has, and each rank's value of it.
  std::vector<std::string> classes, kinds;
  for (const auto& r : ranks) {
    for (const auto& c : r.classes)
      if (std::find(classes.begin(), classes.end(), c.cls) == classes.end()) classes.push_back(c.cls);
    for (const auto& f : r.findings)
      if (std::find(kinds.begin(), kinds.end(), f.kind) == kinds.end()) kinds.push_back(f.kind);
  }
  auto class_of = [](const RankTotals& r, const std::string& cls) -> const RankClass* {
    for (const auto& c : r.classes)
      if (c.cls == cls) return &c;
    return nullptr;
  };
  auto finding_time = [](const RankTotals& r, const std::string& kind) -> std::optional<uint64_t> {
    for (const auto& f : r.findings)
      if (f.kind == kind) return f.time_ns;
    return std::nullopt;
  };
  // Each finding's median time over the ranks that have it.
  std::map<std::string, uint64_t> finding_median;
  for (const auto& kind : kinds) {
    std::vector<uint64_t> v;
    for (const auto& r : ranks)
      if (auto t = finding_time(r, kind)) v.push_back(*t);
    finding_median[kind] = median_of(std::move(v));
  }

  std::vector<std::pair<RankOutlier, double>> outliers;
  for (size_t m = 0; m < std::size(metrics); ++m) {
    std::vector<std::pair<uint64_t, uint32_t>> v;
    for (const auto& r : ranks) v.push_back({metrics[m].of(r), r.rank});
    *dists[m] = distribution_of(std::move(v));
    const uint64_t median = dists[m]->median;
    // Per class, its median over all ranks (0 where a rank lacks it).
    std::vector<uint64_t> class_median;
    for (const auto& cls : classes) {
      std::vector<uint64_t> cv;
      for (const auto& r : ranks) {
        const RankClass* c = class_of(r, cls);
        cv.push_back(c ? metrics[m].of_class(*c) : 0);
      }
      class_median.push_back(median_of(std::move(cv)));
    }
    for (const auto& r : ranks) {
      const uint64_t value = metrics[m].of(r);
      if (!far_from(value, median)) continue;
      RankOutlier o;
      o.rank = r.rank;
      o.metric = metrics[m].name;
      o.value = value;
      o.median = median;
      uint64_t widest = 0;
      for (size_t k = 0; k < classes.size(); ++k) {
        const RankClass* c = class_of(r, classes[k]);
        const uint64_t cv = c ? metrics[m].of_class(*c) : 0;
        const uint64_t gap = cv > class_median[k] ? cv - class_median[k] : class_median[k] - cv;
        if (gap > widest) {
          widest = gap;
          o.cls = classes[k];
          o.cls_value = cv;
          o.cls_median = class_median[k];
        }
      }
      for (const auto& f : r.findings)
        if (f.time_ns > 2 * finding_median[f.kind]) o.findings.push_back(f.kind);
      outliers.push_back({std::move(o), distance(value, median)});
    }
  }
  std::stable_sort(outliers.begin(), outliers.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto& o : outliers) d.outliers.push_back(std::move(o.first));

  bool any_gpu = false;
  std::vector<std::pair<uint64_t, uint32_t>> gpu;
  for (const auto& r : ranks) {
    any_gpu |= r.gpu_ns.has_value();
    gpu.push_back({r.gpu_ns.value_or(0), r.rank});
  }
  if (any_gpu) d.gpu = distribution_of(std::move(gpu));

  // Patterns: ranks with the same sites, classes and findings.
  std::map<std::tuple<std::vector<uint32_t>, std::vector<std::string>, std::vector<std::string>>, size_t> index;
  for (const auto& r : ranks) {
    std::vector<std::string> cls, fk;
    for (const auto& c : r.classes) cls.push_back(c.cls);
    for (const auto& f : r.findings) fk.push_back(f.kind);
    std::sort(fk.begin(), fk.end());
    auto [it, added] = index.try_emplace({r.sites, cls, fk}, d.patterns.size());
    if (added) d.patterns.push_back({{}, r.sites, cls, fk});
    d.patterns[it->second].ranks.push_back(r.rank);
  }
  for (auto& p : d.patterns) std::sort(p.ranks.begin(), p.ranks.end());
  std::stable_sort(d.patterns.begin(), d.patterns.end(), [](const RankPattern& a, const RankPattern& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size() : a.ranks.front() < b.ranks.front();
  });

  std::map<uint32_t, AcrossRanks> sites;
  for (const auto& r : ranks)
    for (uint32_t s : r.sites) {
      AcrossRanks& a = sites[s];
      a.site = s;
      a.ranks.push_back(r.rank);
    }
  for (auto& [id, a] : sites) {
    std::sort(a.ranks.begin(), a.ranks.end());
    d.sites.push_back(std::move(a));
  }
  for (const auto& kind : kinds) {
    AcrossRanks a;
    a.finding = kind;
    std::vector<std::pair<uint64_t, uint32_t>> t;
    for (const auto& r : ranks)
      for (const auto& f : r.findings)
        if (f.kind == kind) {
          a.ranks.push_back(r.rank);
          a.calls += f.calls;
          a.time_ns += f.time_ns;
          t.push_back({f.time_ns, r.rank});
        }
    std::sort(a.ranks.begin(), a.ranks.end());
    a.time_per_rank = distribution_of(std::move(t));
    d.findings.push_back(std::move(a));
  }
  std::stable_sort(d.findings.begin(), d.findings.end(), [](const AcrossRanks& a, const AcrossRanks& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size() : a.time_ns > b.time_ns;
  });
  return d;
}

std::optional<std::string> separate_recordings(const model::Job& job) {
  // Processes that `cuxfer record` started say which run they were of. The
  // ranks of `mpirun cuxfer record ...` are one job of many record runs: two
  // ranks are judged by the rank rules of mixed_runs instead.
  struct Recorded {
    const trace::Trace* t;
    std::string run_id;
    bool ranked;
  };
  std::vector<Recorded> recorded;
  for (const auto& p : job.processes)
    if (auto id = run_id_of(p.trace)) recorded.push_back({&p.trace, std::move(*id), rank_of(p.trace).has_value()});
  for (size_t i = 0; i < recorded.size(); ++i)
    for (size_t j = i + 1; j < recorded.size(); ++j)
      if (recorded[i].run_id != recorded[j].run_id && !(recorded[i].ranked && recorded[j].ranked))
        return fmt::format(
            "{} and {} are from different runs (two `cuxfer record`s): their numbers are added up as one job; "
            "report each run's folder on its own to see them apart",
            recorded[i].t->path, recorded[j].t->path);
  return std::nullopt;
}

std::optional<std::string> mixed_runs(const model::Job& job) {
  struct Ranked {
    const trace::Trace* t;
    RankIdentity id;
  };
  std::vector<Ranked> ranked;
  std::map<std::pair<std::string, uint32_t>, const trace::Trace*> by_pid;  // (host, pid)
  for (const auto& p : job.processes) {
    if (!p.trace.has_process) continue;
    by_pid[{p.trace.process.hostname, p.trace.process.pid}] = &p.trace;
    if (auto id = rank_of(p.trace)) ranked.push_back({&p.trace, std::move(*id)});
  }
  // a is b or an ancestor of b among the job's traces (the same host).
  auto descends = [&](const trace::Trace* a, const trace::Trace* b) {
    for (size_t steps = 0; b && steps <= by_pid.size(); ++steps) {
      if (b == a) return true;
      auto it = by_pid.find({b->process.hostname, b->process.ppid});
      b = it == by_pid.end() ? nullptr : it->second;
    }
    return false;
  };
  constexpr uint64_t kApartNs = 60'000'000'000ull;
  for (size_t i = 0; i < ranked.size(); ++i)
    for (size_t j = i + 1; j < ranked.size(); ++j) {
      const Ranked &a = ranked[i], &b = ranked[j];
      const trace::ProcessInfo &pa = a.t->process, &pb = b.t->process;
      std::string why;
      if (!a.id.launch_id.empty() && !b.id.launch_id.empty() && a.id.launch_id != b.id.launch_id)
        why = fmt::format("launch ids {} and {}", a.id.launch_id, b.id.launch_id);
      else if (a.id.rank == b.id.rank && !descends(a.t, b.t) && !descends(b.t, a.t))
        why = fmt::format("both are rank {}", a.id.rank);
      else if (pa.exe != pb.exe && std::max(pa.start_realtime_ns, pb.start_realtime_ns) -
                                           std::min(pa.start_realtime_ns, pb.start_realtime_ns) >
                                       kApartNs)
        why = fmt::format("programs {} and {} started {} s apart", pa.exe, pb.exe,
                          (std::max(pa.start_realtime_ns, pb.start_realtime_ns) -
                           std::min(pa.start_realtime_ns, pb.start_realtime_ns)) /
                              1'000'000'000ull);
      if (!why.empty())
        return fmt::format("{} and {} are from different runs ({}); report each run on its own", a.t->path,
                           b.t->path, why);
    }
  return std::nullopt;
}

}  // namespace cuxfer::analyses
