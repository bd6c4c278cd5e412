// The report for programs: schema "cuxfer.report/1" (docs/report.md). Bytes
// and nanoseconds are exact integers; unknown values are null, never 0.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/analyses/report.h"

namespace cuxfer::render {

struct JsonOptions {
  std::optional<size_t> top_sites;  // unset: every call site
};

nlohmann::json report_to_json(const analyses::Report& report, const JsonOptions& options);
std::string render_json(const analyses::Report& report, const JsonOptions& options);

}  // namespace cuxfer::render
