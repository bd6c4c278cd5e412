// The per-call-site table as CSV (RFC 4180: CRLF-free "\n" rows are accepted
// by every reader we target; fields with a comma, quote or newline quoted,
// quotes doubled). Numbers are exact integers; an absent GPU time is empty.
#pragma once

#include <string>

#include "analyzer/analyses/report.h"

namespace cuxfer::render {

// Header: pid,site_id,function,file,line,module,offset,class,calls,bytes,
// cpu_blocked_ns,gpu_ns,staged_bytes[,rank] (rank: only for a job of two ranks
// or more, docs/report.md "Multi-rank jobs"). One row per report call site, in the
// report's order. staged_bytes: the site's copies the rewrite staged
// (CallSiteTotals::staged_bytes, from the tally: a streamed report and a
// report of summaries write the same table as one holding the events).
std::string render_callsites_csv(const analyses::Report& report);

// The NVTX range table (report --ranges-csv). Header:
// path,name,depth,calls,bytes,pageable_bytes,cpu_blocked_ns,gpu_ns,failed_calls
// One row per range path, in the report's order; a range includes its nested
// ranges. Only the header when nothing was recorded in a range.
std::string render_ranges_csv(const analyses::Report& report);

// One field, quoted when it must be.
std::string csv_field(const std::string& s);

}  // namespace cuxfer::render
