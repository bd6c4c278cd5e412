// Builds cuxfer traces with known contents for tests: the same TraceWriter
// the shim uses, fed with hand-made events, so every number in a report made
// from it is known in advance.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "trace/event.h"
#include "trace/format.h"
#include "trace/records.h"
#include "trace/shim_names.h"
#include "trace/writer.h"

namespace cuxfer::testing {

class SyntheticTrace {
 public:
  trace::ProcessInfo process;
  std::vector<std::string> apis;
  std::vector<trace::ModuleInfo> modules;
  std::vector<trace::CallSite> callsites;
  std::vector<trace::PyCode> py_codes;  // code objects the sites' Python frames name
  std::vector<trace::NvtxName> nvtx_names;   // NVTX range names (nvtx_stack)
  std::vector<trace::CallSite> nvtx_stacks;  // NVTX range stacks by name id, outermost first
  std::vector<trace::Event> events;
  std::vector<trace::GpuRecord> gpu_records;
  std::vector<std::string> notes;
  trace::Status status;
  std::optional<trace::CuptiHandover> handover;  // the app's profiler took CUPTI
  std::vector<trace::CuptiGateChange> cupti_gate;  // the shim's governor turned copy records on/off
  bool write_status = true;
  bool write_end = true;  // false: as if the process was killed
  size_t events_per_block = 4096;
  // Where the GPU records lie in the file, as the shim's later cycles put
  // them among the events: record i in a block before the first events
  // block that starts at or past event gpu_after_events[i] (non-decreasing;
  // empty: every record after the events).
  std::vector<size_t> gpu_after_events;
  uint64_t clock_ns = 1'000'000'000;  // next event's enter time

  explicit SyntheticTrace(uint32_t pid = 4242, uint32_t ppid = 1, std::string exe = "/opt/app/train") {
    process.pid = pid;
    process.ppid = ppid;
    process.exe = exe;
    process.argv = {exe, "--epochs", "1"};
    process.hostname = "node0";
    process.trace_name = "train";
    process.cuxfer_version = "test";
    process.start_realtime_ns = 1'700'000'000'000'000'000ull;
    process.start_monotonic_ns = clock_ns;
    process.stack_depth = 16;
    status.simulated = false;
    status.cupti = trace::CuptiState::Unavailable;
    status.cupti_reason = "test: no CUPTI";
  }

  uint16_t api(const std::string& name) {
    for (size_t i = 0; i < apis.size(); ++i)
      if (apis[i] == name) return static_cast<uint16_t>(i);
    apis.push_back(name);
    return static_cast<uint16_t>(apis.size() - 1);
  }

  // A call site whose single frame is `address` (id = table index + 1).
  uint32_t site(uint64_t address) {
    trace::CallSite cs;
    cs.id = static_cast<uint32_t>(callsites.size() + 1);
    cs.frames = {address};
    callsites.push_back(cs);
    return cs.id;
  }

  // A call site of these frames, innermost first (Python frames encoded as
  // trace/python_frame.h says, their codes in py_codes).
  uint32_t site(std::vector<uint64_t> frames) {
    trace::CallSite cs;
    cs.id = static_cast<uint32_t>(callsites.size() + 1);
    cs.frames = std::move(frames);
    callsites.push_back(cs);
    return cs.id;
  }

  // An NVTX range stack of these names (default domain), outermost first:
  // its id (nvtx_ranges). Names are interned.
  uint32_t nvtx_stack(const std::vector<std::string>& names) {
    trace::CallSite stack;
    stack.id = static_cast<uint32_t>(nvtx_stacks.size() + 1);
    for (const std::string& n : names) {
      auto it = std::find_if(nvtx_names.begin(), nvtx_names.end(),
                             [&](const trace::NvtxName& x) { return x.domain.empty() && x.message == n; });
      if (it == nvtx_names.end()) {
        nvtx_names.push_back({static_cast<uint32_t>(nvtx_names.size() + 1), "", n});
        it = nvtx_names.end() - 1;
      }
      stack.frames.push_back(it->id);
    }
    nvtx_stacks.push_back(stack);
    return stack.id;
  }

  // The shim's event saying that thread `thread`'s NVTX range stack is now
  // `stack` (0: no range open), as the shim writes it before the thread's next event.
  trace::Event& nvtx_ranges(uint32_t thread, uint32_t stack) {
    trace::Event& e = add(trace::EventKind::NvtxRanges, trace::kNvtxApiName, trace::Direction::HtoH,
                          trace::MemKind::Unknown, trace::MemKind::Unknown, 0, 0, 0, stack);
    e.thread_id = thread;
    e.t_exit_ns = e.t_enter_ns;
    clock_ns = e.t_enter_ns;
    for (const auto& s : nvtx_stacks)
      if (s.id == stack) e.bytes = s.frames.size();
    return e;
  }

  // The reference is valid until the next event is added.
  trace::Event& add(trace::EventKind kind, const std::string& api_name, trace::Direction dir,
                    trace::MemKind src, trace::MemKind dst, uint64_t bytes, uint64_t cpu_ns,
                    uint8_t flags = 0, uint32_t callsite = 0) {
    trace::Event e{};
    e.t_enter_ns = clock_ns;
    e.t_exit_ns = clock_ns + cpu_ns;
    clock_ns += cpu_ns + 1000;
    e.bytes = bytes;
    e.address = 0x7f0000000000ull;
    e.correlation_id = static_cast<uint32_t>(events.size() + 1);
    e.thread_id = process.pid;
    e.callsite_id = callsite;
    e.api = api(api_name);
    e.kind = static_cast<uint8_t>(kind);
    e.direction = static_cast<uint8_t>(dir);
    e.src_kind = static_cast<uint8_t>(src);
    e.dst_kind = static_cast<uint8_t>(dst);
    e.flags = flags;
    e.device = 0;
    events.push_back(e);
    return events.back();
  }

  // A copy; `host` is the host side's kind (src for H2D, dst for D2H).
  trace::Event& copy(trace::Direction dir, trace::MemKind host, uint64_t bytes, uint64_t cpu_ns,
                     bool async = false, uint32_t callsite = 0) {
    using trace::Direction;
    using trace::MemKind;
    MemKind src = dir == Direction::HtoD ? host : MemKind::Device;
    MemKind dst = dir == Direction::DtoH ? host : MemKind::Device;
    if (dir == Direction::HtoH) src = dst = host;
    return add(trace::EventKind::Copy, async ? "cudaMemcpyAsync" : "cudaMemcpy", dir, src, dst, bytes, cpu_ns,
               async ? trace::kFlagAsync : 0, callsite);
  }

  // A GPU record for event `e` lasting `ns`.
  void gpu(const trace::Event& e, uint64_t ns, uint64_t bytes = 0) {
    trace::GpuRecord r{};
    r.start_ns = e.t_enter_ns;
    r.end_ns = e.t_enter_ns + ns;
    r.bytes = bytes ? bytes : e.bytes;
    r.correlation_id = e.correlation_id;
    r.kind = static_cast<uint8_t>(e.kind == static_cast<uint8_t>(trace::EventKind::Memset)
                                      ? trace::GpuRecordKind::Memset
                                      : trace::GpuRecordKind::Memcpy);
    gpu_records.push_back(r);
  }

  // CUPTI active, and every copy that did not fail given a GPU record joined
  // by time (no correlation id), lasting 1/`share` of its call.
  void time_copies_on_gpu(uint64_t share) {
    status.cupti = trace::CuptiState::Active;
    status.cupti_reason.clear();
    for (auto& e : events)
      if (e.kind == static_cast<uint8_t>(trace::EventKind::Copy) && !(e.flags & trace::kFlagFailed)) {
        e.flags |= trace::kFlagGpuExpected;
        gpu(e, (e.t_exit_ns - e.t_enter_ns) / share);
        gpu_records.back().correlation_id = 0;
      }
  }

  // The blocks write() writes, in order; events in the layout of `version`.
  std::vector<std::pair<trace::BlockType, std::string>> blocks(uint32_t version = trace::kFormatVersion) const {
    std::vector<std::pair<trace::BlockType, std::string>> out;
    auto add_block = [&](trace::BlockType type, std::string payload) { out.emplace_back(type, std::move(payload)); };
    std::string buf;
    trace::encode(process, buf);
    add_block(trace::BlockType::Process, buf);
    buf.clear();
    trace::encode_strings(apis, buf);
    add_block(trace::BlockType::ApiNames, buf);
    buf.clear();
    trace::encode(modules, buf);
    add_block(trace::BlockType::Modules, buf);
    buf.clear();
    trace::encode(callsites, buf);
    add_block(trace::BlockType::CallSites, buf);
    if (!py_codes.empty()) {
      buf.clear();
      trace::encode(py_codes, buf);
      add_block(trace::BlockType::PyCodes, buf);
    }
    if (!nvtx_names.empty()) {
      buf.clear();
      trace::encode(nvtx_names, buf);
      add_block(trace::BlockType::NvtxNames, buf);
      buf.clear();
      trace::encode(nvtx_stacks, buf);
      add_block(trace::BlockType::NvtxStacks, buf);
    }
    size_t records_written = 0;
    // The records due before events block `next` (all of them: SIZE_MAX).
    auto write_records_before = [&](size_t next) {
      auto due = [&](size_t r) {
        return next == SIZE_MAX || (r < gpu_after_events.size() && gpu_after_events[r] <= next);
      };
      size_t end = records_written;
      while (end < gpu_records.size() && due(end)) ++end;
      if (end == records_written) return;
      add_block(trace::BlockType::GpuRecords,
                std::string(reinterpret_cast<const char*>(gpu_records.data() + records_written),
                            (end - records_written) * sizeof(trace::GpuRecord)));
      records_written = end;
    };
    for (size_t i = 0; i < events.size(); i += events_per_block) {
      write_records_before(i);
      size_t n = std::min(events_per_block, events.size() - i);
      std::string payload(reinterpret_cast<const char*>(events.data() + i), n * sizeof(trace::Event));
      // Version 1: bytes 60-63 were one int32 result (no passthrough reason).
      if (version < 2)
        for (size_t k = 0; k < n; ++k) {
          const int32_t result = events[i + k].result;
          std::memcpy(&payload[k * sizeof(trace::Event) + 60], &result, sizeof result);
        }
      add_block(trace::BlockType::Events, std::move(payload));
    }
    write_records_before(SIZE_MAX);
    if (!notes.empty()) {
      buf.clear();
      trace::encode_strings(notes, buf);
      add_block(trace::BlockType::Notes, buf);
    }
    if (handover) {
      buf.clear();
      trace::encode(*handover, buf);
      add_block(trace::BlockType::CuptiHandover, buf);
    }
    if (!cupti_gate.empty()) {
      buf.clear();
      trace::encode(cupti_gate, buf);
      add_block(trace::BlockType::CuptiGate, buf);
    }
    if (write_status) {
      trace::Status s = status;
      s.events_recorded = events.size();
      s.gpu_records_recorded = gpu_records.size();
      buf.clear();
      trace::encode(s, buf);
      add_block(trace::BlockType::Status, buf);
    }
    if (write_end) add_block(trace::BlockType::End, "");
    return out;
  }

  // Writes the trace; false (and the error in `error`) on failure.
  bool write(const std::string& path, std::string* error = nullptr) const {
    if (format_version != trace::kFormatVersion) return write_raw(path, error);
    auto w = trace::TraceWriter::create(path, 0644, error);
    if (!w) return false;
    for (const auto& [type, payload] : blocks()) w->write_block(type, payload.data(), payload.size());
    if (w->failed() && error) *error = w->error();
    return !w->failed();
  }

  // Format version of the file write() makes: an older one is written as its
  // writer wrote it (uncompressed blocks, that version's event layout).
  uint32_t format_version = trace::kFormatVersion;

 private:
  bool write_raw(const std::string& path, std::string* error) const {
    std::string out;
    trace::FileHeader fh{};
    std::copy(std::begin(trace::kFileMagic), std::end(trace::kFileMagic), fh.magic);
    fh.version = format_version;
    fh.header_bytes = sizeof fh;
    out.append(reinterpret_cast<const char*>(&fh), sizeof fh);
    for (const auto& [type, payload] : blocks(format_version)) {
      trace::BlockHeader h{};
      h.magic = trace::kBlockMagic;
      h.type = static_cast<uint16_t>(type);
      h.codec = static_cast<uint16_t>(trace::Codec::Raw);
      h.raw_size = h.stored_size = static_cast<uint32_t>(payload.size());
      h.header_check = trace::block_header_check(h);
      out.append(reinterpret_cast<const char*>(&h), sizeof h);
      out += payload;
    }
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!f && error) *error = path + ": cannot write";
    return static_cast<bool>(f);
  }
};

}  // namespace cuxfer::testing
