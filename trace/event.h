// The records that travel from the shim to the analyzer. This header is the
// contract between the two: both sides include it, and docs/trace-format.md
// describes the same layout for people. Records are fixed-size, trivially
// copyable and little-endian, so a block of them is written and read with one
// memcpy; adding a field means a new format version.
#pragma once

#include <cstdint>
#include <type_traits>

namespace cuxfer::trace {

// What an event is. Values are stored in traces: append, never renumber.
enum class EventKind : uint8_t {
  Copy = 1,            // any memcpy family call (1D, 2D, 3D, peer, batch)
  Memset = 2,          // cuMemsetD* / cudaMemset*
  DeviceAlloc = 3,     // cuMemAlloc*, pitch, async/pool, cuMemCreate+cuMemMap
  DeviceFree = 4,
  ManagedAlloc = 5,
  HostAlloc = 6,       // pinned host allocation (cuMemHostAlloc, cudaMallocHost, ...)
  HostFree = 7,
  HostRegister = 8,    // in-place pinning of existing host memory
  HostUnregister = 9,
  // A sampled content fingerprint of the copy with the same correlation_id
  // (api "cuxfer:fingerprint"): address = the 64-bit fingerprint, stream = the
  // device-side pointer, bytes and direction as the copy's; t_enter/t_exit
  // bracket the hashing (its cost). Never user data, only the hash.
  Fingerprint = 10,
  // The calling thread's NVTX range stack changed since its last event (api
  // "cuxfer:nvtx"): written just before the thread's next event, which runs
  // inside that stack, as do the thread's later events until the next one.
  // callsite_id = the stack's id in the NvtxStacks blocks (0: no range open),
  // bytes = the stack's depth (it may exceed the ids kept: 64), t_enter_ns =
  // t_exit_ns = the next event's t_enter_ns. A thread's events are in its
  // order in the trace, so the analyzer replays them per thread.
  NvtxRanges = 11,
};

// Where the bytes go. HtoH and DtoD need both sides classified.
enum class Direction : uint8_t {
  Unknown = 0,
  HtoD = 1,
  DtoH = 2,
  DtoD = 3,
  HtoH = 4,
  Peer = 5,  // device to device across devices
};

// What kind of memory a pointer refers to, as the shim saw it.
enum class MemKind : uint8_t {
  Unknown = 0,
  Pageable = 1,    // ordinary host memory, not known to CUDA
  Pinned = 2,      // allocated pinned by CUDA (cuMemHostAlloc, cudaMallocHost)
  Registered = 3,  // ordinary host memory pinned in place (cuMemHostRegister)
  Managed = 4,     // unified memory (cuMemAllocManaged)
  Device = 5,      // device memory (cuMemAlloc, VMM mappings, pools)
  Array = 6,       // CUDA array (cuMemcpy*A*)
  // Zero-copy (policy path zero_copy): a device allocation the shim backed by
  // pinned host memory mapped into the device; copies to it are host memcpys.
  Mapped = 7,
};

// Why the pinned rewrite left a copy as the app made it (Event::passthrough),
// set where the rewrite decided (rewrite/copy_decision.h, staging.h,
// pinned_rewrite.h). Stored in traces: append, never renumber.
enum class PassthroughReason : uint8_t {
  // No reason recorded: the copy was rewritten, the rewrite never saw it (off,
  // a call no driver hook reached), or the trace predates format version 2.
  None = 0,
  BelowThreshold = 1,     // smaller than CUXFER_STAGE_MIN_H2D / _D2H: the driver's path is as fast
  GlobalCapture = 2,      // a graph capture in global mode was open: the call left its stream as made
  NoFreeBuffer = 3,       // no staging buffer free at the time (the path never waits for one)
  NotOneDimensional = 4,  // a 2D/3D, array or batch copy: the rewrite takes 1D copies only
  StreamCapturing = 5,    // the copy's stream was being captured into a graph
  PolicyPassthrough = 6,  // the policy file's passthrough for its call site
  PolicyExclude = 7,      // the policy file's exclude for its call site
  NotPolicySite = 8,      // a policy file alone (no CUXFER_REWRITE=pin) and it does not name the site
  NoPool = 9,             // staging declined in its context: no pool there (every pool slot taken)
  PoolGoing = 10,         // its context's pool was being given back (the context was going)
  NoContext = 11,         // no current context at the call
  RewriteDisabled = 12,   // the rewrite had turned itself off (a note says why)
  ForkChild = 13,         // a fork child: the parent's CUDA state does not carry over
  NoDriver = 14,          // the driver's entry points were not found (yet)
  StagingFailed = 15,     // the staging path's first DMA was refused: the app's call reports the error
  NotPageable = 16,       // its host side is not pageable memory (the app's pinned or registered memory)
  NotHostDevice = 17,     // not a 1D host<->device copy as the shim classified its pointers
  Empty = 18,             // zero bytes
  NoDecision = 19,        // the decision did not settle (a note says so)
  AfterGlobalCapture = 20,  // an async copy after the process's first global-mode capture (rewrite/capture_watch.h)
};
inline constexpr uint8_t kPassthroughReasons = static_cast<uint8_t>(PassthroughReason::AfterGlobalCapture) + 1;

// Event::flags bits.
enum EventFlags : uint8_t {
  kFlagAsync = 1u << 0,          // the API is an *Async variant
  kFlagFailed = 1u << 1,         // the real call returned an error (Event::result)
  kFlagPerThreadStream = 1u << 2,// _ptds/_ptsz entry point
  kFlagRuntimeOnly = 1u << 3,    // recorded by a runtime hook; no driver hook saw the call
  kFlagGpuExpected = 1u << 4,    // CUPTI was active: a GPU record should match this event
  kFlagKindFromDriver = 1u << 5, // a pointer kind came from cuPointerGetAttributes
  kFlagStaged = 1u << 6,         // rewrite: ran through the shim's pinned staging pool (bytes = Event::bytes)
  kFlagRegistered = 1u << 7,     // rewrite: ran through an in-place registration (future)
};

// One intercepted user call. 64 bytes.
struct Event {
  uint64_t t_enter_ns;   // CLOCK_MONOTONIC, nanoseconds
  uint64_t t_exit_ns;
  uint64_t bytes;        // payload bytes (copy, memset, allocation size)
  uint64_t address;      // copies: host-side pointer; device-to-device copies (DtoD, Peer):
                         // the source device ordinal + 1 (0 unknown; `device` is the
                         // destination's); allocations: the pointer
  uint64_t stream;       // CUstream handle value as the app passed it (0 = legacy default)
  uint32_t correlation_id;  // shim's id; matches GpuRecord::correlation_id
  uint32_t thread_id;       // kernel tid of the calling thread
  uint32_t callsite_id;     // index into the call-site table; 0 = none captured
  uint16_t api;             // index into the API name table written in the trace
  uint8_t kind;             // EventKind
  uint8_t direction;        // Direction
  uint8_t src_kind;         // MemKind
  uint8_t dst_kind;         // MemKind
  uint8_t flags;            // EventFlags
  int8_t device;            // device ordinal current at the call, -1 unknown
  int16_t result;           // CUresult / cudaError_t returned to the app (record_result(): saturated)
  uint8_t passthrough;      // PassthroughReason: copies the rewrite left as made (format version 2)
  uint8_t reserved;         // 0
};
static_assert(sizeof(Event) == 64);
static_assert(std::is_trivially_copyable_v<Event>);

// The value Event::result holds for a call's return code. CUDA's codes fit
// (CUresult and cudaError_t stay below 10000); anything outside 16 bits is
// recorded as the nearest value that fits, so a failure stays a failure.
constexpr int16_t record_result(long long r) {
  return static_cast<int16_t>(r > INT16_MAX ? INT16_MAX : r < INT16_MIN ? INT16_MIN : r);
}

// GPU-side activity from CUPTI. 48 bytes.
//
// UnifiedMemory records (CUPTI unified-memory counters: migrations and page
// faults of managed memory) belong to no call, so their correlation fields
// carry other data (see um_address() below):
//   cupti_copy_kind  the counter: UmCounter
//   bytes            bytes migrated (transfers), fault groups (GPU faults), 1 (a CPU fault)
//   start/end        CUPTI's times; end == start for CPU faults
//   device           the GPU involved (destination of an HtoD, source of a DtoH, faulting GPU)
//   src_kind         migration cause (UmCause) for transfers, access type for GPU faults
//   correlation_id, cupti_correlation_id   the faulting/migrated address, low and high 32 bits
enum class GpuRecordKind : uint8_t { Memcpy = 1, Memset = 2, Kernel = 3, UnifiedMemory = 4 };

// CUpti_ActivityUnifiedMemoryCounterKind values cuxfer records.
enum class UmCounter : uint8_t { HtoD = 1, DtoH = 2, CpuPageFault = 3, GpuPageFault = 4, Thrashing = 5, DtoD = 8 };
// CUpti_ActivityUnifiedMemoryMigrationCause.
enum class UmCause : uint8_t { Unknown = 0, User = 1, Coherence = 2, Prefetch = 3, Eviction = 4, AccessCounters = 5 };

struct GpuRecord {
  uint64_t start_ns;      // same clock as Event timestamps
  uint64_t end_ns;
  uint64_t bytes;
  uint32_t correlation_id;  // the shim's Event::correlation_id (CUPTI external id), 0 if unknown
  uint32_t cupti_correlation_id;
  uint32_t stream_id;       // CUPTI stream id
  uint32_t device;
  uint8_t kind;             // GpuRecordKind
  uint8_t cupti_copy_kind;  // CUpti_ActivityMemcpyKind
  uint8_t src_kind;         // CUPTI's memory-kind view, mapped to MemKind
  uint8_t dst_kind;
  uint32_t reserved;
};
static_assert(sizeof(GpuRecord) == 48);
static_assert(std::is_trivially_copyable_v<GpuRecord>);

inline uint64_t um_address(const GpuRecord& g) {
  return uint64_t{g.correlation_id} | (uint64_t{g.cupti_correlation_id} << 32);
}
inline void set_um_address(GpuRecord& g, uint64_t a) {
  g.correlation_id = static_cast<uint32_t>(a);
  g.cupti_correlation_id = static_cast<uint32_t>(a >> 32);
}

const char* to_string(Direction d);
const char* to_string(MemKind k);
const char* to_string(EventKind k);
// A stable key for reports and JSON ("below_threshold", ...); "unknown" for a value this build does not know.
const char* to_string(PassthroughReason r);

}  // namespace cuxfer::trace
