#include "analyzer/analyses/summary.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "analyzer/analyses/overlap.h"
#include "analyzer/analyses/duplicates.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::analyses {

using nlohmann::json;

namespace {

// Equal copies once, with their count: the findings only add them up
// (findings.cpp multiplies by the count), so this is exact.
template <typename T, typename Key>
void compact(std::vector<T>& v, std::vector<uint64_t>& counts, Key key) {
  std::vector<std::pair<T, uint64_t>> all;
  all.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) all.push_back({v[i], counts.empty() ? 1 : counts[i]});
  std::sort(all.begin(), all.end(), [&](const auto& a, const auto& b) { return key(a.first) < key(b.first); });
  v.clear();
  counts.clear();
  for (const auto& [c, n] : all) {
    if (!v.empty() && key(v.back()) == key(c)) {
      counts.back() += n;
    } else {
      v.push_back(c);
      counts.push_back(n);
    }
  }
  v.shrink_to_fit();
  counts.shrink_to_fit();
}
auto async_key(const AsyncPageableCopy& c) { return std::make_tuple(c.site_id, c.dir, c.bytes, c.cpu_ns); }
auto large_key(const LargePageableCopy& c) { return std::make_tuple(c.site_id, c.dir, c.gpu, c.bytes, c.time); }

// Numbers as the summary's writer wrote them, checked: a damaged or
// hand-made summary's -1, 2.9, 1e30 or 4294967297 is refused as damaged
// (nlohmann's get<> would wrap, truncate or, for 1e30, be undefined), never
// read as another number.
uint64_t u64(const json& v) {
  if (!v.is_number_unsigned()) throw std::out_of_range("a count that is not a whole number at least 0");
  return v.get<uint64_t>();
}
uint32_t u32(const json& v) {
  const uint64_t x = u64(v);
  if (x > UINT32_MAX) throw std::out_of_range("a number too large for its field");
  return static_cast<uint32_t>(x);
}
uint8_t u8(const json& v) {
  const uint64_t x = u64(v);
  if (x > UINT8_MAX) throw std::out_of_range("a number too large for its field");
  return static_cast<uint8_t>(x);
}
int i32(const json& v) {
  if (!v.is_number_integer()) throw std::out_of_range("a number that is not a whole number");
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) throw std::out_of_range("a number too large for its field");
  return static_cast<int>(x);
}
template <size_t N>
std::array<uint64_t, N> u64_array(const json& v) {
  if (!v.is_array() || v.size() != N) throw std::out_of_range("a row of the wrong length");
  std::array<uint64_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = u64(v[i]);
  return out;
}

// --- JSON of the parts (arrays where a part is a row of numbers: a summary
// of a thousand processes stays small) ---

json frame_json(const symbolize::Frame& f) {
  return json::array({f.address, f.module, f.offset, f.function, f.file, f.line, f.python});
}
symbolize::Frame frame_of(const json& j) {
  symbolize::Frame f;
  f.address = u64(j.at(0));
  f.module = j.at(1).get<std::string>();
  f.offset = u64(j.at(2));
  f.function = j.at(3).get<std::string>();
  f.file = j.at(4).get<std::string>();
  f.line = i32(j.at(5));
  f.python = j.at(6).get<bool>();
  return f;
}

json totals_json(const Totals& t) { return json::array({t.calls, t.bytes, t.cpu_blocked_ns, t.failed_calls}); }
Totals totals_of(const json& j) {
  return {u64(j.at(0)), u64(j.at(1)), u64(j.at(2)), u64(j.at(3))};
}
json alloc_json(const AllocTotals& t) { return json::array({t.calls, t.bytes, t.cpu_blocked_ns, t.frees}); }
AllocTotals alloc_of(const json& j) {
  return {u64(j.at(0)), u64(j.at(1)), u64(j.at(2)), u64(j.at(3))};
}

json optional_json(const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); }
std::optional<uint64_t> optional_of(const json& j) {
  if (j.is_null()) return std::nullopt;
  return u64(j);
}

// Modules as rows [base, low, high, path, build id].
json modules_json(const std::vector<trace::ModuleInfo>& modules) {
  json out = json::array();
  for (const auto& m : modules) out.push_back(json::array({m.base, m.low, m.high, m.path, m.build_id}));
  return out;
}
std::vector<trace::ModuleInfo> modules_of(const json& j) {
  std::vector<trace::ModuleInfo> out;
  for (const json& m : j)
    out.push_back({u64(m.at(0)), u64(m.at(1)), u64(m.at(2)),
                   m.at(3).get<std::string>(), m.at(4).get<std::string>()});
  return out;
}

json trace_json(const trace::Trace& t) {
  const trace::ProcessInfo& p = t.process;
  const trace::Status& s = t.status;
  return {
      {"path", t.path},
      {"format_version", t.format_version},
      {"has_process", t.has_process},
      {"process",
       {{"pid", p.pid}, {"ppid", p.ppid}, {"start_realtime_ns", p.start_realtime_ns},
        {"start_monotonic_ns", p.start_monotonic_ns}, {"exe", p.exe}, {"argv", p.argv}, {"hostname", p.hostname},
        {"trace_name", p.trace_name}, {"cuxfer_version", p.cuxfer_version}, {"stack_depth", p.stack_depth}}},
      {"api_names", t.api_names},
      {"notes", t.notes},
      {"has_status", t.has_status},
      {"status",
       {{"simulated", s.simulated}, {"cupti", static_cast<int>(s.cupti)}, {"cupti_reason", s.cupti_reason},
        {"events_recorded", s.events_recorded}, {"events_dropped", s.events_dropped},
        {"gpu_records_recorded", s.gpu_records_recorded}, {"gpu_records_dropped", s.gpu_records_dropped},
        {"callsites_dropped", s.callsites_dropped}}},
      {"has_modes", t.has_modes},
      {"modes",
       {{"rewrite_pin", t.modes.rewrite_pin}, {"policy", t.modes.policy},
        {"register_in_place", t.modes.register_in_place}, {"python_stacks", t.modes.python_stacks},
        {"policy_path", t.modes.policy_path}}},
      {"has_cupti_handover", t.has_cupti_handover},
      {"cupti_handover", {{"t_ns", t.cupti_handover.t_ns}, {"reason", t.cupti_handover.reason}}},
      {"modules", modules_json(t.modules)},
      {"complete", t.complete},
      {"cut_reason", t.cut_reason},
      {"blocks_read", t.blocks_read},
  };
}

trace::Trace trace_of(const json& j) {
  trace::Trace t;
  t.path = j.at("path").get<std::string>();
  t.format_version = u32(j.at("format_version"));
  t.has_process = j.at("has_process").get<bool>();
  const json& p = j.at("process");
  t.process.pid = u32(p.at("pid"));
  t.process.ppid = u32(p.at("ppid"));
  t.process.start_realtime_ns = u64(p.at("start_realtime_ns"));
  t.process.start_monotonic_ns = u64(p.at("start_monotonic_ns"));
  t.process.exe = p.at("exe").get<std::string>();
  t.process.argv = p.at("argv").get<std::vector<std::string>>();
  t.process.hostname = p.at("hostname").get<std::string>();
  t.process.trace_name = p.at("trace_name").get<std::string>();
  t.process.cuxfer_version = p.at("cuxfer_version").get<std::string>();
  t.process.stack_depth = u32(p.at("stack_depth"));
  t.api_names = j.at("api_names").get<std::vector<std::string>>();
  t.notes = j.at("notes").get<std::vector<std::string>>();
  t.has_status = j.at("has_status").get<bool>();
  const json& s = j.at("status");
  t.status.simulated = s.at("simulated").get<bool>();
  t.status.cupti = static_cast<trace::CuptiState>(i32(s.at("cupti")));
  t.status.cupti_reason = s.at("cupti_reason").get<std::string>();
  t.status.events_recorded = u64(s.at("events_recorded"));
  t.status.events_dropped = u64(s.at("events_dropped"));
  t.status.gpu_records_recorded = u64(s.at("gpu_records_recorded"));
  t.status.gpu_records_dropped = u64(s.at("gpu_records_dropped"));
  t.status.callsites_dropped = u64(s.at("callsites_dropped"));
  t.has_modes = j.at("has_modes").get<bool>();
  const json& m = j.at("modes");
  t.modes.rewrite_pin = m.at("rewrite_pin").get<bool>();
  t.modes.policy = m.at("policy").get<bool>();
  t.modes.register_in_place = m.at("register_in_place").get<bool>();
  t.modes.python_stacks = m.at("python_stacks").get<bool>();
  t.modes.policy_path = m.at("policy_path").get<std::string>();
  t.has_cupti_handover = j.at("has_cupti_handover").get<bool>();
  t.cupti_handover.t_ns = u64(j.at("cupti_handover").at("t_ns"));
  t.cupti_handover.reason = j.at("cupti_handover").at("reason").get<std::string>();
  // Summaries written before the modules were kept have none (ProcessRecord::site_modules).
  if (j.contains("modules")) t.modules = modules_of(j.at("modules"));
  t.complete = j.at("complete").get<bool>();
  t.cut_reason = j.at("cut_reason").get<std::string>();
  t.blocks_read = u64(j.at("blocks_read"));
  return t;
}

json model_json(const model::Process& p) {
  const model::GateStats& g = p.gate;
  return {
      {"gpu_timing", p.gpu_timing},
      {"gpu_records_unmatched", p.gpu_records_unmatched},
      {"events_without_gpu", p.events_without_gpu},
      {"gpu_records_joined_by_time", p.gpu_records_joined_by_time},
      {"events_read", p.events_read},
      {"gpu_records_read", p.gpu_records_read},
      {"gate", json::array({g.governed, g.changes, g.samples, g.on_share, g.calls, g.timed, g.untimed_sync,
                            g.untimed_async, g.untimed_repeats})},
  };
}

void model_of(const json& j, model::Process& p) {
  p.gpu_timing = j.at("gpu_timing").get<bool>();
  p.gpu_records_unmatched = u64(j.at("gpu_records_unmatched"));
  p.events_without_gpu = u64(j.at("events_without_gpu"));
  p.gpu_records_joined_by_time = u64(j.at("gpu_records_joined_by_time"));
  p.events_read = u64(j.at("events_read"));
  p.gpu_records_read = u64(j.at("gpu_records_read"));
  const json& g = j.at("gate");
  p.gate.governed = g.at(0).get<bool>();
  p.gate.changes = u32(g.at(1));
  p.gate.samples = u32(g.at(2));
  p.gate.on_share = g.at(3).get<double>();
  if (!g.at(3).is_number() || !(p.gate.on_share >= 0.0 && p.gate.on_share <= 1.0))
    throw std::out_of_range("a share outside 0..1");
  p.gate.calls = u64(g.at(4));
  p.gate.timed = u64(g.at(5));
  p.gate.untimed_sync = u64(g.at(6));
  p.gate.untimed_async = u64(g.at(7));
  p.gate.untimed_repeats = u64(g.at(8));
}

// A call site's tally: [used, calls, bytes, cpu, max cpu, failed, gpu,
// classes seen, [[class, bytes]...], [[class, calls]...], staged calls, staged bytes].
json site_tally_json(const SiteTally& s) {
  json class_bytes = json::array(), class_calls = json::array();
  for (unsigned k = 0; k < kClasses; ++k) {
    if (s.class_bytes[k]) class_bytes.push_back({k, s.class_bytes[k]});
    if (s.class_calls[k]) class_calls.push_back({k, s.class_calls[k]});
  }
  const CallSiteTotals& o = s.out;
  return {s.used, o.calls, o.bytes, o.cpu_blocked_ns, o.max_cpu_ns, o.failed_calls, optional_json(o.gpu_ns),
          s.classes_seen, class_bytes, class_calls, s.staged_calls, s.staged_bytes};
}

void site_tally_of(const json& s, SiteTally& x) {
  x.used = s.at(0).get<bool>();
  x.out.calls = u64(s.at(1));
  x.out.bytes = u64(s.at(2));
  x.out.cpu_blocked_ns = u64(s.at(3));
  x.out.max_cpu_ns = u64(s.at(4));
  x.out.failed_calls = u64(s.at(5));
  x.out.gpu_ns = optional_of(s.at(6));
  x.classes_seen = u64(s.at(7));
  auto per_class = [](const json& list, std::array<uint64_t, kClasses>& out) {
    for (const json& kv : list) {
      const unsigned k = u32(kv.at(0));
      if (k >= kClasses) throw std::out_of_range("class out of range");
      out[k] = u64(kv.at(1));
    }
  };
  per_class(s.at(8), x.class_bytes);
  per_class(s.at(9), x.class_calls);
  x.staged_calls = u64(s.at(10));
  x.staged_bytes = u64(s.at(11));
}

json process_tally_json(const ProcessTally& p) {
  json apis = json::array();
  for (size_t i = 0; i < p.apis.size(); ++i) {
    const ApiTotals& a = p.apis[i];
    if (a.calls || a.failed_calls) apis.push_back({i, a.calls, a.bytes, a.cpu_blocked_ns, a.failed_calls});
  }
  json reasons = json::array();
  for (size_t r = 0; r < kReasonSlots; ++r)
    for (size_t d = 0; d < 2; ++d)
      if (p.passthrough_reasons[r][d].calls)
        reasons.push_back({r, d, p.passthrough_reasons[r][d].calls, p.passthrough_reasons[r][d].bytes});
  json classes = json::array();
  for (unsigned k = 0; k < kClasses; ++k)
    if (p.classes[k].calls) classes.push_back({k, p.classes[k].calls, p.classes[k].bytes, p.classes[k].cpu_blocked_ns});
  return {
      {"copies", json::array({p.has_copies, p.copies, p.bytes, p.cpu_blocked_ns, p.failed_copies})},
      {"rewrite",
       json::array({p.rewrote, p.staged_calls, p.staged_bytes, p.registered_calls, p.registered_bytes,
                    p.passthrough_pageable_calls, p.passthrough_pageable_bytes, p.zero_copy_calls,
                    p.zero_copy_bytes, p.staged_cpu_ns, p.staged_async_calls, p.staged_sync_bytes[0],
                    p.staged_sync_bytes[1], p.staged_sync_calls[0], p.staged_sync_calls[1]})},
      {"shim", json::array({p.shim_rewrite, p.registrations, p.registration_bytes, p.registration_cost_ns,
                            p.registrations_refused, p.pool_allocations, p.pool_bytes, p.pinning_cost_ns,
                            p.zero_copy_allocations, p.zero_copy_allocation_bytes})},
      {"passthrough_reasons", reasons},
      {"last_end_realtime_ns", p.last_end_realtime_ns},
      {"apis", apis},
      {"classes", classes},
      {"pageable_gpu", json::array({p.pageable_bytes, p.has_gpu, p.gpu_ns})},
      {"no_site", site_tally_json(p.no_site)},
      {"python_lines", json::array({p.python_site_copies, p.copies_without_python, p.bytes_without_python,
                                    p.threads_without_python})},
  };
}

void process_tally_of(const json& j, ProcessTally& p, size_t api_count) {
  site_tally_of(j.at("no_site"), p.no_site);
  const json& c = j.at("copies");
  p.has_copies = c.at(0).get<bool>();
  p.copies = u64(c.at(1));
  p.bytes = u64(c.at(2));
  p.cpu_blocked_ns = u64(c.at(3));
  p.failed_copies = u64(c.at(4));
  const json& r = j.at("rewrite");
  p.rewrote = r.at(0).get<bool>();
  p.staged_calls = u64(r.at(1));
  p.staged_bytes = u64(r.at(2));
  p.registered_calls = u64(r.at(3));
  p.registered_bytes = u64(r.at(4));
  p.passthrough_pageable_calls = u64(r.at(5));
  p.passthrough_pageable_bytes = u64(r.at(6));
  p.zero_copy_calls = u64(r.at(7));
  p.zero_copy_bytes = u64(r.at(8));
  p.staged_cpu_ns = u64(r.at(9));
  p.staged_async_calls = u64(r.at(10));
  for (int dir = 0; dir < 2; ++dir) {
    p.staged_sync_bytes[dir] = u64(r.at(11 + dir));
    p.staged_sync_calls[dir] = u64(r.at(13 + dir));
  }
  const json& s = j.at("shim");
  p.shim_rewrite = s.at(0).get<bool>();
  p.registrations = u64(s.at(1));
  p.registration_bytes = u64(s.at(2));
  p.registration_cost_ns = u64(s.at(3));
  p.registrations_refused = u64(s.at(4));
  p.pool_allocations = u64(s.at(5));
  p.pool_bytes = u64(s.at(6));
  p.pinning_cost_ns = u64(s.at(7));
  p.zero_copy_allocations = u64(s.at(8));
  p.zero_copy_allocation_bytes = u64(s.at(9));
  for (const json& x : j.at("passthrough_reasons")) {
    const size_t slot = u64(x.at(0)), dir = u64(x.at(1));
    if (slot >= kReasonSlots || dir >= 2) throw std::out_of_range("passthrough reason out of range");
    p.passthrough_reasons[slot][dir] = {u64(x.at(2)), u64(x.at(3))};
  }
  p.last_end_realtime_ns = u64(j.at("last_end_realtime_ns"));
  p.apis.assign(api_count, {});
  for (const json& a : j.at("apis")) {
    const size_t i = u64(a.at(0));
    if (i >= 65536) throw std::out_of_range("API index out of range");
    if (i >= p.apis.size()) p.apis.resize(i + 1);
    p.apis[i] = {"", u64(a.at(1)), u64(a.at(2)), u64(a.at(3)),
                 u64(a.at(4))};
  }
  for (const json& k : j.at("classes")) {
    const unsigned i = u32(k.at(0));
    if (i >= kClasses) throw std::out_of_range("class out of range");
    p.classes[i] = {u64(k.at(1)), u64(k.at(2)), u64(k.at(3))};
  }
  const json& g = j.at("pageable_gpu");
  p.pageable_bytes = u64(g.at(0));
  p.has_gpu = g.at(1).get<bool>();
  p.gpu_ns = u64(g.at(2));
  // Absent from a summary written before they were counted (read_summary
  // then tells from the sites whether they are unknown).
  p.python_lines_known = j.contains("python_lines");
  if (p.python_lines_known) {
    const json& py = j.at("python_lines");
    p.python_site_copies = u64(py.at(0));
    p.copies_without_python = u64(py.at(1));
    p.bytes_without_python = u64(py.at(2));
    p.threads_without_python = u64(py.at(3));
    // What a tally cannot hold: more of them than copies, threads without
    // copies or more threads than copies.
    if (p.copies_without_python > p.python_site_copies || p.threads_without_python > p.copies_without_python ||
        (p.copies_without_python > 0) != (p.threads_without_python > 0))
      throw std::out_of_range("python_lines: counts no tally makes");
  }
}

// Copy/compute overlap (overlap.h), where the process recorded kernels: its
// devices' sums and the sync_copy_idle copies per site id. Absent from a
// summary of a process without kernel records, and from one written before
// summaries kept it (a report of it then has no Overlap, as before).
json overlap_json(const JobTally& t) {
  json devices = json::array(), sites = json::array();
  for (const DeviceOverlap& d : t.overlap.devices)
    devices.push_back({d.pid, d.device, d.kernels, d.kernel_busy_ns, d.dma_ns, d.dma_under_kernels_ns,
                       d.sync_copy_ns, d.sync_copy_idle_ns});
  const auto& idle = t.findings.sync_idle_sites;
  for (size_t id = 0; id < idle.size(); ++id)
    if (idle[id].calls > 0)
      sites.push_back({id, idle[id].calls, idle[id].bytes, idle[id].time_ns, idle[id].max_ns, idle[id].recoverable_ns});
  return {{"devices", devices}, {"sync_copy_idle_sites", sites}};
}

void overlap_of_json(const json& j, JobTally& t, size_t sites) {
  t.overlap.kernels_recorded = true;
  const size_t before = t.overlap.devices.size();
  for (const json& d : j.at("devices")) {
    const DeviceOverlap o{u32(d.at(0)), u32(d.at(1)), u64(d.at(2)), u64(d.at(3)),
                          u64(d.at(4)), u64(d.at(5)), u64(d.at(6)), u64(d.at(7))};
    // What the feed cannot sum: more time under kernels than the copies
    // took, more idle time than the copies blocked.
    if (o.dma_under_kernels_ns > o.dma_ns || o.sync_copy_idle_ns > o.sync_copy_ns)
      throw std::out_of_range("overlap: times no tally makes");
    for (size_t i = before; i < t.overlap.devices.size(); ++i)
      if (t.overlap.devices[i].pid == o.pid && t.overlap.devices[i].device == o.device)
        throw std::out_of_range("an overlap device given twice");
    t.overlap.devices.push_back(o);
  }
  auto& idle = t.findings.sync_idle_sites;
  for (const json& s : j.at("sync_copy_idle_sites")) {
    const size_t id = u64(s.at(0));
    if (id > sites) throw std::out_of_range("sync_copy_idle site out of range");
    if (id >= idle.size()) idle.resize(id + 1);
    if (idle[id].calls) throw std::out_of_range("a sync_copy_idle site given twice");
    const FindingsTally::SiteSum x{u64(s.at(1)), u64(s.at(2)), u64(s.at(3)), u64(s.at(4)), u64(s.at(5))};
    if (x.calls == 0 || x.max_ns > x.time_ns || x.recoverable_ns > x.time_ns)
      throw std::out_of_range("sync_copy_idle: counts no tally makes");
    idle[id] = x;
  }
}

// The one-process tally, apart from its process part.
json tally_json(const JobTally& t) {
  json classes = json::array();
  for (unsigned k = 0; k < kClasses; ++k) {
    const ClassTally& c = t.classes[k];
    if (!c.seen) continue;
    const ClassTotals& o = c.out;
    classes.push_back({k, o.calls, o.bytes, o.cpu_blocked_ns, o.failed_calls, o.async_calls, o.staged_calls,
                       o.staged_bytes, o.gpu_calls, c.gpu_ns, c.cpu_measured_bytes, c.cpu_measured_ns});
  }
  json sites = json::array();
  for (const SiteTally& s : t.sites) sites.push_back(site_tally_json(s));
  const FindingsTally& f = t.findings;
  json pinned_return = json::array();
  for (int dir = 0; dir < 2; ++dir) {
    std::map<uint64_t, uint64_t> histogram = f.pinned_async_return_histogram[dir];  // exact: value -> how many
    for (uint64_t ns : f.pinned_async_return_ns[dir]) ++histogram[ns];
    json h = json::array();
    for (const auto& [ns, n] : histogram) h.push_back({ns, n});
    pinned_return.push_back(h);
  }
  // The per-copy lists are left empty here: write_summary writes them as
  // text (append_tally).
  json storm = json::array();
  for (size_t id = 1; id < f.storm.size(); ++id) {
    const StormSite& s = f.storm[id];
    storm.push_back({s.calls, s.bytes, s.time_ns, s.max_ns, s.first_enter, s.last_enter});
  }
  const RewriteTally& r = t.rewrite;
  json rewrite_sites = json::array();
  for (const RewriteSite& s : r.sites) rewrite_sites.push_back({s.calls, s.bytes, s.time_ns, s.max_ns, s.recoverable_ns});
  json devices = json::array();
  if (!t.devices.by_process.empty()) {
    const auto& slots = t.devices.by_process[0];
    for (size_t i = 0; i < slots.size(); ++i) {
      const DeviceAcc& a = slots[i];
      if (a.out.calls == 0) continue;
      devices.push_back({i, a.out.calls, a.out.bytes, a.out.cpu_blocked_ns, a.out.pageable_bytes, a.dir_bytes, a.gpu_ns,
                         a.gpu});
    }
  }
  json peers = json::array();
  for (const auto& [key, p] : t.devices.peers)
    peers.push_back({std::get<1>(key), std::get<2>(key), p.calls, p.bytes, p.cpu_blocked_ns, optional_json(p.gpu_ns)});
  json out = {
      {"copies", totals_json(t.copies)},
      {"memsets", totals_json(t.memsets)},
      {"allocations",
       json::array({alloc_json(t.allocations.device), alloc_json(t.allocations.managed),
                    alloc_json(t.allocations.host_pinned), alloc_json(t.allocations.host_registered)})},
      {"pageable", json::array({t.pageable.pageable_bytes, t.pageable.host_bytes})},
      {"classes", classes},
      {"process", process_tally_json(t.processes.at(0))},
      {"sites", sites},
      {"calls_without_site", t.calls_without_site},
      {"pinned_async_return_ns", pinned_return},
      {"pinned_large", json::array({t.findings.pinned_large_bytes[0], t.findings.pinned_large_bytes[1],
                                    t.findings.pinned_large_ns[0], t.findings.pinned_large_ns[1]})},
      {"async_pageable", json::array()},
      {"large_pageable", json::array()},
      {"storm", storm},
      {"rewrite", json::array({r.calls, r.bytes, r.time_ns, r.max_ns, r.gpu_calls, r.predicted_ns, r.largest,
                               r.registered, r.staged})},
      {"rewrite_sites", rewrite_sites},
      {"devices", devices},
      {"peers", peers},
  };
  if (t.overlap.kernels_recorded) out["overlap"] = overlap_json(t);
  return out;
}

// A summary's JSON text. Names come from the traced programs (paths, symbol
// and file names, notes) and need not be UTF-8: each byte that is not is
// written as U+FFFD, never thrown over (json::dump's default).
std::string dump_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The one-process tally's JSON appended to `out`, its per-copy lists
// written as text straight from the tally: as JSON values a list of a
// million distinct copies would take several times its text (about 150
// bytes an entry), the largest part of summarize's memory. The text is the
// one json::dump makes of those values: [site,dir,bytes,cpu_ns,count] and
// [site,dir,gpu,bytes,time,count].
void append_tally(std::string& out, const JobTally& t) {
  const FindingsTally& f = t.findings;
  const std::string rest = dump_text(tally_json(t));
  auto put_async = [&] {
    for (size_t i = 0; i < f.async_pageable.size(); ++i) {
      const AsyncPageableCopy& c = f.async_pageable[i];
      fmt::format_to(std::back_inserter(out), "{}[{},{},{},{},{}]", i ? "," : "", c.site_id, c.dir, c.bytes,
                     c.cpu_ns, f.async_count(i));
    }
  };
  auto put_large = [&] {
    for (size_t i = 0; i < f.large_pageable.size(); ++i) {
      const LargePageableCopy& c = f.large_pageable[i];
      fmt::format_to(std::back_inserter(out), "{}[{},{},{},{},{},{}]", i ? "," : "", c.site_id, c.dir, c.gpu,
                     c.bytes, c.time, f.large_count(i));
    }
  };
  // The keys are the tally object's own (no other object of it has them) and
  // a key's quotes cannot occur unescaped inside a string.
  size_t from = 0;
  for (const auto& [key, put] :
       {std::pair<std::string_view, std::function<void()>>{"\"async_pageable\":[", put_async},
        {"\"large_pageable\":[", put_large}}) {
    const size_t at = rest.find(key, from);
    if (at == std::string::npos) continue;  // cannot happen: tally_json writes both
    out.append(rest, from, at + key.size() - from);
    put();
    from = at + key.size();
  }
  out.append(rest, from, std::string::npos);
}

void tally_of(const json& j, JobTally& t, size_t sites, size_t api_count) {
  t.copies = totals_of(j.at("copies"));
  t.memsets = totals_of(j.at("memsets"));
  const json& a = j.at("allocations");
  t.allocations = {alloc_of(a.at(0)), alloc_of(a.at(1)), alloc_of(a.at(2)), alloc_of(a.at(3))};
  t.pageable.pageable_bytes = u64(j.at("pageable").at(0));
  t.pageable.host_bytes = u64(j.at("pageable").at(1));
  for (const json& c : j.at("classes")) {
    const unsigned k = u32(c.at(0));
    if (k >= kClasses) throw std::out_of_range("class out of range");
    ClassTally& x = t.classes[k];
    x.seen = true;
    x.out.cls = class_of_index(k);
    x.out.calls = u64(c.at(1));
    x.out.bytes = u64(c.at(2));
    x.out.cpu_blocked_ns = u64(c.at(3));
    x.out.failed_calls = u64(c.at(4));
    x.out.async_calls = u64(c.at(5));
    x.out.staged_calls = u64(c.at(6));
    x.out.staged_bytes = u64(c.at(7));
    x.out.gpu_calls = u64(c.at(8));
    x.gpu_ns = u64(c.at(9));
    x.cpu_measured_bytes = u64(c.at(10));
    x.cpu_measured_ns = u64(c.at(11));
  }
  t.processes.resize(1);
  process_tally_of(j.at("process"), t.processes[0], api_count);
  const json& js = j.at("sites");
  if (js.size() != sites) throw std::out_of_range("site tallies and sites differ in number");
  t.sites.resize(sites);
  for (size_t i = 0; i < sites; ++i) {
    const json& s = js.at(i);
    site_tally_of(s, t.sites[i]);
  }
  t.calls_without_site = u64(j.at("calls_without_site"));
  FindingsTally& f = t.findings;
  for (int dir = 0; dir < 2; ++dir)
    for (const json& h : j.at("pinned_async_return_ns").at(dir)) {
      const uint64_t count = u64(h.at(1));
      if (count == 0) throw std::out_of_range("a histogram count of 0");
      f.pinned_async_return_histogram[dir][u64(h.at(0))] += count;
    }
  const json& pl = j.at("pinned_large");
  f.pinned_large_bytes[0] = u64(pl.at(0));
  f.pinned_large_bytes[1] = u64(pl.at(1));
  f.pinned_large_ns[0] = u64(pl.at(2));
  f.pinned_large_ns[1] = u64(pl.at(3));
  auto site_id = [&](const json& v) {
    const uint32_t id = u32(v);
    if (id > sites) throw std::out_of_range("call site id out of range");
    return id;
  };
  auto dir_of = [](const json& v) {
    const uint8_t d = u8(v);
    if (d > 1) throw std::out_of_range("direction out of range");
    return d;
  };
  for (const json& c : j.at("async_pageable")) {
    f.async_pageable.push_back({site_id(c.at(0)), dir_of(c.at(1)), u64(c.at(2)), u64(c.at(3))});
    f.async_pageable_counts.push_back(u64(c.at(4)));
  }
  for (const json& c : j.at("large_pageable")) {
    f.large_pageable.push_back({site_id(c.at(0)), dir_of(c.at(1)), c.at(2).get<bool>(), u64(c.at(3)),
                                u64(c.at(4))});
    f.large_pageable_counts.push_back(u64(c.at(5)));
  }
  const json& storm = j.at("storm");
  if (storm.size() != sites) throw std::out_of_range("storm sites and sites differ in number");
  f.storm.assign(sites + 1, {});
  for (size_t i = 0; i < sites; ++i) {
    const json& s = storm.at(i);
    f.storm[i + 1] = {u64(s.at(0)), u64(s.at(1)), u64(s.at(2)),
                      u64(s.at(3)), u64(s.at(4)), u64(s.at(5))};
  }
  RewriteTally& r = t.rewrite;
  const json& rw = j.at("rewrite");
  r.calls = u64(rw.at(0));
  r.bytes = u64(rw.at(1));
  r.time_ns = u64(rw.at(2));
  r.max_ns = u64(rw.at(3));
  r.gpu_calls = u64(rw.at(4));
  r.predicted_ns = u64(rw.at(5));
  r.largest = u64(rw.at(6));
  r.registered = u64(rw.at(7));
  r.staged = u64(rw.at(8));
  const json& rs = j.at("rewrite_sites");
  if (rs.size() != sites + 1) throw std::out_of_range("rewrite sites and sites differ in number");
  r.sites.resize(sites + 1);
  for (size_t i = 0; i <= sites; ++i) {
    const json& s = rs.at(i);
    r.sites[i] = {u64(s.at(0)), u64(s.at(1)), u64(s.at(2)), u64(s.at(3)),
                  u64(s.at(4))};
  }
  t.devices.by_process.resize(1);
  for (const json& d : j.at("devices")) {
    const size_t slot = u64(d.at(0));
    if (slot >= 256) throw std::out_of_range("device out of range");
    auto& slots = t.devices.by_process[0];
    if (slot >= slots.size()) slots.resize(slot + 1);
    DeviceAcc& x = slots[slot];
    x.out.calls = u64(d.at(1));
    x.out.bytes = u64(d.at(2));
    x.out.cpu_blocked_ns = u64(d.at(3));
    x.out.pageable_bytes = u64(d.at(4));
    x.dir_bytes = u64_array<kDirections>(d.at(5));
    x.gpu_ns = u64(d.at(6));
    x.gpu = d.at(7).get<bool>();
  }
  for (const json& p : j.at("peers")) {
    const int src = i32(p.at(0)), dst = i32(p.at(1));
    PeerPair& x = t.devices.peers[{0u, src, dst}];
    x.src_device = src;
    x.dst_device = dst;
    x.calls = u64(p.at(2));
    x.bytes = u64(p.at(3));
    x.cpu_blocked_ns = u64(p.at(4));
    x.gpu_ns = optional_of(p.at(5));
  }
  if (j.contains("overlap")) overlap_of_json(j.at("overlap"), t, sites);
}

// --- The parts kept beyond the calls' sums, one pair of functions each
// (KeptParts). Each is a process's own and merges as its sites do. ---

// Site ids in a part: Job::sites index + 1 of the record's sites, 0 = none.
uint32_t part_site_id(const json& v, size_t sites) {
  const uint32_t id = u32(v);
  if (id > sites) throw std::out_of_range("call site id out of range");
  return id;
}

// NVTX ranges: the process's range stacks (names, outermost first) and its
// copies per (stack, site, class) as rows [stack, site id, class, failed,
// calls, bytes, cpu ns, gpu ns, gpu calls, async, large, tiny], in key order.
json ranges_json(const std::vector<model::RangeStack>& stacks, const RangeTally& tally) {
  json names = json::array();
  for (const model::RangeStack& r : stacks) names.push_back(r.names);
  std::vector<const RangeTally::value_type*> entries;
  for (const auto& e : tally) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  json copies = json::array();
  for (const auto* e : entries) {
    const RangeKey& k = e->first;
    const RangeCopies& c = e->second;
    copies.push_back({k.range, k.site == model::kNoSite ? 0 : k.site + 1, k.cls, c.failed_calls, c.calls,
                      c.bytes, c.cpu_blocked_ns, c.gpu_ns, c.gpu_calls, c.async_calls, c.large_calls,
                      c.tiny_calls});
  }
  return {{"stacks", names}, {"copies", copies}};
}

void ranges_of(const json& j, ProcessRecord& r) {
  for (const json& names : j.at("stacks")) {
    model::RangeStack stack;
    stack.names = names.get<std::vector<std::string>>();
    if (stack.names.empty()) throw std::out_of_range("an empty NVTX range stack");
    r.ranges.push_back(std::move(stack));
  }
  for (const json& c : j.at("copies")) {
    const uint32_t range = u32(c.at(0));
    if (range >= r.ranges.size()) throw std::out_of_range("NVTX range stack out of range");
    const uint32_t site = part_site_id(c.at(1), r.sites.size());
    const uint32_t cls = u32(c.at(2));
    if (cls >= kClasses) throw std::out_of_range("class out of range");
    RangeCopies x;
    x.failed_calls = u64(c.at(3));
    x.calls = u64(c.at(4));
    x.bytes = u64(c.at(5));
    x.cpu_blocked_ns = u64(c.at(6));
    x.gpu_ns = u64(c.at(7));
    x.gpu_calls = u64(c.at(8));
    x.async_calls = u64(c.at(9));
    x.large_calls = u64(c.at(10));
    x.tiny_calls = u64(c.at(11));
    // What the pass cannot count: more of a kind than the copies.
    if (std::max({x.gpu_calls, x.async_calls, x.large_calls, x.tiny_calls}) > x.calls)
      throw std::out_of_range("NVTX range copies: counts no tally makes");
    const RangeKey key{range, site == 0 ? model::kNoSite : site - 1, cls};
    if (!r.tally.ranges.emplace(key, x).second) throw std::out_of_range("an NVTX range entry given twice");
  }
}

// Unified memory per allocation site: rows [site id, allocations, allocated
// bytes, HtoD bytes, DtoH bytes, HtoD migrations, DtoH migrations, on-demand
// bytes, prefetched bytes, migration ns, GPU fault groups, CPU faults,
// on-demand HtoD bytes, on-demand DtoH bytes, largest allocation, on-demand
// ns]. The on-demand ns is the length of the site's merged intervals: they
// are all of this process, so no later merge needs the intervals themselves.
json managed_json(const std::optional<ManagedTally>& tally) {
  json rows = json::array();
  if (!tally) return rows;
  for (const auto& [key, s] : *tally) {
    const ManagedTotals& t = s.totals;
    rows.push_back({key.second, t.allocations, t.allocated_bytes, t.htod_bytes, t.dtoh_bytes,
                    t.htod_migrations, t.dtoh_migrations, t.on_demand_bytes, t.prefetched_bytes,
                    t.migration_ns, t.gpu_fault_groups, t.cpu_faults, s.on_demand_htod, s.on_demand_dtoh,
                    s.largest_allocation, s.on_demand.length()});
  }
  return rows;
}

void managed_of_json(const json& j, JobTally& tally, size_t sites) {
  ManagedTally& m = tally.managed.emplace();
  for (const json& row : j) {
    const uint32_t site = part_site_id(row.at(0), sites);
    ManagedSiteTally s;
    ManagedTotals& t = s.totals;
    t.allocations = u64(row.at(1));
    t.allocated_bytes = u64(row.at(2));
    t.htod_bytes = u64(row.at(3));
    t.dtoh_bytes = u64(row.at(4));
    t.htod_migrations = u64(row.at(5));
    t.dtoh_migrations = u64(row.at(6));
    t.on_demand_bytes = u64(row.at(7));
    t.prefetched_bytes = u64(row.at(8));
    t.migration_ns = u64(row.at(9));
    t.gpu_fault_groups = u64(row.at(10));
    t.cpu_faults = u64(row.at(11));
    s.on_demand_htod = u64(row.at(12));
    s.on_demand_dtoh = u64(row.at(13));
    s.largest_allocation = u64(row.at(14));
    s.on_demand = IntervalUnion::of_length(u64(row.at(15)));
    // The feed splits the on-demand bytes by direction, out of the migrated ones.
    if (s.on_demand_htod > t.htod_bytes || s.on_demand_dtoh > t.dtoh_bytes ||
        s.on_demand_htod + s.on_demand_dtoh != t.on_demand_bytes)
      throw std::out_of_range("managed memory: bytes no tally makes");
    if (!m.emplace(std::make_pair(0u, site), std::move(s)).second)
      throw std::out_of_range("a managed allocation site given twice");
  }
}

// The copies that repeat (duplicate_uploads, round_trips) per site: rows
// [site id, calls, bytes, time ns, max ns, recoverable ns] of the sites with any.
json site_sums_json(const std::vector<FindingsTally::SiteSum>& sums) {
  json rows = json::array();
  for (size_t id = 0; id < sums.size(); ++id) {
    const FindingsTally::SiteSum& s = sums[id];
    if (s.calls) rows.push_back({id, s.calls, s.bytes, s.time_ns, s.max_ns, s.recoverable_ns});
  }
  return rows;
}
json repeated_copies_json(const FindingsTally& f) {
  return {{"duplicate_uploads", site_sums_json(f.duplicate_sites)},
          {"round_trips", site_sums_json(f.round_trip_sites)}};
}

void site_sums_of(const json& j, std::vector<FindingsTally::SiteSum>& sums, size_t sites) {
  sums.assign(sites + 1, {});
  for (const json& row : j) {
    FindingsTally::SiteSum& s = sums[part_site_id(row.at(0), sites)];
    if (s.calls) throw std::out_of_range("a site's repeated copies given twice");
    s = {u64(row.at(1)), u64(row.at(2)), u64(row.at(3)),
         u64(row.at(4)), u64(row.at(5))};
    if (s.calls == 0 || s.max_ns > s.time_ns) throw std::out_of_range("repeated copies: sums no walk makes");
  }
}
void repeated_copies_of(const json& j, FindingsTally& f, size_t sites) {
  site_sums_of(j.at("duplicate_uploads"), f.duplicate_sites, sites);
  site_sums_of(j.at("round_trips"), f.round_trip_sites, sites);
}

template <typename T>
void add_max(T& a, const T& b) {
  a = std::max(a, b);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string ProcessRecord::identity() const {
  // The notes carry the run's and the rank's ids: two runs whose processes
  // happen to share host, pid and start (generated sets, containers) stay two.
  const trace::ProcessInfo& p = process.trace.process;
  std::string notes;
  for (const auto& n : process.trace.notes) notes += n + '\n';
  return fmt::format("{}/{}/{}/{}/{:016x}", p.hostname, p.pid, p.start_realtime_ns, p.trace_name,
                     std::hash<std::string>{}(notes));
}

void compact_finding_inputs(FindingsTally& f) {
  // Entries added since the last compaction stand for one copy each.
  if (!f.async_pageable_counts.empty()) f.async_pageable_counts.resize(f.async_pageable.size(), 1);
  if (!f.large_pageable_counts.empty()) f.large_pageable_counts.resize(f.large_pageable.size(), 1);
  compact(f.async_pageable, f.async_pageable_counts, async_key);
  compact(f.large_pageable, f.large_pageable_counts, large_key);
  for (int dir = 0; dir < 2; ++dir) {
    // Sorted first: one histogram update per distinct time, not per copy.
    std::vector<uint64_t>& ns = f.pinned_async_return_ns[dir];
    std::sort(ns.begin(), ns.end());
    for (size_t i = 0, j; i < ns.size(); i = j) {
      for (j = i + 1; j < ns.size() && ns[j] == ns[i];) ++j;
      f.pinned_async_return_histogram[dir][ns[i]] += j - i;
    }
    ns.clear();
    ns.shrink_to_fit();
  }
}

ProcessRecord record_process(model::Job&& job) {
  JobTally tally = tally_calls(job, {});
  compact(tally.findings.async_pageable, tally.findings.async_pageable_counts, async_key);
  compact(tally.findings.large_pageable, tally.findings.large_pageable_counts, large_key);
  for (auto& v : tally.findings.pinned_async_return_ns) v.shrink_to_fit();  // reserved for every call
  // What the events give beyond the pass's sums, as a streamed summary has
  // them: the copies that repeat per site, and the unified memory.
  add_job_repeated_copies(job, tally.findings);
  tally.managed = managed_tally(job);
  return make_record(std::move(job.processes.at(0)), std::move(job.sites), std::move(job.ranges),
                     std::move(job.notes), std::move(tally));
}

ProcessRecord make_record(model::Process&& process, std::vector<model::Site> sites,
                          std::vector<model::RangeStack> ranges, std::vector<std::string> notes,
                          JobTally tally) {
  ProcessRecord r;
  r.tally = std::move(tally);
  r.sites = std::move(sites);
  r.ranges = std::move(ranges);
  r.notes = std::move(notes);
  model::Process& p = process;
  // The header only: the events, records, stacks and modules are what a
  // summary leaves behind.
  trace::Trace header;
  header.path = std::move(p.trace.path);
  header.format_version = p.trace.format_version;
  header.has_process = p.trace.has_process;
  header.process = std::move(p.trace.process);
  header.api_names = std::move(p.trace.api_names);
  header.notes = std::move(p.trace.notes);
  header.has_status = p.trace.has_status;
  header.status = std::move(p.trace.status);
  header.has_modes = p.trace.has_modes;
  header.modes = std::move(p.trace.modes);
  header.has_cupti_handover = p.trace.has_cupti_handover;
  header.cupti_handover = std::move(p.trace.cupti_handover);
  // The modules that name the native sites (identify_site), in trace order
  // (find_module takes the last that holds an address).
  std::vector<bool> names_site(p.trace.modules.size(), false);
  for (const model::Site& site : r.sites)
    if (!site.frame.python)
      if (const trace::ModuleInfo* m = symbolize::find_module(p.trace.modules, site.frame.address))
        names_site[static_cast<size_t>(m - p.trace.modules.data())] = true;
  for (size_t i = 0; i < names_site.size(); ++i)
    if (names_site[i]) header.modules.push_back(std::move(p.trace.modules[i]));
  header.complete = p.trace.complete;
  header.cut_reason = std::move(p.trace.cut_reason);
  header.blocks_read = p.trace.blocks_read;
  r.process.trace = std::move(header);
  r.process.gpu_timing = p.gpu_timing;
  r.process.gpu_records_unmatched = p.gpu_records_unmatched;
  r.process.events_without_gpu = p.events_without_gpu;
  r.process.gpu_records_joined_by_time = p.gpu_records_joined_by_time;
  r.process.gate = p.gate;
  r.process.events_read = p.events_read;
  r.process.gpu_records_read = p.gpu_records_read;
  return r;
}

std::string write_summary(const SummaryHeader& header, const std::vector<ProcessRecord>& records) {
  // One process's JSON at a time, appended to the text: the document of a
  // thousand processes is never built whole.
  json head = {{"schema", header.schema}, {"cuxfer_version", header.cuxfer_version}, {"symbols", header.symbols}};
  std::string out = dump_text(head);
  out.pop_back();  // the closing brace: the processes follow
  out += ",\"processes\":[";
  for (size_t i = 0; i < records.size(); ++i) {
    const ProcessRecord& r = records[i];
    json sites = json::array();
    for (const model::Site& s : r.sites) {
      json stack = json::array();
      for (const auto& f : s.stack) stack.push_back(frame_json(f));
      sites.push_back({frame_json(s.frame), stack});
    }
    // The tally goes in where its placeholder is (append_tally).
    json process = {{"trace", trace_json(r.process.trace)},
                    {"model", model_json(r.process)},
                    {"sites", sites},
                    {"notes", r.notes},
                    {"tally", nullptr}};
    // The parts it keeps (an older summary's record, written again, still lacks the others).
    if (r.kept.ranges) process["ranges"] = ranges_json(r.ranges, r.tally.ranges);
    if (r.kept.managed) process["managed"] = managed_json(r.tally.managed);
    if (r.kept.repeated_copies) process["repeated_copies"] = repeated_copies_json(r.tally.findings);
    const std::string text = dump_text(process);
    constexpr std::string_view kTally = "\"tally\":null";
    const size_t at = text.find(kTally);
    if (i) out += ',';
    out.append(text, 0, at + kTally.size() - 4);  // up to the null
    append_tally(out, r.tally);
    out.append(text, at + kTally.size(), std::string::npos);
  }
  out += "]}\n";
  return out;
}

bool read_summary(const std::string& text, SummaryHeader& header, std::vector<ProcessRecord>& records,
                  std::string& error) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("schema") || !j["schema"].is_string()) {
    error = "not a cuxfer summary (no schema)";
    return false;
  }
  header.schema = j["schema"].get<std::string>();
  if (header.schema != kSummarySchema) {
    error = fmt::format("a summary of schema {}; this cuxfer reads {} (make it again with this cuxfer's `cuxfer "
                        "summarize` from the traces)",
                        header.schema, kSummarySchema);
    return false;
  }
  try {
    header.cuxfer_version = j.at("cuxfer_version").get<std::string>();
    header.symbols = j.at("symbols").get<std::string>();
    for (const json& p : j.at("processes")) {
      ProcessRecord r;
      r.process.trace = trace_of(p.at("trace"));
      r.site_modules = p.at("trace").contains("modules");
      model_of(p.at("model"), r.process);
      for (const json& s : p.at("sites")) {
        model::Site site;
        site.frame = frame_of(s.at(0));
        for (const json& f : s.at(1)) site.stack.push_back(frame_of(f));
        r.sites.push_back(std::move(site));
      }
      r.notes = p.at("notes").get<std::vector<std::string>>();
      tally_of(p.at("tally"), r.tally, r.sites.size(), r.process.trace.api_names.size());
      // Parts a summary written before them does not have (KeptParts).
      r.kept.ranges = p.contains("ranges");
      if (r.kept.ranges) ranges_of(p.at("ranges"), r);
      r.kept.managed = p.contains("managed");
      if (r.kept.managed) managed_of_json(p.at("managed"), r.tally, r.sites.size());
      // An older summary of a process that recorded kernels has no overlap in its tally.
      r.kept.overlap = p.at("tally").contains("overlap") || !kernels_recorded(r.process);
      r.kept.repeated_copies = p.contains("repeated_copies");
      if (r.kept.repeated_copies)
        repeated_copies_of(p.at("repeated_copies"), r.tally.findings, r.sites.size());
      // Its copies without a Python line are known to be none where no site
      // holds a Python frame (none is counted there); unknown otherwise.
      ProcessTally& pt = r.tally.processes.at(0);
      pt.python_sites = std::any_of(r.sites.begin(), r.sites.end(), [](const model::Site& s) {
        return std::any_of(s.stack.begin(), s.stack.end(),
                           [](const symbolize::Frame& f) { return f.python; });
      });
      if (!pt.python_sites) pt.python_lines_known = true;
      records.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    error = fmt::format("damaged summary: {}", e.what());
    return false;
  }
  return true;
}

MergedJob merge_records(std::vector<ProcessRecord> records, MergeOrder order) {
  // Trace file name order, as a directory is read; the identity breaks ties
  // so that the order never depends on the order given.
  if (order == MergeOrder::ByTraceName)
    std::stable_sort(records.begin(), records.end(), [](const ProcessRecord& a, const ProcessRecord& b) {
      const std::string an = base_name(a.process.trace.path), bn = base_name(b.process.trace.path);
      if (an != bn) return an < bn;
      if (a.process.trace.path != b.process.trace.path) return a.process.trace.path < b.process.trace.path;
      return a.identity() < b.identity();
    });
  MergedJob m;
  model::Job& job = m.job;
  JobTally& t = m.tally;
  std::set<std::string> seen;
  std::unordered_map<std::string, uint32_t> range_by_path;  // job.ranges by RangeStack::path()
  t.findings.storm.resize(1);
  t.rewrite.sites.resize(1);
  for (ProcessRecord& r : records) {
    if (order == MergeOrder::ByTraceName && !seen.insert(r.identity()).second) {
      m.duplicates.push_back(r.process.trace.path);
      continue;
    }
    const auto pi = static_cast<uint32_t>(job.processes.size());
    const auto site_base = static_cast<uint32_t>(job.sites.size());  // ids of this record's sites: base + 1 ...
    JobTally& x = r.tally;
    // Sums.
    auto add_totals = [](Totals& a, const Totals& b) {
      a.calls += b.calls;
      a.bytes += b.bytes;
      a.cpu_blocked_ns += b.cpu_blocked_ns;
      a.failed_calls += b.failed_calls;
    };
    auto add_alloc = [](AllocTotals& a, const AllocTotals& b) {
      a.calls += b.calls;
      a.bytes += b.bytes;
      a.cpu_blocked_ns += b.cpu_blocked_ns;
      a.frees += b.frees;
    };
    add_totals(t.copies, x.copies);
    add_totals(t.memsets, x.memsets);
    add_alloc(t.allocations.device, x.allocations.device);
    add_alloc(t.allocations.managed, x.allocations.managed);
    add_alloc(t.allocations.host_pinned, x.allocations.host_pinned);
    add_alloc(t.allocations.host_registered, x.allocations.host_registered);
    t.pageable.pageable_bytes += x.pageable.pageable_bytes;
    t.pageable.host_bytes += x.pageable.host_bytes;
    for (unsigned k = 0; k < kClasses; ++k) {
      const ClassTally& b = x.classes[k];
      if (!b.seen) continue;
      ClassTally& a = t.classes[k];
      a.seen = true;
      a.out.cls = b.out.cls;
      a.out.calls += b.out.calls;
      a.out.bytes += b.out.bytes;
      a.out.cpu_blocked_ns += b.out.cpu_blocked_ns;
      a.out.failed_calls += b.out.failed_calls;
      a.out.async_calls += b.out.async_calls;
      a.out.staged_calls += b.out.staged_calls;
      a.out.staged_bytes += b.out.staged_bytes;
      a.out.gpu_calls += b.out.gpu_calls;
      a.gpu_ns += b.gpu_ns;
      a.cpu_measured_bytes += b.cpu_measured_bytes;
      a.cpu_measured_ns += b.cpu_measured_ns;
    }
    t.calls_without_site += x.calls_without_site;
    // Per process and per site: appended, the sites renumbered.
    t.processes.push_back(std::move(x.processes.at(0)));
    for (SiteTally& s : x.sites) t.sites.push_back(std::move(s));
    // Parts an older summary lacks: counted, and said (parts_lacking_note).
    m.lacking.ranges += !r.kept.ranges;
    m.lacking.managed += !r.kept.managed;
    m.lacking.repeated_copies += !r.kept.repeated_copies;
    m.lacking.overlap += !r.kept.overlap;
    // Unified memory: its keys renumbered as the process and its sites are;
    // each key is one process's, so its on-demand time is never merged here.
    if (x.managed) {
      if (!t.managed) t.managed.emplace();
      for (auto& [key, from] : *x.managed)
        (*t.managed)[{pi, key.second == 0 ? 0 : key.second + site_base}] = std::move(from);
    }
    // Copies per NVTX range: its stacks interned into the job's by path, in
    // record order, as build_job interns each process's in trace order (so
    // the job's stacks come in the same order); none where the record's
    // stacks are the job's already (a streamed report's).
    std::vector<uint32_t> range_index;
    for (model::RangeStack& stack : r.ranges) {
      auto [at, fresh] = range_by_path.try_emplace(stack.path(), static_cast<uint32_t>(job.ranges.size()));
      if (fresh) job.ranges.push_back(std::move(stack));
      range_index.push_back(at->second);
    }
    for (const auto& [key, from] : x.ranges) {
      const uint32_t range = r.ranges.empty() ? key.range : range_index.at(key.range);
      RangeCopies& into =
          t.ranges[{range, key.site == model::kNoSite ? model::kNoSite : key.site + site_base, key.cls}];
      into.failed_calls += from.failed_calls;
      into.calls += from.calls;
      into.bytes += from.bytes;
      into.cpu_blocked_ns += from.cpu_blocked_ns;
      into.gpu_ns += from.gpu_ns;
      into.gpu_calls += from.gpu_calls;
      into.async_calls += from.async_calls;
      into.large_calls += from.large_calls;
      into.tiny_calls += from.tiny_calls;
    }
    FindingsTally& f = t.findings;
    for (int dir = 0; dir < 2; ++dir) {
      // Into the job's histogram: its size is the distinct times, whatever the copies.
      for (uint64_t ns : x.findings.pinned_async_return_ns[dir]) ++f.pinned_async_return_histogram[dir][ns];
      for (const auto& [ns, count] : x.findings.pinned_async_return_histogram[dir])
        f.pinned_async_return_histogram[dir][ns] += count;
      f.pinned_large_bytes[dir] += x.findings.pinned_large_bytes[dir];
      f.pinned_large_ns[dir] += x.findings.pinned_large_ns[dir];
    }
    auto renumber = [&](uint32_t id) { return id == 0 ? 0 : id + site_base; };
    for (size_t i = 0; i < x.findings.async_pageable.size(); ++i) {
      AsyncPageableCopy c = x.findings.async_pageable[i];
      c.site_id = renumber(c.site_id);
      f.async_pageable.push_back(c);
      f.async_pageable_counts.push_back(x.findings.async_count(i));
    }
    for (size_t i = 0; i < x.findings.large_pageable.size(); ++i) {
      LargePageableCopy c = x.findings.large_pageable[i];
      c.site_id = renumber(c.site_id);
      f.large_pageable.push_back(c);
      f.large_pageable_counts.push_back(x.findings.large_count(i));
    }
    for (size_t id = 1; id < x.findings.storm.size(); ++id) f.storm.push_back(x.findings.storm[id]);
    // Copies summed per site in a streamed pass (FindingsTally::async_sites,
    // duplicate_sites and their kind).
    auto merge_sums = [&](std::vector<FindingsTally::SiteSum>& into, const std::vector<FindingsTally::SiteSum>& from) {
      if (from.empty()) return;
      into.resize(std::max(into.size(), site_base + from.size()));
      for (size_t id = 0; id < from.size(); ++id) {
        FindingsTally::SiteSum& a = into[id == 0 ? 0 : site_base + id];
        const FindingsTally::SiteSum& b = from[id];
        a.calls += b.calls;
        a.bytes += b.bytes;
        a.time_ns += b.time_ns;
        add_max(a.max_ns, b.max_ns);
        a.recoverable_ns += b.recoverable_ns;
      }
    };
    merge_sums(f.async_sites, x.findings.async_sites);
    merge_sums(f.large_sites, x.findings.large_sites);
    merge_sums(f.duplicate_sites, x.findings.duplicate_sites);
    merge_sums(f.round_trip_sites, x.findings.round_trip_sites);
    merge_sums(f.sync_idle_sites, x.findings.sync_idle_sites);
    // Copy/compute overlap: each process's devices, in process order.
    t.overlap.kernels_recorded |= x.overlap.kernels_recorded;
    t.overlap.devices.insert(t.overlap.devices.end(), x.overlap.devices.begin(), x.overlap.devices.end());
    f.async_measured |= x.findings.async_measured;
    f.large_used_measured |= x.findings.large_used_measured;
    f.large_used_nominal |= x.findings.large_used_nominal;
    f.large_ref_max = std::max(f.large_ref_max, x.findings.large_ref_max);
    f.large_gpu_calls += x.findings.large_gpu_calls;
    RewriteTally& rw = t.rewrite;
    rw.calls += x.rewrite.calls;
    rw.bytes += x.rewrite.bytes;
    rw.time_ns += x.rewrite.time_ns;
    add_max(rw.max_ns, x.rewrite.max_ns);
    rw.gpu_calls += x.rewrite.gpu_calls;
    rw.predicted_ns += x.rewrite.predicted_ns;
    add_max(rw.largest, x.rewrite.largest);
    rw.registered += x.rewrite.registered;
    rw.staged += x.rewrite.staged;
    if (!x.rewrite.sites.empty()) {
      RewriteSite& none = rw.sites[0];  // copies without a site: one slot for the job
      const RewriteSite& b = x.rewrite.sites[0];
      none.calls += b.calls;
      none.bytes += b.bytes;
      none.time_ns += b.time_ns;
      add_max(none.max_ns, b.max_ns);
      none.recoverable_ns += b.recoverable_ns;
      for (size_t id = 1; id < x.rewrite.sites.size(); ++id) rw.sites.push_back(x.rewrite.sites[id]);
    }
    t.devices.by_process.push_back(x.devices.by_process.empty() ? std::vector<DeviceAcc>{}
                                                                : std::move(x.devices.by_process[0]));
    for (const auto& [key, p] : x.devices.peers) t.devices.peers[{pi, std::get<1>(key), std::get<2>(key)}] = p;
    // The model: the process, its sites, its notes each once.
    for (model::Site& s : r.sites) {
      s.process = pi;
      job.sites.push_back(std::move(s));
    }
    for (std::string& n : r.notes)
      if (std::find(job.notes.begin(), job.notes.end(), n) == job.notes.end()) job.notes.push_back(std::move(n));
    job.processes.push_back(std::move(r.process));
  }
  // Sized as tally_calls sizes them for a job of these sites.
  t.findings.storm.resize(job.sites.size() + 1);
  t.rewrite.sites.resize(job.sites.size() + 1);
  for (auto* sums : {&t.findings.async_sites, &t.findings.large_sites})
    if (!sums->empty()) sums->resize(job.sites.size() + 1);
  const PageableShare& s = t.pageable;
  t.pageable.fraction = s.host_bytes ? static_cast<double>(s.pageable_bytes) / s.host_bytes : 0.0;
  return m;
}

std::string summary_report_note() {
  return "from summaries: made from the processes' summaries (--range and the HTML report's timeline need the "
         "traces)";
}

std::optional<std::string> parts_lacking_note(const MergedJob& merged) {
  const MergedJob::Lacking& l = merged.lacking;
  std::vector<std::string> parts;
  if (l.ranges) parts.push_back(fmt::format("NVTX ranges ({})", l.ranges));
  if (l.managed) parts.push_back(fmt::format("managed memory ({})", l.managed));
  if (l.repeated_copies)
    parts.push_back(fmt::format("duplicate_uploads and round_trips ({})", l.repeated_copies));
  if (l.overlap) parts.push_back(fmt::format("copy/compute overlap and sync_copy_idle ({})", l.overlap));
  if (parts.empty()) return std::nullopt;
  return fmt::format(
      "summaries written before they kept these parts leave their processes out of them: {} (summarize their "
      "traces again with this cuxfer)",
      fmt::join(parts, ", "));
}

}  // namespace cuxfer::analyses
