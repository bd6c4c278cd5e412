// The per-call-site table as CSV (RFC 4180: CRLF-free "\n" rows are accepted
// by every reader we target; fields with a comma, quote or newline quoted,
// quotes doubled). Numbers are exact integers; an absent GPU time is empty.
#pragma once

#include <string>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"

namespace cuxfer::render {

// Header: pid,site_id,function,file,line,module,offset,class,calls,bytes,
// cpu_blocked_ns,gpu_ns,staged_bytes[,rank] (rank: only for a job of two ranks
// or more, docs/report.md "Multi-rank jobs"). One row per report call site, in the
// report's order. staged_bytes comes from the job (copies the rewrite staged).
std::string render_callsites_csv(const analyses::Report& report, const model::Job& job);

// The NVTX range table (report --ranges-csv). Header:
// path,name,depth,calls,bytes,pageable_bytes,cpu_blocked_ns,gpu_ns,failed_calls
// One row per range path, in the report's order; a range includes its nested
// ranges. Only the header when nothing was recorded in a range.
std::string render_ranges_csv(const analyses::Report& report);

// One field, quoted when it must be.
std::string csv_field(const std::string& s);

}  // namespace cuxfer::render
