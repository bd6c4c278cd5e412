// `cuxfer tune`'s text report (docs/tune.md): what was run, each candidate's
// measurements and verdict, and the diff of a median baseline run against a
// median run of the winning policy. The command measures and decides
// (cli/tune_command.cpp, tune/); this only lays the values out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cuxfer::render {

struct TuneCandidateRow {
  bool kept = false;
  std::string path;              // "register", "stage", "zero_copy", ...
  std::string site;              // how the command names the site
  uint64_t estimated_gain_ns = 0;
  bool alone = false;            // measured alone, else with all candidates
  double base_site_ns = 0, now_site_ns = 0, site_effect = 0, site_noise = 0;  // medians; effect > 0: faster
  std::vector<double> base_site_runs,
      now_site_runs;  // each run's site time, in run order: what the noise is of
  double base_wall_ns = 0, now_wall_ns = 0, wall_effect = 0, wall_noise = 0;
  double base_pageable_bytes = 0, now_pageable_bytes = 0;  // medians at its call sites
  double base_dma_bytes = 0, now_dma_bytes = 0;
  std::string reason;
};

struct TuneReport {
  std::string command_line;
  size_t runs = 0, max_runs = 0, observe_runs = 0, baseline_runs = 0, combined_runs = 0, solo_runs = 0,
         confirm_runs = 0;
  uint64_t reps = 0;
  double baseline_wall_ns = 0, baseline_noise = 0, min_noise = 0;
  double combined_wall_ns = 0, combined_effect = 0, combined_noise = 0;
  bool simulated = false;
  std::vector<TuneCandidateRow> candidates;
  std::vector<std::string> skipped;     // what the candidate search left out
  std::vector<std::string> shim_notes;  // the shim's policy notes, once each
  uint32_t baseline_run = 0, compared_run = 0;
  bool compared_with_all = false;       // the compared run applied all candidates, not the winning policy
  std::string comparison_note;
  std::string diff_text;                // render_diff_text of those two runs
};

std::string render_tune_report(const TuneReport& r);

// "1.234 s".
std::string format_seconds(double ns);

}  // namespace cuxfer::render
