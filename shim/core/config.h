// Configuration of the shim, read once from CUXFER_* environment variables
// (docs/cli.md lists them). Bad values are reported once and replaced by the
// default; unknown CUXFER_* names are reported once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cuxfer::shim {

// Auto: CUPTI's copy records governed by cost (record/cupti_governor.h); On: always on; Off: no CUPTI.
enum class CuptiMode { Auto, On, Off };

// None: the whole run is recorded. ProfilerApi: only between the program's
// cudaProfilerStart/cuProfilerStart and the next stop (record/capture_range.h).
enum class CaptureRange { None, ProfilerApi };

// Fast: the .eh_frame rule walk (unwind/fast_unwind.h), libunwind where it
// cannot vouch for a stack; Libunwind: libunwind (or glibc) only; Verify: both
// on every capture, the differences counted in the trace's notes (tests).
enum class Unwinder { Fast, Libunwind, Verify };

struct Config {
  bool enabled = true;            // CUXFER_DISABLE=1, or AT_SECURE, makes the shim inert
  std::string output_dir = ".";   // CUXFER_OUTPUT_DIR
  std::string trace_name;         // CUXFER_TRACE_NAME (default: executable basename)
  uint32_t stack_depth = 16;      // CUXFER_STACK_DEPTH, 0 = immediate call site only
  // CUXFER_PYTHON_STACKS=0: no Python frames in call stacks (shim/python/).
  // They are read only while stacks are captured (CUXFER_STACK_DEPTH > 0).
  bool python_stacks = true;
  // CUXFER_MEMSET_STACKS=1: memsets' sites are whole stacks too, not just
  // the calling function (record/site_capture.h says why they are not).
  bool memset_stacks = false;
  // CUXFER_PYTHON_NATIVE_DEPTH: native frames kept below a thread's Python
  // frames (at most stack_depth). The Python line names the site; the native
  // frames under it are the framework's (libtorch's dispatch, CuPy's
  // bindings), and with the caches cold each frame walked costs a few lines.
  uint32_t python_native_depth = 8;
  // CUXFER_PREFETCH_TRAIL=1: a cold stack capture first prefetches what the
  // last cold capture from the same call site read (core/prefetch_trail.h).
  // Off by default: once the walk started at the hook's caller, the H200's
  // training loop took 0.2-0.5 us a copy less without it (docs/benchmarks.md,
  // eighteenth session).
  bool prefetch_trail = false;
  Unwinder unwinder = Unwinder::Fast;  // CUXFER_UNWINDER=fast|libunwind|verify
  CuptiMode cupti = CuptiMode::Auto;  // CUXFER_CUPTI=auto|on|off
  CaptureRange capture_range = CaptureRange::None;  // CUXFER_CAPTURE_RANGE=none|cudaProfilerApi
  std::string cupti_library;      // CUXFER_CUPTI_LIB: explicit libcupti path
  // CUXFER_CUPTI_SEARCH_PATH: ':'-separated folders to look for libcupti.so.13
  // in, after the loaded runtime's (record/cupti_locate.h). The Python
  // launcher sets it to the nvidia wheels' folders on its sys.path.
  std::string cupti_search_path;
  // CUDA_HOME, CUDA_PATH: toolkit roots searched before /usr/local/cuda.
  std::string cuda_home, cuda_path;
  // CUXFER_CUPTI_KERNELS=1: also record kernels (CUPTI concurrent-kernel
  // activity) for the copy/compute overlap analysis. Off by default: it adds
  // CUPTI work to every kernel launch, which kernel-heavy programs would feel.
  bool cupti_kernels = false;
  // CUXFER_CUPTI_UM=0 turns off CUPTI's unified-memory records (migrations
  // and page faults of managed memory). They are enabled only once the app
  // allocates managed memory, so programs without it pay nothing.
  bool cupti_unified_memory = true;
  // CUXFER_CUPTI_DETACH=0 keeps CUPTI attached while the governor has its copy
  // records off (record/cupti_governor.h: attached and idle it still costs
  // each copy call about 0.5 us; detached, nothing).
  bool cupti_detach = true;
  // CUXFER_NVTX=0: NVTX range pushes and pops are not recorded (the shim still
  // answers NVTX's injection call, and passes everything to a chained tool).
  bool nvtx = true;
  // CUXFER_NVTX_NEXT: another NVTX tool's injection library, which the shim
  // loads and passes every NVTX call on to (`cuxfer record` moves an
  // NVTX_INJECTION64_PATH it finds here).
  std::string nvtx_next;
  // CUXFER_FINGERPRINT=0 turns off the sampled content fingerprints of host
  // <-> device copies of at least CUXFER_FINGERPRINT_MIN bytes (duplicate and
  // round-trip findings). A fingerprint reads 33 words of the host buffer.
  bool fingerprint = true;
  // CUXFER_TSC=0 stamps events with CLOCK_MONOTONIC where the time-stamp
  // counter could stamp them (core/event_clock.h): a check, or a machine whose
  // counter the kernel trusts wrongly.
  bool tsc_stamps = true;
  // CUXFER_FINISH_ON_SIGNAL=0 leaves SIGTERM, SIGINT, SIGHUP and SIGPIPE alone: a
  // process they end (at their default action) loses what the writer had not
  // written and its End block, as without the shim's handler
  // (interpose/signal_hooks.cpp).
  bool finish_on_signal = true;
  uint64_t fingerprint_min = 1u << 20;
  std::string manifest;           // CUXFER_MANIFEST: launcher's list of written traces
  // CUXFER_RUN_ID: the `cuxfer record` run this process belongs to, written
  // as the trace's run note so that the analyzer can tell runs apart.
  std::string run_id;
  // CUXFER_BUFFER_EVENTS: per-thread ring capacity (4 MiB of address space;
  // pages are touched only as a thread records).
  uint32_t buffer_events = 65536;
  uint32_t flush_ms = 50;         // CUXFER_FLUSH_MS: writer period (bounds loss on SIGKILL)
  // CUXFER_CUPTI_FLUSH_MS: how often the writer asks CUPTI for the records of
  // partly filled buffers (0: never; CUPTI hands over full ones, and the end
  // of the trace everything). A flush holds CUPTI's record lock for ~2 ms on
  // an H100: an app copy finishing meanwhile waits for it.
  uint32_t cupti_flush_ms = 500;
  // CUXFER_POOL_GROW=early|staged: the staging pool grows to its whole budget
  // from the first copy that could need it, or (default) the first one staged.
  bool pool_grow_early = false;
  bool launched = false;          // CUXFER_LAUNCHER=1: `cuxfer record` prints the summary
  std::string log_level = "warn"; // CUXFER_LOG_LEVEL=off|error|warn|info|debug
  // Pinned rewrite (CUXFER_REWRITE=pin): pageable copies through pinned staging.
  bool rewrite_pin = false;
  // CUXFER_POLICY: a policy file (docs/policy.md) naming the path per call or
  // allocation site. With a policy alone only the sites it names are
  // rewritten; with CUXFER_REWRITE=pin too, it overrides the defaults there.
  std::string policy_path;
  // The rewrite's machinery (staging pool, registrations) is needed.
  bool rewrite_any() const { return rewrite_pin || !policy_path.empty(); }
  // CUXFER_PINNED_BUDGET: bytes of pinned memory the rewrite may hold in all
  // (staging pool plus registrations). 0 = automatic: an eighth of physical
  // memory, at most 4 GiB (resolved by pinned_budget_bytes()).
  uint64_t pinned_budget = 0;
  // CUXFER_REGISTER=auto|off: register reused host buffers in place (auto), or
  // only stage. CUXFER_REGISTER_MIN: smallest host allocation that may be
  // registered (smaller ones are never tracked).
  bool register_in_place = true;
  // CUXFER_REGISTER=inline: the registration is made inside the copy that
  // asked for it (auto: on the background registrar's thread while that copy
  // is staged; rewrite/background_registrar.h).
  bool register_inline = false;
  uint64_t register_min = 1u << 20;
  // Smallest copy staged, per direction (CUXFER_STAGE_MIN sets both). Measured
  // on the H200 (docs/benchmarks.md): staging a D2H wins from 256 KiB, an H2D
  // only from several MiB, where the host memcpy into the staging buffer can
  // be hidden behind the DMA of the previous chunk.
  uint64_t stage_min_h2d = 8u << 20;
  uint64_t stage_min_d2h = 256u << 10;
  uint32_t stage_threads = 0;             // CUXFER_STAGE_THREADS: host memcpy threads (0 = automatic)
  std::vector<std::string> problems;  // one line per bad or unknown variable
};

// Parses `environ`-style strings; pure, unit-tested.
Config parse_config(char** env, bool secure_execution);

// The pinned budget in bytes: the configured one, or the automatic default.
uint64_t pinned_budget_bytes(const Config& c);

// The process-wide configuration (parsed on first use).
const Config& config();

constexpr uint32_t kMaxStackDepth = 32;

}  // namespace cuxfer::shim
