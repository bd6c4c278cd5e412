// Reads a whole trace file into memory. Untrusted input: every length is
// checked, a truncated or corrupt tail stops the read at the last good block
// (and says so), and a file that is not a cuxfer trace is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "trace/event.h"
#include "trace/records.h"

namespace cuxfer::trace {

struct Trace {
  std::string path;
  uint32_t format_version = 0;  // the file header's; events of older versions are read into the current layout
  bool has_process = false;
  ProcessInfo process;
  std::vector<std::string> api_names;
  std::vector<ModuleInfo> modules;
  std::vector<CallSite> callsites;
  std::vector<PyCode> py_codes;
  std::vector<Event> events;
  std::vector<GpuRecord> gpu_records;
  // GPU records read past without being kept (EventBlocks::skip_gpu_records):
  // how many, and how many the report could not join in a stream.
  struct GpuRecordCount {
    uint64_t records = 0;
    // Records that carry a correlation id (the shim writes none; older
    // traces may), and records of a kind this reader does not know: the join
    // by time (what the current shim's records need) is the only one streamed.
    uint64_t not_joined_by_time = 0;
    // Kernel records without a correlation id: joined to no call (the
    // overlap analysis measures copies against them), so they stream beside
    // the join.
    uint64_t kernels = 0;
    // Unified-memory records: joined to no call (attributed by address to
    // managed allocations), so they stream beside the join.
    uint64_t unified_memory = 0;
  } gpu_records_passed;
  std::vector<std::string> notes;
  bool has_status = false;
  Status status;
  bool has_modes = false;  // traces before RunModes said the modes in notes only
  RunModes modes;
  bool has_cupti_handover = false;  // GPU records end at cupti_handover.t_ns
  CuptiHandover cupti_handover;
  std::vector<CuptiGateChange> cupti_gate;  // CUPTI copy records on/off, in time order (none: always on)
  std::vector<NvtxName> nvtx_names;    // NVTX range names by id
  std::vector<CallSite> nvtx_stacks;   // NVTX range stacks: id -> name ids, outermost first
  bool complete = false;    // the End block was seen: the process shut down cleanly
  std::string cut_reason;   // non-empty when reading stopped before the end of the file
  uint64_t blocks_read = 0;

  const char* api_name(uint16_t id) const {
    return id < api_names.size() ? api_names[id].c_str() : "?";
  }
};

enum class ReadStatus {
  Ok,           // read (possibly partially: see Trace::complete / cut_reason)
  Missing,      // cannot open
  Empty,        // zero bytes: the process died before writing anything
  Foreign,      // not a cuxfer trace
  Unsupported,  // a cuxfer trace of a newer format version
};

// Fills `out`; on anything but Ok, `error` holds one line for the user.
ReadStatus read_trace(const std::string& path, Trace& out, std::string& error);

// What a streaming read does with the event blocks, which are nearly all of a
// trace: a report of a trace of millions of events reads it twice, once for
// everything else (skip) and once to hand the events over a block at a time
// (sink), so that memory holds one block, never the trace's events.
// Either way Trace::events stays empty; every other part is read as by
// read_trace, and a file cut short is cut at the same block, except that a
// skipped block is not decompressed (a corrupt one is found by the second read).
struct EventBlocks {
  bool skip = false;
  // GPU record blocks, which a trace of a real GPU has about as many of as
  // events: with skip_gpu_records they are counted (Trace::gpu_records_passed)
  // and let go; with gpu_sink they are handed over like the events, in file
  // order among them, valid during the call only (false stops the read).
  // Either way Trace::gpu_records stays empty, also in a read that keeps the
  // events (neither skip nor sink set).
  bool skip_gpu_records = false;
  std::function<bool(std::span<GpuRecord>)> gpu_sink;
  // Called with each block's events (in the current layout), in file order;
  // the span is valid during the call only. The callee may change them.
  // False stops the read there (Trace::cut_reason says so).
  std::function<bool(std::span<Event>)> sink;
};
ReadStatus read_trace(const std::string& path, Trace& out, std::string& error, const EventBlocks& events);

// Whether the file at `path` ends with an End block (its last 24 bytes, a
// valid header of an empty End): the process shut the trace down cleanly.
// Reads those bytes only, not the trace (which may be gigabytes): for the
// launcher's line after a run. False for a missing, short or cut file.
bool trace_ends_cleanly(const std::string& path);

}  // namespace cuxfer::trace
