// `cuxfer report --html FILE`: the report as one self-contained HTML file
// (inline CSS and SVG, no script, nothing fetched at view time) with plots a
// person would rather look at than read: achieved bandwidth against transfer
// size per transfer class with the machine's pinned ceiling, bytes and time
// per direction and memory kind, a timeline of transfers and kernels, and the
// findings with their call sites.
#pragma once

#include <string>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "analyzer/model/machine_profile.h"

namespace cuxfer::render {

// `profile` (may be null) draws the pinned ceiling from a calibrated machine.
std::string render_html(const analyses::Report& report, const model::Job& job, const model::MachineProfile* profile);

}  // namespace cuxfer::render
