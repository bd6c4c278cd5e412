#include "analyzer/render/perfetto_renderer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace cuxfer::render {
namespace {

using nlohmann::json;

const char* category(trace::EventKind k) {
  switch (k) {
    case trace::EventKind::Copy: return "copy";
    case trace::EventKind::Memset: return "memset";
    case trace::EventKind::DeviceAlloc:
    case trace::EventKind::ManagedAlloc:
    case trace::EventKind::HostAlloc: return "alloc";
    case trace::EventKind::DeviceFree:
    case trace::EventKind::HostFree: return "free";
    case trace::EventKind::HostRegister:
    case trace::EventKind::HostUnregister: return "register";
    case trace::EventKind::Fingerprint: return "fingerprint";
    case trace::EventKind::NvtxRanges: return "nvtx";
  }
  return "other";
}

// CUpti_ActivityMemcpyKind, as the short direction names the report uses.
const char* cupti_copy_kind(unsigned k) {
  switch (k) {
    case 1: return "H2D";
    case 2: return "D2H";
    case 3: return "H2A";
    case 4: return "A2H";
    case 5: return "A2A";
    case 6: return "A2D";
    case 7: return "D2A";
    case 8: return "D2D";
    case 9: return "H2H";
    case 10: return "P2P";
  }
  return "";
}

const char* um_cause(uint8_t cause) {
  switch (static_cast<trace::UmCause>(cause)) {
    case trace::UmCause::User: return "user prefetch";
    case trace::UmCause::Coherence: return "on demand (fault)";
    case trace::UmCause::Prefetch: return "driver prefetch";
    case trace::UmCause::Eviction: return "eviction";
    case trace::UmCause::AccessCounters: return "access counters";
    default: return "unknown";
  }
}

std::string gpu_name(const trace::GpuRecord& r) {
  switch (static_cast<trace::GpuRecordKind>(r.kind)) {
    case trace::GpuRecordKind::Memcpy: {
      const char* dir = cupti_copy_kind(r.cupti_copy_kind);
      return *dir ? fmt::format("memcpy {}", dir) : std::string("memcpy");
    }
    case trace::GpuRecordKind::Memset: return "memset";
    case trace::GpuRecordKind::Kernel: return "kernel";
    case trace::GpuRecordKind::UnifiedMemory:
      switch (static_cast<trace::UmCounter>(r.cupti_copy_kind)) {
        case trace::UmCounter::HtoD: return "UM migrate H2D";
        case trace::UmCounter::DtoH: return "UM migrate D2H";
        case trace::UmCounter::GpuPageFault: return "UM GPU page fault";
        case trace::UmCounter::CpuPageFault: return "UM CPU page fault";
        default: return "UM";
      }
  }
  return "gpu";
}

std::string basename(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Microseconds since `base`, nanoseconds kept as the fraction.
double us(uint64_t ns, uint64_t base) {
  return ns >= base ? static_cast<double>(ns - base) / 1000.0 : -static_cast<double>(base - ns) / 1000.0;
}
double dur_us(uint64_t begin, uint64_t end) {
  return end > begin ? static_cast<double>(end - begin) / 1000.0 : 0.0;
}

json metadata(const char* name, uint32_t pid, uint32_t tid, json args) {
  json m = {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
  return m;
}

// `stack_shown[site]`: the site's whole stack is in the args of its first
// call only (every call of a site has the same one; a copy per event would
// make a large export many times larger).
json call_event(const model::Job& job, const model::Call& c, uint32_t pid, uint64_t base, bool shim,
                std::vector<bool>& stack_shown) {
  const trace::Event& e = *c.event;
  const trace::Trace& t = job.processes[c.process].trace;
  json args = {{"bytes", e.bytes}};
  if (c.kind() == trace::EventKind::Copy || c.kind() == trace::EventKind::Memset) {
    args["direction"] = trace::to_string(c.cls.direction);
    args["host_memory"] = trace::to_string(c.cls.memory);
    args["stream"] = fmt::format("{:#x}", e.stream);
  }
  args["device"] = static_cast<int>(e.device);
  if (c.site != model::kNoSite) {
    const symbolize::Frame& f = job.sites[c.site].frame;
    args["callsite"] = f.display();
    if (!f.function.empty()) args["function"] = f.function;
    if (!f.file.empty()) args["file"] = f.line > 0 ? fmt::format("{}:{}", f.file, f.line) : f.file;
    if (f.has_module()) args["module"] = fmt::format("{}+{:#x}", f.module, f.offset);
    if (c.site < stack_shown.size() && !stack_shown[c.site]) {
      stack_shown[c.site] = true;
      json stack = json::array();  // innermost first, Python and native frames in call order
      for (const auto& s : job.sites[c.site].stack) stack.push_back((s.python ? "py " : "") + s.display());
      args["stack"] = std::move(stack);
    }
  }
  args["result"] = e.result;
  if (c.failed()) args["failed"] = true;
  if (c.async()) args["async"] = true;
  if (c.staged()) args["staged"] = true;
  if (c.registered()) args["registered"] = true;
  if (c.has_gpu_time()) args["gpu_ns"] = c.gpu_ns;
  if (shim) args["shim"] = true;
  return {{"ph", "X"},
          {"name", t.api_name(e.api)},
          {"cat", shim ? std::string("shim") : std::string(category(c.kind()))},
          {"pid", pid},
          {"tid", e.thread_id},
          {"ts", us(e.t_enter_ns, base)},
          {"dur", dur_us(e.t_enter_ns, e.t_exit_ns)},
          {"args", std::move(args)}};
}

// NVTX ranges of process `pi` as slices, one track per thread that pushed
// any: a range spans its copies, from the first one's start to the last one's
// end (the shim learns of a stack when the thread next calls CUDA, not at the
// push or pop themselves).
void nvtx_tracks(const model::Job& job, uint32_t pi, uint32_t pid, uint64_t base, json& events,
                 std::vector<json>& timed) {
  if (job.call_ranges.empty()) return;
  struct Open {
    std::string name;
    uint64_t begin = 0, end = 0;
  };
  std::map<uint32_t, std::vector<Open>> open_of_thread;
  auto close_to = [&](uint32_t tid, std::vector<Open>& open, size_t keep) {
    while (open.size() > keep) {
      const Open& o = open.back();
      timed.push_back({{"ph", "X"}, {"name", o.name}, {"cat", "nvtx"}, {"pid", pid},
                       {"tid", kNvtxTrackTidBase + tid}, {"ts", us(o.begin, base)}, {"dur", dur_us(o.begin, o.end)},
                       {"args", {{"depth", open.size()}}}});
      open.pop_back();
    }
  };
  for (size_t i = 0; i < job.calls.size(); ++i) {
    const model::Call& c = job.calls[i];
    if (c.process != pi) continue;
    const uint32_t tid = c.event->thread_id;
    auto [it, fresh] = open_of_thread.try_emplace(tid);
    std::vector<Open>& open = it->second;
    const uint32_t r = job.range_of(i);
    const std::vector<std::string> none;
    const auto& names = r == model::kNoRange ? none : job.ranges[r].names;
    size_t common = 0;
    while (common < open.size() && common < names.size() && open[common].name == names[common]) ++common;
    close_to(tid, open, common);
    for (size_t d = common; d < names.size(); ++d) open.push_back({names[d], c.event->t_enter_ns, c.event->t_exit_ns});
    for (auto& o : open) o.end = std::max(o.end, c.event->t_exit_ns);
  }
  std::map<uint32_t, bool> named;  // threads with a range
  for (auto& [tid, open] : open_of_thread) {
    if (!open.empty()) named[tid] = true;
    close_to(tid, open, 0);
  }
  for (const auto& e : timed)
    if (e.contains("cat") && e["cat"] == "nvtx" && e["pid"] == pid)
      named[e["tid"].get<uint32_t>() - kNvtxTrackTidBase] = true;
  for (const auto& [tid, _] : named)
    events.push_back(
        metadata("thread_name", pid, kNvtxTrackTidBase + tid, {{"name", fmt::format("NVTX ranges, thread {}", tid)}}));
}

// The governor's CUPTI copy records (shim/record/cupti_governor.h) on one
// track of the process: a slice from each change to the next, named by
// whether the records were on and why, so that a copy without a GPU record
// can be seen to fall in an "off" slice and for what reason. Nothing for a
// process whose records were never governed (on throughout, or no CUPTI).
void gate_track(const model::Job& job, uint32_t pi, uint32_t pid, uint64_t base, json& events,
                std::vector<json>& timed) {
  const trace::Trace& t = job.processes[pi].trace;
  if (t.cupti_gate.empty()) return;
  std::vector<trace::CuptiGateChange> changes = t.cupti_gate;
  std::stable_sort(changes.begin(), changes.end(),
                   [](const auto& a, const auto& b) { return a.t_ns < b.t_ns; });
  // The process's recorded span: its first call to its last call's or GPU record's end.
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  for (const auto& c : job.calls)
    if (c.process == pi) {
      first = std::min(first, c.event->t_enter_ns);
      last = std::max(last, c.event->t_exit_ns);
    }
  for (const auto& r : t.gpu_records) last = std::max(last, r.end_ns);
  first = std::min(first, changes.front().t_ns);
  last = std::max(last, changes.back().t_ns);
  events.push_back(metadata("thread_name", pid, kGateTrackTid, {{"name", "CUPTI copy records (cuxfer's governor)"}}));
  events.push_back(metadata("thread_sort_index", pid, kGateTrackTid, {{"sort_index", kGateTrackTid}}));
  const auto slice = [&](uint64_t from, uint64_t to, bool on, trace::GateReason why) {
    const char* reason = trace::gate_reason_name(why);
    timed.push_back({{"ph", "X"},
                     {"name", fmt::format("records {}: {}", on ? "on" : "off", reason)},
                     {"cat", "cupti_gate"},
                     {"pid", pid},
                     {"tid", kGateTrackTid},
                     {"ts", us(from, base)},
                     {"dur", dur_us(from, to)},
                     {"args", {{"records", on ? "on" : "off"}, {"reason", reason}}}});
  };
  // Before the first change the records were on from the start.
  if (first < changes.front().t_ns) slice(first, changes.front().t_ns, true, trace::GateReason::Start);
  for (size_t i = 0; i < changes.size(); ++i)
    slice(changes[i].t_ns, i + 1 < changes.size() ? changes[i + 1].t_ns : last, changes[i].on, changes[i].reason);
}

}  // namespace

std::string render_perfetto(const model::Job& job) {
  uint64_t base = std::numeric_limits<uint64_t>::max();
  auto see = [&](uint64_t ns) { base = std::min(base, ns); };
  for (const auto& c : job.calls) see(c.event->t_enter_ns);
  for (const auto& c : job.shim_calls) see(c.event->t_enter_ns);
  for (const auto& p : job.processes)
    for (const auto& r : p.trace.gpu_records) see(r.start_ns);
  if (base == std::numeric_limits<uint64_t>::max()) base = 0;

  json events = json::array();
  std::vector<json> timed;
  uint64_t next_flow = 1;
  bool simulated_any = false;

  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) {
    const model::Process& p = job.processes[pi];
    const trace::Trace& t = p.trace;
    // Two traces of one pid (pid reuse, or the same trace given twice) get
    // distinct pids in the output: the process index above 2^31.
    uint32_t pid = p.pid();
    for (uint32_t pj = 0; pj < pi; ++pj)
      if (job.processes[pj].pid() == pid) pid = 0x80000000u + pi;
    const bool simulated = t.has_status && t.status.simulated;
    simulated_any |= simulated;
    std::string pname = t.has_process ? basename(t.process.exe) : basename(t.path);
    pname += fmt::format(" (pid {})", p.pid());
    if (simulated) pname += " [simulated]";
    events.push_back(metadata("process_name", pid, 0, {{"name", pname}}));
    events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pi}}));

    std::map<uint32_t, bool> threads;
    for (const auto& e : t.events) threads[e.thread_id] = true;
    for (const auto& [tid, _] : threads)
      events.push_back(metadata("thread_name", pid, tid,
                                {{"name", tid == p.pid() ? fmt::format("main {}", tid)
                                                         : fmt::format("thread {}", tid)}}));

    // GPU tracks, one per (device, stream), in first-seen order.
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> track_of;
    for (size_t ri = 0; ri < t.gpu_records.size(); ++ri) {
      const trace::GpuRecord& r = t.gpu_records[ri];
      // Unified-memory records belong to no stream: one track per device.
      const bool um = static_cast<trace::GpuRecordKind>(r.kind) == trace::GpuRecordKind::UnifiedMemory;
      auto key = std::make_pair(r.device, um ? UINT32_MAX : r.stream_id);
      auto [it, inserted] = track_of.try_emplace(key, kGpuTrackTidBase + static_cast<uint32_t>(track_of.size()));
      if (inserted) {
        events.push_back(metadata("thread_name", pid, it->second,
                                  {{"name", um ? fmt::format("GPU {} unified memory", r.device)
                                               : fmt::format("GPU {} stream {}", r.device, r.stream_id)}}));
        events.push_back(metadata("thread_sort_index", pid, it->second, {{"sort_index", it->second}}));
      }
      json args = {{"bytes", r.bytes}, {"device", r.device}};
      if (um) {
        args["address"] = fmt::format("{:#x}", trace::um_address(r));
        if (r.cupti_copy_kind == static_cast<uint8_t>(trace::UmCounter::GpuPageFault)) args = {{"fault_groups", r.bytes}, {"device", r.device}, {"address", args["address"]}};
        else if (r.cupti_copy_kind <= static_cast<uint8_t>(trace::UmCounter::DtoH)) args["cause"] = um_cause(r.src_kind);
      } else {
        args["stream_id"] = r.stream_id;
        if (r.correlation_id) args["correlation_id"] = r.correlation_id;
      }
      if (static_cast<trace::GpuRecordKind>(r.kind) == trace::GpuRecordKind::Memcpy) {
        args["src_memory"] = trace::to_string(static_cast<trace::MemKind>(r.src_kind));
        args["dst_memory"] = trace::to_string(static_cast<trace::MemKind>(r.dst_kind));
      }
      timed.push_back({{"ph", "X"},
                       {"name", gpu_name(r)},
                       {"cat", "gpu"},
                       {"pid", pid},
                       {"tid", it->second},
                       {"ts", us(r.start_ns, base)},
                       {"dur", dur_us(r.start_ns, r.end_ns)},
                       {"args", std::move(args)}});
      const uint32_t ci = ri < p.gpu_record_call.size() ? p.gpu_record_call[ri] : model::kNoCall;
      if (ci == model::kNoCall || ci >= job.calls.size()) continue;
      const trace::Event& e = *job.calls[ci].event;
      const uint64_t id = next_flow++;
      timed.push_back({{"ph", "s"}, {"name", "call to GPU"}, {"cat", "flow"}, {"id", id},
                       {"pid", pid}, {"tid", e.thread_id}, {"ts", us(e.t_enter_ns, base)}});
      timed.push_back({{"ph", "f"}, {"bp", "e"}, {"name", "call to GPU"}, {"cat", "flow"}, {"id", id},
                       {"pid", pid}, {"tid", it->second}, {"ts", us(r.start_ns, base)}});
    }
    std::vector<bool> stack_shown(job.sites.size(), false);
    for (const auto& c : job.calls)
      if (c.process == pi) timed.push_back(call_event(job, c, pid, base, false, stack_shown));
    for (const auto& c : job.shim_calls)
      if (c.process == pi && c.kind() != trace::EventKind::NvtxRanges)
        timed.push_back(call_event(job, c, pid, base, true, stack_shown));
    nvtx_tracks(job, pi, pid, base, events, timed);
    gate_track(job, pi, pid, base, events, timed);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const json& a, const json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  for (auto& e : timed) events.push_back(std::move(e));

  json out = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ns"},
              {"otherData",
               {{"generator", "cuxfer export"},
                {"version", CUXFER_VERSION},
                {"simulated", simulated_any},
                {"time_base_monotonic_ns", base}}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";  // names need not be UTF-8
}

}  // namespace cuxfer::render
