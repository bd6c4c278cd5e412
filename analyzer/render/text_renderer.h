// The report for people: a terminal-width text rendering of a Report.
#pragma once

#include <cstddef>
#include <string>

#include "analyzer/analyses/report.h"

namespace cuxfer::render {

struct TextOptions {
  size_t width = 100;     // columns available
  size_t top_sites = 10;  // call sites listed
  bool stacks = false;    // each listed site's whole stack under the table (--stack)
};

std::string render_text(const analyses::Report& report, const TextOptions& options);

}  // namespace cuxfer::render
