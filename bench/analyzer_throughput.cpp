// How fast the analyzer reads and analyzes a trace, and what an event costs on
// disk (issue bars: >= 5 M events/s on one core, <= 32 bytes per event).
//
//   analyzer_throughput [--events N] [--threads T] [--sites S] [--rounds R]
//                       [--gpu none|joined|late] [--governor] [--allocs K] [--python] [--nvtx]
//                       [--fingerprints] [--managed] [--kernels] [--pid P] [--out FILE] [--keep] [--check]
//
// Writes a trace the way the shim does (blocks of up to 65536 events, zstd)
// with realistic variety — T threads interleaved, S call sites, a mix of sizes,
// directions and memory kinds, timestamps 1-50 us apart — then times, in this
// R rounds (0 with --keep: none) of (--gpu: with CUPTI's GPU records, written as the shim writes
// them; see GpuRecords): read_trace, build_job (no symbolization), and analyze. Each
// round runs in a child process of its own, as `cuxfer report` would run: a
// later round in the same process would find malloc's thresholds raised and
// memory already faulted in by the round before, and measure faster than any
// real use. --keep leaves the trace behind (to profile `cuxfer report` on it).
// --allocs K makes about K of every K + 1 events a device allocation or free
// (no GPU record) instead of a copy.
// --python makes it a Python program's trace: each call site's stack ends in
// Python frames (their code objects in the trace), but one site in 8 is
// native only, as the copies of threads that run no Python (autograd's
// engine, NCCL's) have.
// --nvtx makes its threads push NVTX ranges, as PyTorch's profiler ranges or
// Megatron's do: about one event in 32 is the shim's record of a thread's
// range stack changing (one of 40 stacks up to 3 deep, or none open).
// --governor (with --gpu) has the shim's CUPTI governor turn the copy records
// off and sample them back on, as it does in a copy storm: of every 16,384
// events the first 1,024 with the records on, the rest off (no flag, no
// record); after each change to on, the first 8 copies unflagged yet with
// records (CUPTI's enable raced their hooks: the join's second pass gives
// them their records). The changes are the trace's CuptiGate block.
// --fingerprints follows each copy the shim fingerprints by default (H2D and
// D2H of at least 1 MiB, but no async D2H into pinned memory) with its
// content fingerprint, as the shim writes it: one of 64 contents and 64
// device buffers, so that some uploads repeat what a buffer holds and some
// send back what a download brought (duplicate_uploads, round_trips). Each
// fingerprint is one of the --events.
// --managed makes it a unified-memory program's trace, as the shim writes one
// after the app's first cudaMallocManaged: one event in kManagedEvery is a
// managed allocation (at 8 addresses in turn, each reused by the loop that
// allocates there: one of 4 call sites an address), and after the events
// block that holds it come its buffer's
// kUmRecordsPerAllocation CUPTI unified-memory records (on-demand
// migrations both ways under GPU fault groups, CPU faults; one buffer in 4
// prefetched by the app instead), the notes saying the records are on.
// --pid P gives the process another pid (default 4242) and its events
// another random sequence: several traces of one job (tests/e2e/run_summary_parts.sh).
// --kernels makes it a trace recorded with CUXFER_CUPTI_KERNELS=1: the
// copies alternate between devices 0 and 1 (by thread), each device runs
// kernels back to back (20-200 us, a few us apart, an idle gap of 0.5-3 ms
// after one in 48), some copies under them and some in the gaps, and
// CUPTI's kernel records are written in buffer batches, per device, after
// the events block after the one they overlap (a buffer handed over a cycle
// later), the notes saying the records are on: about one kernel record per
// 4 events.
// Prints one
// machine-readable line per round, the per-phase medians, and whether the
// medians meet the bars; --check makes a missed bar the exit status (1).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "analyzer/symbolize/symbolizer.h"
#include "trace/python_frame.h"
#include "trace/reader.h"
#include "trace/shim_names.h"
#include "trace/writer.h"

using namespace cuxfer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GPU records as the shim writes them with CUPTI on (--gpu): none, or one per
// copy, written after the copy's write cycle; or with the first cycle's
// records held back to the end of the trace, past any window a streamed
// report joins them in (its report is then made holding the events).
enum class GpuRecords { None, Joined, Late };

// --governor: the records' state at event `i` (0-based, by correlation id).
enum class Gate { On, Race, Off };
constexpr uint64_t kGatePeriod = 16384, kGateOn = 1024, kGateRace = 8;
Gate gate_at(uint64_t i) {
  const uint64_t at = i % kGatePeriod;
  if (at >= kGateOn) return Gate::Off;
  return i >= kGatePeriod && at < kGateRace ? Gate::Race : Gate::On;
}
bool governor = false;

// --kernels: each device's kernels, made as the events' clock passes them,
// held a batch (CUPTI's buffer) and written after the next events block.
class KernelStream {
 public:
  static constexpr uint32_t kDevices = 2;
  explicit KernelStream(uint64_t t0) {
    for (uint32_t d = 0; d < kDevices; ++d) next_[d] = t0 + d * 7'000;
  }
  // The kernels that started before `t` join the batch being filled; the
  // batch filled before it is handed back (written now, after the events).
  std::vector<trace::GpuRecord> batch_until(uint64_t t, std::mt19937_64& rng) {
    std::vector<trace::GpuRecord> filled;
    for (uint32_t d = 0; d < kDevices; ++d)
      while (next_[d] < t) {
        trace::GpuRecord k{};
        k.kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
        k.device = d;
        k.stream_id = 7;
        k.cupti_correlation_id = static_cast<uint32_t>(++made_);
        k.start_ns = next_[d];
        k.end_ns = k.start_ns + 20'000 + rng() % 180'000;
        next_[d] = k.end_ns + 1'000 + rng() % 5'000 + (made_ % 48 == 0 ? 500'000 + rng() % 2'500'000 : 0);
        filled.push_back(k);
      }
    std::swap(filled, held_);
    return filled;
  }
  // At the end of the trace: what is still held (CUPTI's last flush).
  std::vector<trace::GpuRecord> rest() { return std::move(held_); }

 private:
  uint64_t next_[kDevices] = {};
  uint64_t made_ = 0;
  std::vector<trace::GpuRecord> held_;
};

// --managed: one event in kManagedEvery a managed allocation, each followed by
// its buffer's unified-memory records.
constexpr uint64_t kManagedEvery = 1024, kUmRecordsPerAllocation = 256;
constexpr uint64_t kManagedBytes = 64ull << 20;

// The unified-memory records of the managed buffer `e` (allocated at its
// exit): its 32 pages of 2 MiB migrated to the GPU four times over (on
// demand under a fault group each 4, or prefetched by the app), 64 back to
// the host, 32 CPU faults.
void um_records_of(const trace::Event& e, std::mt19937_64& rng, std::vector<trace::GpuRecord>& out) {
  const bool prefetched = rng() % 4 == 0;
  auto record = [&](trace::UmCounter counter, uint64_t page, uint64_t start, uint64_t ns, uint64_t value,
                    trace::UmCause cause) {
    trace::GpuRecord g{};
    g.kind = static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
    g.cupti_copy_kind = static_cast<uint8_t>(counter);
    g.start_ns = start;
    g.end_ns = start + ns;
    g.bytes = value;
    g.src_kind = static_cast<uint8_t>(cause);
    trace::set_um_address(g, e.address + (page % 32) * (2ull << 20) + rng() % 4096);
    out.push_back(g);
  };
  const uint64_t t0 = e.t_exit_ns + 1000;
  const auto to_gpu = prefetched ? trace::UmCause::User : trace::UmCause::Coherence;
  for (uint64_t k = 0; k < 128; ++k) {
    const uint64_t start = t0 + k * 50'000;
    record(trace::UmCounter::HtoD, k, start, 40'000 + rng() % 20'000, 2ull << 20, to_gpu);
    if (k % 4 == 0 && !prefetched)
      record(trace::UmCounter::GpuPageFault, k, start, 200'000, 3, trace::UmCause::Unknown);
  }
  const uint64_t t1 = t0 + 128 * 50'000;
  for (uint64_t k = 0; k < 64; ++k)
    record(trace::UmCounter::DtoH, k, t1 + k * 30'000, 25'000, 2ull << 20, trace::UmCause::Coherence);
  for (uint64_t k = 0; out.size() % kUmRecordsPerAllocation != 0; ++k)
    record(trace::UmCounter::CpuPageFault, k, t1 + k * 30'000, 0, 1, trace::UmCause::Unknown);
}

// The records of a cycle's copies as a real trace has them: each copy's DMA
// starts after it entered and ends before a synchronous one returned; the
// writer drains them after the cycle's events, most in the same cycle, some
// in the next one (CUPTI hands a buffer over later), a few in the cycle
// before (a buffer flushed between the copy's DMA and its event's push), a
// few never (dropped), in CUPTI's order, not the events'; and now and then a
// record no copy fits (a copy the hooks never saw).
void gpu_records_of(const std::vector<trace::Event>& cycle, std::mt19937_64& rng,
                    std::vector<trace::GpuRecord>& earlier, std::vector<trace::GpuRecord>& now,
                    std::vector<trace::GpuRecord>& later) {
  for (const trace::Event& e : cycle) {
    if (e.kind != static_cast<uint8_t>(trace::EventKind::Copy)) continue;  // an allocation or free (--allocs)
    if (governor && gate_at(e.correlation_id - 1) == Gate::Off) continue;  // made while the records were off
    const uint64_t dice = rng() % 100;
    if (dice == 0) continue;  // dropped
    trace::GpuRecord g{};
    g.kind = static_cast<uint8_t>(trace::GpuRecordKind::Memcpy);
    const uint64_t cpu = e.t_exit_ns - e.t_enter_ns;
    g.start_ns = e.t_enter_ns + 200 + rng() % (cpu / 2 + 1);
    g.end_ns = g.start_ns + 1000 + e.bytes / 12;
    g.bytes = e.bytes;
    const bool h2d = e.direction == static_cast<uint8_t>(trace::Direction::HtoD);
    g.cupti_copy_kind = h2d ? 1 : 2;
    g.src_kind = e.src_kind;
    g.dst_kind = e.dst_kind;
    g.stream_id = static_cast<uint32_t>(e.stream & 0xff);
    g.cupti_correlation_id = e.correlation_id;
    (dice == 1 ? earlier : dice < 10 ? later : now).push_back(g);
    if (rng() % 500 == 0) {
      g.bytes = 3;  // fits no copy of the mix
      now.push_back(g);
    }
  }
  std::shuffle(now.begin(), now.end(), rng);
}

// One write cycle of the shim with CUPTI on: each thread's events in turn
// (the writer drains ring after ring), then the GPU records CUPTI handed over
// by then. The records one cycle late come before the next cycle's events,
// with those of that cycle that beat their events into the file.
constexpr size_t kCycleEvents = 512;
void write_cycle(trace::TraceWriter& w, std::vector<trace::Event>& cycle, std::mt19937_64& rng, GpuRecords gpu,
                 std::vector<trace::GpuRecord>& held_back, std::vector<trace::GpuRecord>& late) {
  auto write = [&w](const std::vector<trace::GpuRecord>& r) {
    if (!r.empty()) w.write_block(trace::BlockType::GpuRecords, r.data(), r.size() * sizeof(trace::GpuRecord));
  };
  std::stable_sort(cycle.begin(), cycle.end(),
                   [](const trace::Event& a, const trace::Event& b) { return a.thread_id < b.thread_id; });
  std::vector<trace::GpuRecord> earlier, now, later;
  gpu_records_of(cycle, rng, earlier, now, later);
  late.insert(late.end(), earlier.begin(), earlier.end());
  write(late);
  w.write_block(trace::BlockType::Events, cycle.data(), cycle.size() * sizeof(trace::Event));
  if (gpu == GpuRecords::Late && held_back.empty()) held_back = std::move(now);
  else write(now);
  late = std::move(later);
}

constexpr uint32_t kDefaultPid = 4242;

bool write_trace(const std::string& path, uint64_t events, uint32_t threads, uint32_t sites, GpuRecords gpu,
                 uint32_t allocs, bool python, bool nvtx, bool fingerprints, bool managed, bool kernels,
                 uint32_t pid) {
  std::string error;
  auto w = trace::TraceWriter::create(path, 0600, &error);
  if (!w) {
    std::fprintf(stderr, "analyzer_throughput: %s\n", error.c_str());
    return false;
  }
  trace::ProcessInfo p;
  p.pid = pid;
  p.exe = python ? "/usr/bin/python3" : "/opt/app/train";
  if (python) p.argv = {"python3", "/opt/app/train.py"};
  p.stack_depth = 16;
  std::string payload;
  trace::encode(p, payload);
  w->write_block(trace::BlockType::Process, payload);
  payload.clear();
  std::vector<std::string> apis = {"cudaMemcpy", "cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2"};
  const auto nvtx_api = static_cast<uint16_t>(apis.size());
  if (nvtx) apis.push_back(trace::kNvtxApiName);
  const auto fingerprint_api = static_cast<uint16_t>(apis.size());
  if (fingerprints) apis.push_back(trace::kFingerprintApiName);
  const auto managed_api = static_cast<uint16_t>(apis.size());
  if (managed) apis.push_back("cudaMallocManaged");
  trace::encode_strings(apis, payload);
  w->write_block(trace::BlockType::ApiNames, payload);
  std::vector<trace::CallSite> cs;
  for (uint32_t s = 1; s <= sites; ++s) cs.push_back({s, {0x401000ull + s * 64, 0x402000ull + s * 16, 0x7f0000001000ull}});
  // Python: a line of one of 16 functions, called from the script's top level.
  constexpr uint32_t kPyFunctions = 16;
  if (python)
    for (trace::CallSite& site : cs)
      if (site.id % 8 != 0)
        site.frames = {site.frames[0],
                       trace::encode_python_frame(1 + site.id % kPyFunctions, 2 * (site.id % 7), false),
                       trace::encode_python_frame(kPyFunctions + 1, 0, true)};
  payload.clear();
  trace::encode(cs, payload);
  w->write_block(trace::BlockType::CallSites, payload);
  if (python) {
    std::vector<trace::PyCode> codes;
    for (uint32_t c = 1; c <= kPyFunctions; ++c)
      codes.push_back(
          {c, 0x030b, static_cast<int32_t>(10 * c), "/opt/app/model.py", "layer" + std::to_string(c), ""});
    codes.push_back({kPyFunctions + 1, 0x030b, 1, "/opt/app/train.py", "<module>", ""});
    payload.clear();
    trace::encode(codes, payload);
    w->write_block(trace::BlockType::PyCodes, payload);
  }

  // NVTX: a training step's ranges, "step / forward|backward / layerK" and
  // the data loader's: 40 stacks over 20 names.
  constexpr uint32_t kNvtxStacks = 40;
  if (nvtx) {
    std::vector<trace::NvtxName> names = {
        {1, "", "train_step"}, {2, "", "forward"}, {3, "", "backward"}, {4, "", "data_loader"}};
    for (uint32_t k = 0; k < 16; ++k) names.push_back({5 + k, "", "layer" + std::to_string(k)});
    std::vector<trace::CallSite> stacks;
    for (uint32_t id = 1; id <= kNvtxStacks; ++id) {
      if (id <= 2)
        stacks.push_back({id, id == 1 ? std::vector<uint64_t>{1} : std::vector<uint64_t>{4}});
      else
        stacks.push_back({id, {1, 2 + (id % 2), 5 + (id % 16)}});
    }
    payload.clear();
    trace::encode(names, payload);
    w->write_block(trace::BlockType::NvtxNames, payload);
    payload.clear();
    trace::encode(stacks, payload);
    w->write_block(trace::BlockType::NvtxStacks, payload);
  }

  std::mt19937_64 rng(42 + (pid - kDefaultPid));  // the default pid's: 42
  const uint64_t sizes[] = {4, 64, 4096, 65536, 1 << 20, 8 << 20, 64 << 20};
  std::vector<trace::Event> block;
  block.reserve(65536);
  std::vector<trace::GpuRecord> held_back, late;  // Late's first cycle's records; the next cycle's
  uint64_t t = 1'000'000'000;
  std::optional<trace::Event> print;  // the fingerprint of the copy just made, written next
  std::vector<trace::CuptiGateChange> gate_changes;  // --governor
  bool records_on = true;
  std::vector<trace::GpuRecord> um;  // --managed: the records of the block's managed buffers
  uint64_t managed_made = 0;
  KernelStream kernel_stream(t);  // --kernels
  // A full block (a write cycle's with GPU records), or the last, is written;
  // then the unified-memory records of its managed buffers.
  auto flush_block = [&](bool last) {
    bool written = false;
    if (gpu != GpuRecords::None) {
      if (block.size() == kCycleEvents || last) {
        write_cycle(*w, block, rng, gpu, held_back, late);
        block.clear();
        written = true;
      }
    } else if (block.size() == 65536 || last) {
      w->write_block(trace::BlockType::Events, block.data(), block.size() * sizeof(trace::Event));
      block.clear();
      written = true;
    }
    if (written && !um.empty()) {
      w->write_block(trace::BlockType::GpuRecords, um.data(), um.size() * sizeof(trace::GpuRecord));
      um.clear();
    }
    if (written && kernels) {
      const std::vector<trace::GpuRecord> batch = kernel_stream.batch_until(t, rng);
      if (!batch.empty())
        w->write_block(trace::BlockType::GpuRecords, batch.data(), batch.size() * sizeof(trace::GpuRecord));
    }
  };
  for (uint64_t i = 0; i < events; ++i) {
    trace::Event e{};
    if (print) {
      block.push_back(*print);
      print.reset();
      flush_block(i + 1 == events);
      continue;
    }
    if (nvtx && rng() % 32 == 0) {
      // A thread's range stack changed: the shim writes it before the thread's next event.
      e.t_enter_ns = e.t_exit_ns = t;
      e.thread_id = 1000 + static_cast<uint32_t>(rng() % threads);
      e.callsite_id = static_cast<uint32_t>(rng() % (kNvtxStacks + 1));  // 0: no range open
      e.bytes = e.callsite_id == 0 ? 0 : e.callsite_id <= 2 ? 1 : 3;
      e.api = nvtx_api;
      e.kind = static_cast<uint8_t>(trace::EventKind::NvtxRanges);
      block.push_back(e);
      flush_block(i + 1 == events);
      continue;
    }
    t += 1000 + rng() % 49000;
    uint64_t size = sizes[rng() % 7];
    e.t_enter_ns = t;
    e.t_exit_ns = t + 2000 + size / 8 + rng() % 500;
    e.bytes = size;
    e.address = 0x7f1200000000ull + (rng() % 64) * (64ull << 20);
    e.stream = rng() % 3 == 0 ? 0 : 0x5600000000ull + (rng() % 4) * 0x100;
    e.correlation_id = static_cast<uint32_t>(i + 1);
    e.thread_id = 1000 + static_cast<uint32_t>(rng() % threads);
    e.callsite_id = 1 + static_cast<uint32_t>(rng() % sites);
    e.api = static_cast<uint16_t>(rng() % 3);
    e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
    bool h2d = rng() % 2;
    e.direction = static_cast<uint8_t>(h2d ? trace::Direction::HtoD : trace::Direction::DtoH);
    auto host = static_cast<uint8_t>(rng() % 3 ? trace::MemKind::Pageable : trace::MemKind::Pinned);
    e.src_kind = h2d ? host : static_cast<uint8_t>(trace::MemKind::Device);
    e.dst_kind = h2d ? static_cast<uint8_t>(trace::MemKind::Device) : host;
    e.flags = e.api == 0 ? 0 : trace::kFlagAsync;
    if (gpu != GpuRecords::None && (!governor || gate_at(i) == Gate::On)) e.flags |= trace::kFlagGpuExpected;
    if (governor && gpu != GpuRecords::None && (gate_at(i) != Gate::Off) != records_on) {
      records_on = !records_on;  // changed before this call entered
      gate_changes.push_back({records_on ? t : t - 500, records_on,
                              records_on ? trace::GateReason::AsyncCopies : trace::GateReason::SyncOnly});
    }
    e.device = kernels ? static_cast<int8_t>(e.thread_id % KernelStream::kDevices) : 0;
    if (managed && rng() % kManagedEvery == 0) {
      e.kind = static_cast<uint8_t>(trace::EventKind::ManagedAlloc);
      e.direction = e.src_kind = 0;
      e.dst_kind = static_cast<uint8_t>(trace::MemKind::Managed);
      e.flags = 0;
      e.stream = 0;
      e.api = managed_api;
      e.bytes = kManagedBytes;
      // The buffer this address held before was freed long ago: its records
      // all started before this allocation (as a real program's do).
      const uint64_t slot = managed_made++ % 8;
      e.address = 0x7e0000000000ull + slot * kManagedBytes;
      e.callsite_id = 1 + static_cast<uint32_t>(slot % std::min<uint32_t>(sites, 4));
      um_records_of(e, rng, um);
      block.push_back(e);
      flush_block(i + 1 == events);
      continue;
    }
    if (allocs > 0 && rng() % (allocs + 1) != 0) {
      e.kind = static_cast<uint8_t>(rng() % 2 ? trace::EventKind::DeviceAlloc : trace::EventKind::DeviceFree);
      e.direction = e.src_kind = e.dst_kind = 0;
      e.flags = 0;
      e.stream = 0;
    }
    // As the shim's fingerprint_copy() (interpose/call_scope.cpp) chooses.
    const bool async_into_pinned =
        !h2d && (e.flags & trace::kFlagAsync) && host == static_cast<uint8_t>(trace::MemKind::Pinned);
    if (fingerprints && e.kind == static_cast<uint8_t>(trace::EventKind::Copy) && size >= (1u << 20) &&
        !async_into_pinned) {
      trace::Event f{};
      f.t_enter_ns = e.t_exit_ns;
      f.t_exit_ns = e.t_exit_ns + 1000;
      f.address = 0x5eed0000 + rng() % 64;                          // the content's hash
      f.stream = 0x7f3400000000ull + (rng() % 64) * (64ull << 20);  // the device buffer
      f.bytes = e.bytes;
      f.correlation_id = e.correlation_id;
      f.thread_id = e.thread_id;
      f.api = fingerprint_api;
      f.kind = static_cast<uint8_t>(trace::EventKind::Fingerprint);
      f.direction = e.direction;
      print = f;
    }
    block.push_back(e);
    flush_block(i + 1 == events);
  }
  if (kernels) {
    const std::vector<trace::GpuRecord> rest = kernel_stream.rest();
    if (!rest.empty())
      w->write_block(trace::BlockType::GpuRecords, rest.data(), rest.size() * sizeof(trace::GpuRecord));
  }
  if (managed || kernels) {
    std::vector<std::string> notes;
    if (managed) notes.push_back("cupti: unified memory records on");
    if (kernels) notes.push_back("cupti: kernel records on");
    payload.clear();
    trace::encode_strings(notes, payload);
    w->write_block(trace::BlockType::Notes, payload);
  }
  if (gpu != GpuRecords::None) {
    for (auto* records : {&late, &held_back})
      if (!records->empty())
        w->write_block(trace::BlockType::GpuRecords, records->data(), records->size() * sizeof(trace::GpuRecord));
    if (!gate_changes.empty()) {
      payload.clear();
      trace::encode(gate_changes, payload);
      w->write_block(trace::BlockType::CuptiGate, payload);
    }
    trace::Status st;
    st.cupti = trace::CuptiState::Active;
    st.events_recorded = events;
    payload.clear();
    trace::encode(st, payload);
    w->write_block(trace::BlockType::Status, payload);
  }
  w->write_block(trace::BlockType::End, nullptr, 0);
  return !w->failed();
}

// Minor page faults so far: first touches of fresh memory are a large part of
// each phase (docs/benchmarks.md), so every round reports them.
uint64_t minor_faults() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_minflt);
}

struct RoundTimes {
  double read_s = 0, model_s = 0, analyze_s = 0;
  uint64_t read_faults = 0, model_faults = 0, analyze_faults = 0;
  double total() const { return read_s + model_s + analyze_s; }
};

// One read + model + analyze of the trace at `path`; false (with a message on
// stderr) when the trace cannot be read.
bool time_round(const std::string& path, RoundTimes& out) {
  uint64_t f0 = minor_faults();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<trace::Trace> traces(1);
  std::string error;
  if (trace::read_trace(path, traces[0], error) != trace::ReadStatus::Ok) {
    std::fprintf(stderr, "analyzer_throughput: %s\n", error.c_str());
    return false;
  }
  out.read_s = seconds_since(t0);
  uint64_t f1 = minor_faults();
  out.read_faults = f1 - f0;
  auto t1 = std::chrono::steady_clock::now();
  auto symbolizer = symbolize::make_symbolizer(false);
  model::Job job = model::build_job(std::move(traces), *symbolizer);
  out.model_s = seconds_since(t1);
  uint64_t f2 = minor_faults();
  out.model_faults = f2 - f1;
  auto t2 = std::chrono::steady_clock::now();
  analyses::Report report = analyses::analyze(job);
  out.analyze_s = seconds_since(t2);
  out.analyze_faults = minor_faults() - f2;
  return true;
}

// time_round() in a forked child, so that every round starts from a fresh
// process's allocator; the child hands its times back through a pipe.
bool time_round_in_child(const std::string& path, RoundTimes& out) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::close(fds[0]);
    RoundTimes t;
    const bool ok = time_round(path, t) && ::write(fds[1], &t, sizeof t) == static_cast<ssize_t>(sizeof t);
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  ssize_t got = 0;
  do got = ::read(fds[0], &out, sizeof out);
  while (got < 0 && errno == EINTR);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return got == static_cast<ssize_t>(sizeof out) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The bars, for a trace of kBarEvents events.
constexpr uint64_t kBarEvents = 5'000'000;
constexpr double kMinEventsPerSecond = 5e6;
constexpr double kMaxBytesPerEvent = 32;

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = kBarEvents;
  uint32_t threads = 8, sites = 200;
  std::string out = "/tmp/cuxfer-analyzer-throughput.trace";
  uint32_t rounds = 5;
  bool check = false, keep = false;
  GpuRecords gpu = GpuRecords::None;
  uint32_t allocs = 0;
  bool python = false, nvtx = false, fingerprints = false, managed = false, kernels = false;
  uint32_t pid = kDefaultPid;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--check" || a == "--keep" || a == "--python" || a == "--nvtx" || a == "--fingerprints" ||
        a == "--governor" || a == "--managed" || a == "--kernels") {
      (a == "--check"      ? check
       : a == "--keep"     ? keep
       : a == "--nvtx"     ? nvtx
       : a == "--python"   ? python
       : a == "--governor" ? governor
       : a == "--managed"  ? managed
       : a == "--kernels"  ? kernels
                           : fingerprints) = true;
      --i;  // takes no value
      continue;
    }
    if (i + 1 >= argc) a = "";  // a value-taking option without its value: usage
    if (a == "--events") events = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--threads") threads = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--sites") sites = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--rounds") rounds = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--out") out = argv[i + 1];
    else if (a == "--pid") pid = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--allocs") allocs = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--gpu" && std::string(argv[i + 1]) == "none") gpu = GpuRecords::None;
    else if (a == "--gpu" && std::string(argv[i + 1]) == "joined") gpu = GpuRecords::Joined;
    else if (a == "--gpu" && std::string(argv[i + 1]) == "late") gpu = GpuRecords::Late;
    else {
      std::fprintf(stderr,
                   "usage: analyzer_throughput [--events N] [--threads T] [--sites S] [--rounds R] "
                   "[--gpu none|joined|late] [--governor] [--allocs K] [--python] [--nvtx] [--fingerprints] "
                   "[--managed] [--kernels] [--pid P] [--out FILE] [--keep] "
                   "[--check]\n");
      return 2;
    }
  }
  if (events == 0 || threads == 0 || sites == 0 || pid == 0 || (rounds == 0 && !keep)) return 2;
  ::unlink(out.c_str());
  if (!write_trace(out, events, threads, sites, gpu, allocs, python, nvtx, fingerprints, managed, kernels, pid))
    return 1;
  if (rounds == 0) return 0;  // --rounds 0 --keep: the trace only (to measure `cuxfer report` on it)
  struct stat st {};
  ::stat(out.c_str(), &st);

  std::vector<double> read_s, model_s, analyze_s, total_s;
  for (uint32_t r = 1; r <= rounds; ++r) {
    RoundTimes t;
    if (!time_round_in_child(out, t)) return 1;
    std::printf(
        "round=%u read_seconds=%.3f model_seconds=%.3f analyze_seconds=%.3f events_per_second=%.0f "
        "read_faults=%llu model_faults=%llu analyze_faults=%llu\n",
        r, t.read_s, t.model_s, t.analyze_s, static_cast<double>(events) / t.total(),
        static_cast<unsigned long long>(t.read_faults), static_cast<unsigned long long>(t.model_faults),
        static_cast<unsigned long long>(t.analyze_faults));
    read_s.push_back(t.read_s);
    model_s.push_back(t.model_s);
    analyze_s.push_back(t.analyze_s);
    total_s.push_back(t.total());
  }
  if (!keep) ::unlink(out.c_str());
  // Events per second of the median round (by total time), not a sum of
  // per-phase medians: the phases of one round share the machine's state.
  const double eps = static_cast<double>(events) / median(total_s);
  const double bpe = static_cast<double>(st.st_size) / static_cast<double>(events);
  std::printf("phase=read seconds=%.3f\nphase=model seconds=%.3f\nphase=analyze seconds=%.3f\n", median(read_s),
              median(model_s), median(analyze_s));
  std::printf("events=%llu rounds=%u file_bytes=%lld bytes_per_event=%.2f events_per_second=%.0f\n",
              static_cast<unsigned long long>(events), rounds, static_cast<long long>(st.st_size), bpe, eps);
  const bool fast = eps >= kMinEventsPerSecond, small = bpe <= kMaxBytesPerEvent;
  // The bars are for a trace of millions of events; a small one mostly
  // measures fixed costs (process start-up of the round, zstd contexts).
  const char* scale = events < kBarEvents ? " (measured below the bar's 5000000 events)" : "";
  std::printf("bar events_per_second>=%.0f: %s%s\nbar bytes_per_event<=%.0f: %s\n", kMinEventsPerSecond,
              fast ? "PASS" : "FAIL", scale, kMaxBytesPerEvent, small ? "PASS" : "FAIL");
  return check && !(fast && small) ? 1 : 0;
}
