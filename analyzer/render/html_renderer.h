// `cuxfer report --html FILE`: the report as one self-contained HTML file
// (inline CSS and SVG, no script, nothing fetched at view time) with plots a
// person would rather look at than read: achieved bandwidth against transfer
// size per transfer class with the machine's pinned ceiling, bytes and time
// per direction and memory kind, a timeline of transfers and kernels, and the
// findings with their call sites.
#pragma once

#include <string>

#include "analyzer/analyses/copy_plots.h"
#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "analyzer/model/machine_profile.h"

namespace cuxfer::render {

// `profile` (may be null) draws the pinned ceiling from a calibrated machine.
// `docs_url`: where the user docs the page cites are (a file:// URL of the
// installed docs/ folder, ending in '/'); each citation links there. Empty
// where none are installed (the wheel, a build tree): they are named only.
std::string render_html(const analyses::Report& report, const model::Job& job,
                        const model::MachineProfile* profile, const std::string& docs_url = {});
// The same from the plots' inputs gathered while the traces were read
// (analyses::copy_plots of the job, or a streamed report's): the page does
// not need the events.
std::string render_html(const analyses::Report& report, const analyses::CopyPlots& plots,
                        const model::MachineProfile* profile, const std::string& docs_url = {});

// The file:// URL of an absolute path, each byte outside the URL's unreserved
// characters and '/' percent-encoded.
std::string file_url(const std::string& absolute_path);

}  // namespace cuxfer::render
