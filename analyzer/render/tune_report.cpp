#include "analyzer/render/tune_report.h"

#include <cmath>

#include <fmt/format.h>

#include "analyzer/text/units.h"

namespace cuxfer::render {

std::string format_seconds(double ns) { return fmt::format("{:.3f} s", static_cast<double>(static_cast<uint64_t>(ns)) / 1e9); }

namespace {

std::string bytes_change(double base, double now) {
  return fmt::format("{} -> {} ({} saved)", text::format_bytes(static_cast<uint64_t>(base)),
                     text::format_bytes(static_cast<uint64_t>(now)),
                     text::format_bytes(base > now ? static_cast<uint64_t>(base - now) : 0));
}

const char* faster_or_slower(double effect) { return effect >= 0 ? "faster" : "slower"; }

std::string durations(const std::vector<double>& ns) {
  std::string s;
  for (double v : ns) s += (s.empty() ? "" : ", ") + text::format_duration(static_cast<uint64_t>(v));
  return s.empty() ? "none" : s;
}

}  // namespace

std::string render_tune_report(const TuneReport& r) {
  using text::format_percent;
  std::string t = fmt::format("cuxfer tune report\ncommand: {}\n", r.command_line);
  t += fmt::format("runs: {} of at most {} ({} observe, {} baseline, {} with all candidates, {} with one candidate "
                   "alone, {} confirming the kept set); --reps {}\n",
                   r.runs, r.max_runs, r.observe_runs, r.baseline_runs, r.combined_runs, r.solo_runs, r.confirm_runs,
                   r.reps);
  t += fmt::format("baseline wall time: median {}, run-to-run noise {} (max - min over median, at least {})\n",
                   format_seconds(r.baseline_wall_ns), format_percent(r.baseline_noise), format_percent(r.min_noise));
  t += fmt::format("all candidates:     median {}, {} {} than the baseline (noise {})\n",
                   format_seconds(r.combined_wall_ns), format_percent(std::abs(r.combined_effect)),
                   faster_or_slower(r.combined_effect), format_percent(r.combined_noise));
  if (r.simulated) t += "NOTE: recorded on SIMULATED CUDA: the timings mean nothing.\n";
  t += "\nCandidates (measured: CPU-blocked time of the copy call sites each changes and the whole run's wall\n"
       "time, medians over the runs named; bytes at those call sites through the driver's pageable path and\n"
       "by DMA, medians):\n";
  for (size_t c = 0; c < r.candidates.size(); ++c) {
    const TuneCandidateRow& e = r.candidates[c];
    t += fmt::format("  {}. {:<6} {} {} (estimated gain {})\n", c + 1, e.kept ? "KEEP" : "reject", e.path, e.site,
                     text::format_duration(e.estimated_gain_ns));
    t += fmt::format("     measured {}: call sites {} -> {} ({} {}, noise {}); whole run {} -> {} ({} {}, noise {})\n",
                     e.alone ? "alone" : "with all candidates",
                     text::format_duration(static_cast<uint64_t>(e.base_site_ns)),
                     text::format_duration(static_cast<uint64_t>(e.now_site_ns)), format_percent(std::abs(e.site_effect)),
                     faster_or_slower(e.site_effect), format_percent(e.site_noise), format_seconds(e.base_wall_ns),
                     format_seconds(e.now_wall_ns), format_percent(std::abs(e.wall_effect)),
                     faster_or_slower(e.wall_effect), format_percent(e.wall_noise));
    t += fmt::format("     call sites, each run: {} -> {}\n", durations(e.base_site_runs),
                     durations(e.now_site_runs));
    t += "     bytes at its call sites: on the pageable path " +
         bytes_change(e.base_pageable_bytes, e.now_pageable_bytes) + "; by DMA " +
         bytes_change(e.base_dma_bytes, e.now_dma_bytes) + "\n";
    t += "     " + e.reason + "\n";
  }
  if (!r.skipped.empty()) {
    t += "Skipped by the candidate search:\n";
    for (const auto& line : r.skipped) t += "  " + line + "\n";
  }
  for (const auto& note : r.shim_notes) t += "shim: " + note + "\n";
  t += fmt::format("\nMeasured per call site: run {} (the median baseline run) against run {} (the median run of {})\n",
                   r.baseline_run, r.compared_run, r.compared_with_all ? "all candidates" : "the winning policy");
  if (!r.comparison_note.empty()) t += r.comparison_note + "\n";
  t += "\n" + r.diff_text;
  if (!t.empty() && t.back() != '\n') t += '\n';
  return t;
}

}  // namespace cuxfer::render
