// The job as Chrome/Perfetto trace-event JSON (the JSON Object Format with
// "traceEvents"), loadable in ui.perfetto.dev and chrome://tracing: one
// complete event per recorded call on its process/thread, GPU copy/memset
// records on one track per device and stream, and flow arrows from each call
// to the GPU records the model joined to it, and the CUPTI governor's copy
// records (on, off, and why) on a track of their own. docs/cli.md describes
// the layout.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/model/job.h"

namespace cuxfer::render {

// Synthetic thread ids of GPU tracks start here (above any Linux tid).
inline constexpr uint32_t kGpuTrackTidBase = 0x40000000;
// NVTX range tracks: this plus the thread's tid (kernel tids stay below 2^22).
inline constexpr uint32_t kNvtxTrackTidBase = 0x20000000;
// The track of the CUPTI governor's copy records (on/off and why), one a process.
inline constexpr uint32_t kGateTrackTid = 0x30000000;

// Timestamps are microseconds (with nanosecond fractions) since the earliest
// call or GPU record of the job: all traces of a job share CLOCK_MONOTONIC.
std::string render_perfetto(const model::Job& job);

}  // namespace cuxfer::render
