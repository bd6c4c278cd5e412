// Renders a `cuxfer diff` comparison: text (width-aware, the report's units)
// and JSON (schema cuxfer.diff/1, exact integers; docs/report.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/analyses/diff.h"

namespace cuxfer::render {

struct DiffTextOptions {
  size_t width = 100;
  size_t top_sites = 10;      // matched call sites listed
  size_t max_differing = 20;  // differing sites named under the same-work warning
  // Said after the time recovered instead of how far it stands from noise,
  // where the caller judged the noise itself (tune's report: its verdicts
  // weigh every run; the diff shows one run of each). Empty: the diff's own.
  std::string noise_note;
};

std::string render_diff_text(const analyses::Diff& diff, const DiffTextOptions& options);
nlohmann::json diff_to_json(const analyses::Diff& diff);
std::string render_diff_json(const analyses::Diff& diff);

// "+1.2 ms", "-850 ns", "0 ns".
std::string format_signed_duration(int64_t ns);
// new / base as "0.42x"; "n/a" when base is 0.
std::string format_ratio(uint64_t base, uint64_t now);

}  // namespace cuxfer::render
