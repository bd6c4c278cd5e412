// Metadata blocks of a trace, and their byte encoding. Strings are u32 length +
// bytes; integers little-endian. Decoders check every bound and return false on
// malformed input instead of trusting lengths read from a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cuxfer::trace {

struct ProcessInfo {
  uint32_t pid = 0;
  uint32_t ppid = 0;
  uint64_t start_realtime_ns = 0;   // CLOCK_REALTIME at shim start
  uint64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at the same instant (clock anchor)
  std::string exe;
  std::vector<std::string> argv;
  std::string hostname;
  std::string trace_name;
  std::string cuxfer_version;
  uint32_t stack_depth = 0;  // 0 = call stacks not captured (only the immediate call site)
};

struct ModuleInfo {
  uint64_t base = 0;  // load bias (dlpi_addr)
  uint64_t low = 0;   // lowest mapped address of its PT_LOAD segments
  uint64_t high = 0;  // one past the highest
  std::string path;
  std::string build_id;  // hex, empty if the object has none
};

struct CallSite {
  uint32_t id = 0;
  std::vector<uint64_t> frames;  // return addresses, innermost first
};

enum class CuptiState : uint8_t {
  Unknown = 0,
  Active = 1,       // GPU records present
  Unavailable = 2,  // reason says why (not found, another subscriber, simulated CUDA, ...)
};

struct Status {
  bool simulated = false;
  CuptiState cupti = CuptiState::Unknown;
  std::string cupti_reason;
  uint64_t events_recorded = 0;
  uint64_t events_dropped = 0;       // per-thread buffer full: the report says the trace is partial
  uint64_t gpu_records_recorded = 0;
  uint64_t gpu_records_dropped = 0;
  uint64_t callsites_dropped = 0;    // call-site table full: events kept, site unknown
};

// The app took CUPTI over (its profiler registered its own activity
// callbacks, or finalized CUPTI): the shim handed its buffers back first and
// records no GPU times after `t_ns` (CLOCK_MONOTONIC, as Event::t_enter_ns).
struct CuptiHandover {
  uint64_t t_ns = 0;
  std::string reason;  // one line: which call, from which module
};

// A Python code object, sent once, when a captured stack first runs through
// it (trace/python_frame.h). Lines are decoded by the analyzer from the
// interpreter's own line table, whose format depends on `version`.
struct PyCode {
  uint32_t id = 0;
  uint32_t version = 0;    // the interpreter's major << 8 | minor (0x030b: 3.11)
  int32_t first_line = 0;  // co_firstlineno
  std::string filename;    // co_filename, UTF-8
  std::string qualname;    // co_qualname (3.11+), co_name before
  std::string line_table;  // co_linetable's bytes; empty when it was too large to copy
};

// How the shim ran in this process, as typed values (the analyzer once read
// them from notes): written once, after Process and ApiNames.
struct RunModes {
  bool rewrite_pin = false;        // CUXFER_REWRITE=pin
  bool policy = false;             // a policy file was given (CUXFER_POLICY)
  bool register_in_place = false;  // the rewrite may register host memory in place
  bool python_stacks = false;      // Python frames are read (CUXFER_PYTHON_STACKS)
  std::string policy_path;
};

// CUPTI's memcpy and memset records are not always on (CUXFER_CUPTI=auto):
// the shim's governor turns them off where they would cost more than they
// tell (shim/record/cupti_governor.h). Each change, in time order, says when
// (CLOCK_MONOTONIC; `on` changes take effect after the enable returned, `off`
// ones before the disable was called) and why. Values are stored: append only.
enum class GateReason : uint8_t {
  Start = 0,        // records on from the start (CUPTI came up)
  AsyncCopies = 1,  // asynchronous copies: their GPU time is not bounded by the call
  SyncOnly = 2,     // only synchronous copies lately: each call's CPU time bounds its DMA
  Sample = 3,       // on for one window, to sample GPU times of what runs
  CostCap = 4,      // the copy rate would make the records cost more than the share allowed
  Stop = 5,         // recording ended (shutdown, handover)
  Paused = 6,       // outside the capture range (cudaProfilerStop): nothing is recorded
  Repeats = 7,      // asynchronous copies only from call sites the records have timed already
};
constexpr uint8_t kGateReasonCount = 8;
const char* gate_reason_name(GateReason r);

struct CuptiGateChange {
  uint64_t t_ns = 0;
  bool on = false;
  GateReason reason = GateReason::Start;
  bool operator==(const CuptiGateChange&) const = default;
};

// An NVTX range's name, sent once (NvtxNames block): `domain` is empty for
// NVTX's default domain. Both are the bytes the app gave (A variants) or their
// UTF-8 encoding (W variants); they need not be valid UTF-8.
struct NvtxName {
  uint32_t id = 0;
  std::string domain;
  std::string message;
  bool operator==(const NvtxName&) const = default;
};

// Encoders append to `out`.
void encode(const ProcessInfo& p, std::string& out);
void encode(const std::vector<ModuleInfo>& m, std::string& out);
void encode(const std::vector<CallSite>& c, std::string& out);
void encode(const Status& s, std::string& out);
void encode(const CuptiHandover& h, std::string& out);
void encode(const std::vector<PyCode>& c, std::string& out);
void encode(const RunModes& m, std::string& out);
void encode(const std::vector<CuptiGateChange>& g, std::string& out);
void encode(const std::vector<NvtxName>& n, std::string& out);
void encode_strings(const std::vector<std::string>& v, std::string& out);

bool decode(std::string_view in, ProcessInfo& p);
bool decode(std::string_view in, std::vector<ModuleInfo>& m);  // appends
bool decode(std::string_view in, std::vector<CallSite>& c);    // appends
bool decode(std::string_view in, Status& s);
bool decode(std::string_view in, CuptiHandover& h);
bool decode(std::string_view in, std::vector<PyCode>& c);      // appends
bool decode(std::string_view in, RunModes& m);
bool decode(std::string_view in, std::vector<CuptiGateChange>& g);  // appends
bool decode(std::string_view in, std::vector<NvtxName>& n);  // appends
bool decode_strings(std::string_view in, std::vector<std::string>& v);  // appends

}  // namespace cuxfer::trace
