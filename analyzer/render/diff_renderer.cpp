#include "analyzer/render/diff_renderer.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/text/units.h"

namespace cuxfer::render {

using namespace text;  // number and width formatting (analyzer/text/units.h)

using analyses::Diff;
using analyses::DiffRun;
using analyses::DiffSide;
using analyses::DiffSite;
using nlohmann::json;

std::string format_signed_duration(int64_t ns) {
  if (ns == 0) return "0 ns";
  uint64_t mag = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::string out(ns < 0 ? "-" : "+");
  out += format_duration(mag);
  return out;
}

std::string format_ratio(uint64_t base, uint64_t now) {
  if (base == 0) return "n/a";
  return fmt::format("{:.2f}x", static_cast<double>(now) / static_cast<double>(base));
}

namespace {

std::string signed_bytes(uint64_t base, uint64_t now) {
  if (base == now) return "0 B";
  std::string out(now > base ? "+" : "-");
  out += format_bytes(now > base ? now - base : base - now);
  return out;
}

std::string signed_count(uint64_t base, uint64_t now) {
  if (base == now) return "0";
  std::string out(now > base ? "+" : "-");
  out += format_count(now > base ? now - base : base - now);
  return out;
}

int64_t delta(uint64_t base, uint64_t now) { return static_cast<int64_t>(now) - static_cast<int64_t>(base); }

std::string row(const std::string& label, const std::string& b, const std::string& n, const std::string& d,
                const std::string& r) {
  return fmt::format("  {:<26} {:>12} {:>12} {:>12} {:>8}\n", label, b, n, d, r);
}

std::string run_line(const char* name, const DiffRun& r) {
  std::string paths;
  for (size_t i = 0; i < r.traces.size() && i < 3; ++i) paths += (i ? ", " : "") + r.traces[i];
  if (r.traces.size() > 3) paths += fmt::format(", +{} more", r.traces.size() - 3);
  const std::string runs = r.runs > 1 ? fmt::format("{} runs of ", r.runs) : "";
  return fmt::format("{}: {}{} process{}{}{}", name, runs, r.processes, r.processes == 1 ? "" : "es",
                     r.rewrite ? ", rewrite=pin" : "", paths.empty() ? "" : " (" + paths + ")");
}

// Said first, on one line whatever the width (people and scripts look for
// it, as in the report): times on the simulated CUDA mean nothing.
std::string simulated_banner(const Diff& d) {
  if (!d.base.simulated && !d.now.simulated) return {};
  if (d.base.simulated && d.now.simulated)
    return "!! SIMULATED CUDA (tests/simcuda): both sides ran without a GPU; their times say nothing "
           "about real hardware\n";
  return fmt::format("!! SIMULATED CUDA (tests/simcuda): the {} side ran without a GPU and the {} side on "
                     "real CUDA; their times do not compare\n",
                     d.base.simulated ? "base" : "new", d.base.simulated ? "new" : "base");
}

std::string percent(double fraction) {
  const double p = fraction * 100;
  return p >= 10 ? fmt::format("{:.0f} %", p) : fmt::format("{:.1f} %", p);
}

// What the runs say about the time recovered: one run each cannot tell it
// from noise; several give the range over every pair of runs and a verdict.
std::string noise_sentences(const Diff& d) {
  const analyses::TimeRecoveredNoise& n = d.noise;
  if (n.verdict == analyses::NoiseVerdict::OneRunEach)
    return fmt::format("One run each: nothing says how much runs vary, so this cannot be told apart "
                       "from run-to-run noise. Record {} or more runs of each and compare them all "
                       "(cuxfer diff --base RUN... --new RUN..., or a folder of run folders per side) for "
                       "the difference with its uncertainty.",
                       n.runs_for_separation);
  const size_t pairs = d.base.samples.size() * d.now.samples.size();
  std::string out =
      fmt::format("The {} pairs of a base and a new run differ by {} to {}. ", pairs,
                  format_signed_duration(n.pairs_min_ns), format_signed_duration(n.pairs_max_ns));
  const std::string order = n.pairs_min_ns > 0 ? "every base run blocked longer than every new run"
                                               : "every new run blocked longer than every base run";
  switch (n.verdict) {
    case analyses::NoiseVerdict::Beyond:
      out += fmt::format("Beyond run-to-run noise: {}, which runs that do not differ would do by chance "
                         "{} of the time (exact permutation test).",
                         order, percent(n.chance));
      break;
    case analyses::NoiseVerdict::NotConclusive:
      out += fmt::format("Not conclusive: {}, but with {} and {} runs that happens by chance {} of the time "
                         "even when the runs do not differ; {} runs of each can tell.",
                         order, d.base.samples.size(), d.now.samples.size(), percent(n.chance),
                         n.runs_for_separation);
      break;
    default:
      out += "Within run-to-run noise: the runs overlap (some pair differs the other way, or not at all), so "
             "they cannot tell this difference from noise.";
  }
  return out;
}

const char* noise_verdict_name(analyses::NoiseVerdict v) {
  switch (v) {
    case analyses::NoiseVerdict::OneRunEach: return "one_run_each";
    case analyses::NoiseVerdict::Beyond: return "beyond_noise";
    case analyses::NoiseVerdict::NotConclusive: return "not_conclusive";
    case analyses::NoiseVerdict::Within: return "within_noise";
  }
  return "?";
}

json class_json(const analyses::DiffClassCount& k) {
  return json{{"class", analyses::class_name(k.cls)}, {"calls", k.calls}, {"bytes", k.bytes}};
}

json side_json(const DiffSide& s) {
  json classes = json::array();
  for (const auto& k : s.classes) classes.push_back(class_json(k));
  return json{{"calls", s.calls},
              {"copy_bytes", s.copy_bytes},
              {"staged_calls", s.staged_calls},
              {"staged_bytes", s.staged_bytes},
              {"cpu_blocked_ns", s.cpu_blocked_ns},
              {"gpu_ns", s.gpu_ns ? json(*s.gpu_ns) : json(nullptr)},
              {"failed_calls", s.failed_calls},
              {"classes", classes}};
}

json ratio_json(uint64_t base, uint64_t now) {
  return base ? json(static_cast<double>(now) / static_cast<double>(base)) : json(nullptr);
}

json delta_json(const DiffSide& b, const DiffSide& n) {
  json d{{"calls", delta(b.calls, n.calls)},
         {"copy_bytes", delta(b.copy_bytes, n.copy_bytes)},
         {"staged_bytes", delta(b.staged_bytes, n.staged_bytes)},
         {"cpu_blocked_ns", delta(b.cpu_blocked_ns, n.cpu_blocked_ns)},
         {"gpu_ns", b.gpu_ns && n.gpu_ns ? json(delta(*b.gpu_ns, *n.gpu_ns)) : json(nullptr)}};
  return d;
}

json ratios_json(const DiffSide& b, const DiffSide& n) {
  return json{{"copy_bytes", ratio_json(b.copy_bytes, n.copy_bytes)},
              {"cpu_blocked_ns", ratio_json(b.cpu_blocked_ns, n.cpu_blocked_ns)},
              {"gpu_ns", b.gpu_ns && n.gpu_ns ? ratio_json(*b.gpu_ns, *n.gpu_ns) : json(nullptr)}};
}

}  // namespace

json diff_to_json(const Diff& d) {
  auto run = [](const DiffRun& r) {
    json j{{"traces", r.traces}, {"runs", r.runs},         {"processes", r.processes},
           {"wall_ns", r.wall_ns}, {"rewrite", r.rewrite}, {"simulated", r.simulated}};
    j["totals"] = side_json(r.totals);
    json samples = json::array();
    for (const auto& s : r.samples)
      samples.push_back(
          json{{"traces", s.traces}, {"cpu_blocked_ns", s.cpu_blocked_ns}, {"wall_ns", s.wall_ns}});
    j["samples"] = samples;
    j["work_spread"] = r.work_spread.empty() ? json(nullptr) : json(r.work_spread);
    return j;
  };
  json j;
  j["schema"] = d.schema;
  j["base"] = run(d.base);
  j["new"] = run(d.now);
  j["same_work"] = d.same_work;
  json differing = json::array(), only_base = json::array(), only_new = json::array(), sites = json::array();
  for (const auto& s : d.sites) {
    if (!s.same_work) differing.push_back(json{{"site", s.key}, {"difference", s.difference}});
    if (s.in_base && !s.in_new) only_base.push_back(s.key);
    if (s.in_new && !s.in_base) only_new.push_back(s.key);
    sites.push_back(json{{"site", s.key},
                         {"display", s.display},
                         {"in_base", s.in_base},
                         {"in_new", s.in_new},
                         {"same_work", s.same_work},
                         {"base", side_json(s.base)},
                         {"new", side_json(s.now)},
                         {"delta", delta_json(s.base, s.now)},
                         {"ratio", ratios_json(s.base, s.now)},
                         {"time_recovered_ns", s.time_recovered_ns()}});
  }
  j["differing_sites"] = differing;
  j["only_in_base"] = only_base;
  j["only_in_new"] = only_new;
  json totals{{"delta", delta_json(d.base.totals, d.now.totals)},
              {"ratio", ratios_json(d.base.totals, d.now.totals)}};
  totals["delta"]["wall_ns"] = delta(d.base.wall_ns, d.now.wall_ns);
  totals["ratio"]["wall_ns"] = ratio_json(d.base.wall_ns, d.now.wall_ns);
  j["totals"] = totals;
  j["time_recovered_ns"] = d.time_recovered_ns();
  j["time_recovered_basis"] = d.base.runs > 1 || d.now.runs > 1
                                  ? "measured: median base minus median new CPU-blocked time"
                                  : "measured: base minus new CPU-blocked time (one run each)";
  const analyses::TimeRecoveredNoise& n = d.noise;
  j["time_recovered_noise"] = json{
      {"verdict", noise_verdict_name(n.verdict)},
      {"pairs_min_ns", n.pairs_min_ns},
      {"pairs_max_ns", n.pairs_max_ns},
      {"separated", n.separated},
      {"chance", n.chance},
      {"runs_for_separation", n.runs_for_separation},
      {"method",
       "every base run against every new run: the range of their CPU-blocked time differences; separated "
       "when all have one sign; chance: the probability of such a separation among runs that do not "
       "differ, 2 / C(m+n, m) (exact permutation test); beyond noise when separated with chance <= 5 %"}};
  j["simulated"] = d.base.simulated || d.now.simulated;
  j["sites"] = sites;
  j["notes"] = d.notes;
  return j;
}

std::string render_diff_json(const Diff& d) {
  return diff_to_json(d).dump(2, ' ', false, json::error_handler_t::replace) + "\n";  // names need not be UTF-8
}

std::string render_diff_text(const Diff& d, const DiffTextOptions& o) {
  const size_t width = std::max<size_t>(o.width, 60);
  std::string out = "cuxfer diff\n";
  out += "  " + fit(run_line("base", d.base), width - 2) + "\n";
  out += "  " + fit(run_line("new ", d.now), width - 2) + "\n\n";
  if (const std::string banner = simulated_banner(d); !banner.empty()) out += banner + "\n";
  for (const auto* side : {&d.base, &d.now})
    if (!side->work_spread.empty())
      for (const auto& line : wrap(fmt::format("!! NOT THE SAME WORK across the {} runs: {}; their medians "
                                               "mix different work",
                                               side == &d.base ? "base" : "new", side->work_spread),
                                   width))
        out += line + "\n";

  size_t differing = 0;
  for (const auto& s : d.sites) differing += !s.same_work;
  if (d.same_work) {
    out += fmt::format(
        "Same work: yes (every call site made the same copies, calls and bytes per class, in {})\n\n",
        d.base.runs > 1 || d.now.runs > 1 ? "every run" : "both runs");
  } else if (differing > 0) {
    out += fmt::format("!! NOT THE SAME WORK: {} call site{} made different copies; times do not compare like "
                       "for like\n",
                       differing, differing == 1 ? "" : "s");
    size_t shown = 0;
    for (const auto& s : d.sites) {
      if (s.same_work) continue;
      if (shown++ == o.max_differing) {
        out += fmt::format("   ... and {} more (--json lists all)\n", differing - o.max_differing);
        break;
      }
      out += "   ! " + fit(s.label + ": " + s.difference, width - 5) + "\n";
    }
    out += "\n";
  }

  const DiffSide &b = d.base.totals, &n = d.now.totals;
  if (d.base.runs > 1 || d.now.runs > 1)
    out += fmt::format("Totals: medians over {} base and {} new runs\n", d.base.runs, d.now.runs);
  out += row("Totals", "base", "new", "delta", "new/base");
  out += row("copies", format_count(b.calls), format_count(n.calls), signed_count(b.calls, n.calls),
             format_ratio(b.calls, n.calls));
  out += row("bytes moved by DMA", format_bytes(b.copy_bytes), format_bytes(n.copy_bytes),
             signed_bytes(b.copy_bytes, n.copy_bytes), format_ratio(b.copy_bytes, n.copy_bytes));
  out += row("bytes staged on the CPU", format_bytes(b.staged_bytes), format_bytes(n.staged_bytes),
             signed_bytes(b.staged_bytes, n.staged_bytes), format_ratio(b.staged_bytes, n.staged_bytes));
  out += row("CPU-blocked time", format_duration(b.cpu_blocked_ns), format_duration(n.cpu_blocked_ns),
             format_signed_duration(delta(b.cpu_blocked_ns, n.cpu_blocked_ns)),
             format_ratio(b.cpu_blocked_ns, n.cpu_blocked_ns));
  if (b.gpu_ns && n.gpu_ns)
    out += row("GPU time", format_duration(*b.gpu_ns), format_duration(*n.gpu_ns),
               format_signed_duration(delta(*b.gpu_ns, *n.gpu_ns)), format_ratio(*b.gpu_ns, *n.gpu_ns));
  else
    out += row("GPU time", b.gpu_ns ? format_duration(*b.gpu_ns) : "n/a",
               n.gpu_ns ? format_duration(*n.gpu_ns) : "n/a", "n/a", "n/a");
  out += row("wall time (traced span)", format_duration(d.base.wall_ns), format_duration(d.now.wall_ns),
             format_signed_duration(delta(d.base.wall_ns, d.now.wall_ns)),
             format_ratio(d.base.wall_ns, d.now.wall_ns));
  out += "\n";
  const bool several = d.base.runs > 1 || d.now.runs > 1;
  for (const auto& line :
       wrap(fmt::format("Time recovered: {}{} ({}; measured, not estimated){}. {}",
                        format_signed_duration(d.time_recovered_ns()),
                        d.base.simulated || d.now.simulated ? " on SIMULATED CUDA" : "",
                        several ? fmt::format("median of the {} base runs minus median of the {} new runs' "
                                              "CPU-blocked time",
                                              d.base.runs, d.now.runs)
                                : "base minus new CPU-blocked time",
                        n.staged_bytes ? fmt::format(". Staging copied {} once more on the CPU",
                                                     format_bytes(n.staged_bytes))
                                       : "",
                        o.noise_note.empty() ? noise_sentences(d) : o.noise_note),
                  width))
    out += line + "\n";

  // Matched call sites.
  const size_t fixed = 8 + 1 + 10 + 1 + 10 + 1 + 10 + 1 + 10 + 1 + 10;
  const size_t name_w = width > fixed + 2 + 16 ? width - fixed - 2 - 1 : 16;
  std::string sites;
  size_t shown = 0, matched = 0;
  for (const auto& s : d.sites) {
    if (!(s.in_base && s.in_new)) continue;
    ++matched;
    if (shown >= o.top_sites) continue;
    ++shown;
    sites += fmt::format("  {:<{}} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", fit(s.label, name_w), name_w,
                         format_count(s.now.calls), format_bytes(s.now.copy_bytes),
                         format_bytes(s.now.staged_bytes), format_duration(s.base.cpu_blocked_ns),
                         format_duration(s.now.cpu_blocked_ns), format_signed_duration(s.time_recovered_ns()));
  }
  if (matched) {
    out += fmt::format("\nCall sites in both runs ({}; most time recovered first)\n", matched);
    out += fmt::format("  {:<{}} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "site", name_w, "copies", "bytes",
                       "staged", "CPU base", "CPU new", "recovered");
    out += sites;
    if (matched > shown) out += fmt::format("  ... {} more (--top, --json)\n", matched - shown);
  }
  for (int which = 0; which < 2; ++which) {
    std::vector<const DiffSite*> only;
    for (const auto& s : d.sites)
      if (which == 0 ? (s.in_base && !s.in_new) : (s.in_new && !s.in_base)) only.push_back(&s);
    if (only.empty()) continue;
    out += fmt::format("\nCall sites only in {} ({})\n", which == 0 ? "base" : "new", only.size());
    for (const DiffSite* s : only) {
      const DiffSide& side = which == 0 ? s->base : s->now;
      out += "  " +
             fit(fmt::format("{}: {} copies, {}, {}", s->label, format_count(side.calls),
                             format_bytes(side.copy_bytes), format_duration(side.cpu_blocked_ns)),
                 width - 2) +
             "\n";
    }
  }
  if (!d.notes.empty()) {
    out += "\nNotes\n";
    for (const auto& note : d.notes)
      for (const auto& line : wrap("- " + note, width - 2)) out += "  " + line + "\n";
  }
  return out;
}

}  // namespace cuxfer::render
