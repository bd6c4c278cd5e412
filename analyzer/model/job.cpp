#include "analyzer/model/job.h"

#include "analyzer/model/gpu_join.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/symbolize/entry_package.h"
#include "analyzer/symbolize/frame_filter.h"
#include "analyzer/symbolize/installed_packages.h"
#include "analyzer/symbolize/mixed_stack.h"
#include "trace/prefault.h"

namespace cuxfer::model {
namespace {

// `s` with every byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD: NVTX names are whatever bytes the app passed, and the
// reports (JSON above all) promise UTF-8.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {  // no overlong forms, surrogates or values past U+10FFFF
      uint32_t cp = c & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      ok = cp >= (n == 2 ? 0x80u : n == 3 ? 0x800u : 0x10000u) && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// One process's NVTX range stacks mapped to the job's, interned by path
// (Process::range_of_stack): the same range stacks of several processes are one.
std::unordered_map<uint32_t, uint32_t> index_ranges(const trace::Trace& t, std::vector<RangeStack>& ranges,
                                                    std::unordered_map<std::string, uint32_t>& by_path) {
  std::unordered_map<uint32_t, std::string> names;
  for (const auto& n : t.nvtx_names)
    names[n.id] = valid_utf8(n.domain.empty() ? n.message : n.domain + "::" + n.message);
  std::unordered_map<uint32_t, uint32_t> of_id;
  for (const auto& s : t.nvtx_stacks) {
    RangeStack r;
    for (uint64_t id : s.frames) {
      auto it = names.find(static_cast<uint32_t>(id));
      r.names.push_back(it != names.end() ? it->second : "?");
    }
    auto [at, fresh] = by_path.try_emplace(r.path(), static_cast<uint32_t>(ranges.size()));
    if (fresh) ranges.push_back(std::move(r));
    of_id[s.id] = at->second;
  }
  return of_id;
}

struct GpuSum {
  uint64_t ns = 0;
  uint32_t records = 0;
  uint64_t begin = UINT64_MAX, end = 0;  // first DMA start, last DMA end
  trace::GpuRecordKind kind = trace::GpuRecordKind::Memcpy;
  bool claimed = false;
};

// correlation id -> summed GPU time of its copy/memset records.
std::unordered_map<uint32_t, GpuSum> index_gpu_records(const trace::Trace& t) {
  std::unordered_map<uint32_t, GpuSum> by_id;
  for (const auto& r : t.gpu_records) {
    auto kind = static_cast<trace::GpuRecordKind>(r.kind);
    if (r.correlation_id == 0 ||
        (kind != trace::GpuRecordKind::Memcpy && kind != trace::GpuRecordKind::Memset))
      continue;
    GpuSum& s = by_id[r.correlation_id];
    s.ns += r.end_ns > r.start_ns ? r.end_ns - r.start_ns : 0;
    s.records += 1;
    s.begin = std::min(s.begin, r.start_ns);
    s.end = std::max(s.end, r.end_ns);
    s.kind = kind;
  }
  return by_id;
}

// Resolves every captured stack of one process and maps trace call-site ids to
// job sites; stacks whose user frame is the same share a site: the same
// return address, or for a Python frame the same file, line and function.
SiteIndex build_sites(uint32_t process_index, const trace::Trace& t, symbolize::Symbolizer& symbolizer,
                      const symbolize::PythonSiteRule& python_sites, std::vector<Site>& sites,
                      std::vector<std::string>& notes) {
  std::unordered_map<uint32_t, uint32_t> site_of_id;
  std::unordered_map<uint64_t, uint32_t> site_of_address;
  std::unordered_map<std::string, uint32_t> site_of_line;
  const symbolize::PyCodeIndex codes = symbolize::index_py_codes(t.py_codes);
  symbolize::InstalledPackages installed;
  const symbolize::PythonFileTest installed_file = [&](std::string_view f) { return installed.contains(f); };
  // Installed packages that are the user's: those named, and the one the process was started from.
  std::vector<std::string> user_packages = python_sites.user_packages;
  const symbolize::EntryPackage entry = t.py_codes.empty()
                                            ? symbolize::EntryPackage{}
                                            : symbolize::entry_package(t.process.exe, t.process.argv);
  if (!entry.package.empty() &&
      std::find(user_packages.begin(), user_packages.end(), entry.package) == user_packages.end())
    user_packages.push_back(entry.package);
  const symbolize::PythonFileTest user_file = [&](std::string_view f) {
    const std::string_view top = symbolize::installed_top_level(f);
    if (top.empty()) return false;
    return std::find(user_packages.begin(), user_packages.end(), top) != user_packages.end();
  };
  const size_t first_site = sites.size();
  for (const auto& cs : t.callsites) {
    if (cs.frames.empty() || site_of_id.count(cs.id)) continue;
    Site site;
    site.process = process_index;
    site.stack = symbolize::mixed_stack(cs.frames, t.modules, codes, symbolizer);
    if (site.stack.empty()) continue;
    site.frame =
        site.stack[symbolize::choose_user_frame(site.stack, python_sites.frames, installed_file, user_file)];
    const uint32_t next = static_cast<uint32_t>(sites.size());
    uint32_t index = next;
    if (site.frame.python)
      index = site_of_line
                  .try_emplace(site.frame.file + '\0' + std::to_string(site.frame.line) + '\0' + site.frame.function,
                               next)
                  .first->second;
    else
      index = site_of_address.try_emplace(site.frame.address, next).first->second;
    if (index == next) sites.push_back(std::move(site));
    site_of_id[cs.id] = index;
  }
  // The note when the entry package named a site of this process (sites from first_site are its own).
  const bool entry_named_a_site =
      !entry.package.empty() &&
      std::any_of(sites.begin() + static_cast<std::ptrdiff_t>(first_site), sites.end(), [&](const Site& s) {
        return s.frame.python && symbolize::installed_top_level(s.frame.file) == entry.package;
      });
  if (entry_named_a_site) {
    std::string note = fmt::format(
        "Python: the installed package {} is taken as the program's own code ({}): its lines name call sites "
        "(--python-user names other packages of yours)",
        entry.package, entry.how);
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
  }
  return SiteIndex(site_of_id);
}

// The calls from `first` on that `keep` accepts, in the order they entered.
template <typename Keep>
std::vector<Call*> calls_by_entry(std::vector<Call>& calls, size_t first, Keep keep) {
  std::vector<Call*> out;
  for (size_t i = first; i < calls.size(); ++i)
    if (keep(calls[i])) out.push_back(&calls[i]);
  // Stable: calls entered at the same instant keep trace order, which is
  // what a join made while the trace is read in order can reproduce.
  std::stable_sort(out.begin(), out.end(),
                   [](Call* a, Call* b) { return a->event->t_enter_ns < b->event->t_enter_ns; });
  return out;
}

// Record `r` (of trace `t`) joins call `c`: one DMA gives its duration; a
// staged copy's chunks give first chunk start to last chunk end, the time its
// pipeline kept the copy engine's work in flight.
void claim(Call& c, const trace::GpuRecord& r, const trace::Trace& t, const std::vector<Call>& calls,
           std::vector<uint32_t>& record_call) {
  add_gpu_time(c, r);
  record_call[static_cast<size_t>(&r - t.gpu_records.data())] = static_cast<uint32_t>(&c - calls.data());
}

// The second pass of the join by time (kSwitchLookBack in gpu_join.h): the
// records no flagged call claimed go, latest first, to the latest unflagged
// calls issued since the records last went off. On a loaded machine (or
// under a sanitizer) CUPTI's enable can take long enough for many such
// copies. Latest first keeps issue order for DMAs queued behind each other.
// Where such a DMA started only after a flagged copy was issued, the first
// pass gave its record to that copy: the number of timed copies stays
// right, the two may swap GPU times.
uint64_t join_switch_races(const trace::Trace& t, std::vector<Call>& calls, size_t first,
                           const std::vector<const trace::GpuRecord*>& records, std::vector<uint32_t>& record_call) {
  const std::vector<uint64_t> offs = switch_offs(t);
  if (offs.empty()) return 0;
  const std::vector<Call*> unflagged = calls_by_entry(calls, first, races_switch);
  uint64_t joined = 0;
  for (auto rit = records.rbegin(); rit != records.rend(); ++rit) {
    const trace::GpuRecord* r = *rit;
    const size_t ri = static_cast<size_t>(r - t.gpu_records.data());
    if (record_call[ri] != kNoCall) continue;
    // The records were off from the last change to off before this DMA started.
    const uint64_t* since = off_before(offs, r->start_ns);
    if (!since) continue;  // never off before it: a flagged call should have claimed it
    auto end = std::upper_bound(unflagged.begin(), unflagged.end(), r->start_ns,
                                [](uint64_t x, Call* c) { return x < c->event->t_enter_ns; });
    Call* c = switch_race_call(*r, *since, 0, static_cast<size_t>(end - unflagged.begin()),
                               [&](size_t i) { return unflagged[i]; });
    if (!c) continue;
    claim(*c, *r, t, calls, record_call);
    ++joined;
  }
  return joined;
}

// GPU records that carry no correlation id (the shim joins none: nothing
// CUPTI-related runs on its hot path) are joined by time, size and kind: each
// record, in start order, goes to the earliest call without GPU time that
// fits it (record_fits) and entered before the DMA started. Within a stream
// DMA runs in issue order, so this is exact for in-order streams; two
// concurrent streams of equal-sized copies of the same class may swap GPU
// times, which is why the report says how the join was made.
uint64_t join_gpu_by_time(const trace::Trace& t, std::vector<Call>& calls, size_t first,
                          uint64_t* without_id, std::vector<uint32_t>& record_call) {
  const bool governed = !t.cupti_gate.empty();
  std::vector<const trace::GpuRecord*> records;
  for (const auto& r : t.gpu_records) {
    auto kind = static_cast<trace::GpuRecordKind>(r.kind);
    if (r.correlation_id == 0 &&
        (kind == trace::GpuRecordKind::Memcpy || kind == trace::GpuRecordKind::Memset))
      records.push_back(&r);
  }
  *without_id = records.size();
  if (records.empty()) return 0;
  // Stable, as calls_by_entry: records that start at the same instant keep file order.
  std::stable_sort(records.begin(), records.end(), [](auto* a, auto* b) { return a->start_ns < b->start_ns; });
  // Where the governor turned records off, a call issued meanwhile has no
  // record to claim (its flag says so): leaving it out keeps a sampled
  // window's records from going to an earlier call of the same size.
  const std::vector<Call*> candidates = calls_by_entry(calls, first, [governed](const Call& c) {
    return awaits_record(c) && (!governed || (c.event->flags & trace::kFlagGpuExpected));
  });
  constexpr size_t kLookBack = kJoinLookBack;  // calls in flight that one record may belong to
  uint64_t joined = 0;
  for (const trace::GpuRecord* r : records) {
    auto end = std::upper_bound(candidates.begin(), candidates.end(), r->start_ns,
                                [](uint64_t t, Call* c) { return t < c->event->t_enter_ns; });
    // Among the last kLookBack calls before the DMA started, the earliest that fits.
    auto begin = end - std::min<ptrdiff_t>(end - candidates.begin(), kLookBack);
    for (auto it = begin; it != end; ++it) {
      Call* c = *it;
      if (gpu_complete(*c) || !record_fits(*c, *r)) continue;
      claim(*c, *r, t, calls, record_call);
      ++joined;
      break;
    }
  }
  if (governed) joined += join_switch_races(t, calls, first, records, record_call);
  // A staged copy whose chunks did not all turn up has no trustworthy GPU time.
  for (Call* c : candidates)
    if (c->staged() && c->gpu_records > 0 && c->gpu_bytes != c->bytes()) {
      joined -= c->gpu_records;
      const auto index = static_cast<uint32_t>(c - calls.data());
      for (auto& rc : record_call)
        if (rc == index) rc = kNoCall;
      c->gpu_ns = 0;
      c->gpu_records = 0;
      c->gpu_bytes = 0;
    }
  return joined;
}

}  // namespace

namespace {
// What the shim's notes began with before RunModes existed.
bool note_starts(const trace::Trace& t, std::string_view prefix) {
  for (const auto& n : t.notes)
    if (n.rfind(prefix, 0) == 0) return true;
  return false;
}
}  // namespace

bool rewrite_pin_on(const trace::Trace& t) {
  return t.has_modes ? t.modes.rewrite_pin : note_starts(t, "rewrite: pin");
}

bool rewrite_any_on(const trace::Trace& t) {
  return t.has_modes ? t.modes.rewrite_pin || t.modes.policy : note_starts(t, "rewrite: pin") || note_starts(t, "policy: ");
}


namespace {

// An event of an impossible size counts 0 bytes; `bytes` is the sum so far.
inline void check_size(trace::Event& e, uint64_t& bytes, uint64_t& impossible, uint64_t& largest) {
  if (e.bytes >= kImpossibleBytes || e.bytes > kImpossibleJobBytes - bytes) [[unlikely]] {
    ++impossible;
    largest = std::max<uint64_t>(largest, e.bytes);
    e.bytes = 0;
  }
  bytes += e.bytes;
}

std::string impossible_sizes_note(uint32_t pid, uint64_t impossible, uint64_t largest) {
  return fmt::format(
      "pid {}: {} events claim impossible sizes (1 PiB or more each, or past 2^63 bytes in all; the "
      "largest {} bytes): a damaged or crafted trace; they count as calls of 0 bytes in every total",
      pid, impossible, largest);
}

// Per API index: the name is the shim's own work (kShimApiPrefix).
std::vector<bool> shim_apis(const trace::Trace& t) {
  std::vector<bool> shim(t.api_names.size(), false);
  for (size_t i = 0; i < t.api_names.size(); ++i) shim[i] = t.api_names[i].rfind(kShimApiPrefix, 0) == 0;
  return shim;
}

}  // namespace

bool calls_stream(const Process& p) {
  // Where the governor turned the records off, StreamedGpuJoin makes build_job's second pass too.
  return p.trace.gpu_records.empty() && p.trace.gpu_records_passed.not_joined_by_time == 0;
}

CallFeed::CallFeed(const Job& job, uint32_t process)
    : sites_(job.processes[process].site_index),
      first_site_(job.processes[process].first_site),
      pid_(job.processes[process].pid()),
      shim_api_(shim_apis(job.processes[process].trace)) {
  if (!job.processes[process].trace.nvtx_names.empty()) ranges_.emplace(job.processes[process]);
}

void CallFeed::add(std::span<trace::Event> events, std::vector<Call>& calls, std::vector<Call>& shim_calls,
                   std::vector<uint32_t>* call_ranges) {
  calls.clear();
  shim_calls.clear();
  calls.reserve(events.size());
  if (call_ranges) call_ranges->clear();
  events_ += events.size();
  // build_job's loop for a process without GPU records joined by correlation id.
  for (auto& e : events) {
    check_size(e, bytes_, impossible_, largest_impossible_);
    const bool shim = is_shim(e);
    if (ranges_) {
      const uint32_t range = ranges_->next(e, shim);
      if (!shim && call_ranges) call_ranges->push_back(range);
    }
    Call& c = (shim ? shim_calls : calls).emplace_back();
    c.event = &e;
    c.process = 0;
    c.cls = classify(e);
    if (shim || e.callsite_id == 0) continue;
    const uint32_t site = sites_.find(e.callsite_id);
    c.site = site == kNoSite ? kNoSite : site - first_site_;
  }
}

std::optional<std::string> CallFeed::impossible_note() const {
  if (impossible_ == 0) return std::nullopt;
  return impossible_sizes_note(pid_, impossible_, largest_impossible_);
}

Job build_job(std::vector<trace::Trace> traces, symbolize::Symbolizer& symbolizer,
              const symbolize::PythonSiteRule& python_sites) {
  Job job;
  job.processes.reserve(traces.size());
  size_t total_events = 0;
  for (auto& t : traces) {
    total_events += t.events.size();
    Process p;
    p.trace = std::move(t);
    p.gpu_timing = p.trace.has_status && p.trace.status.cupti == trace::CuptiState::Active;
    p.events_read = p.trace.events.size();
    p.gpu_records_read = p.trace.gpu_records.size() + p.trace.gpu_records_passed.records;
    job.processes.push_back(std::move(p));
  }
  job.calls.reserve(total_events);
  // Nearly every event becomes a call: fault the whole array in at once.
  trace::prefault_for_write(job.calls.data(), job.calls.capacity() * sizeof(Call));

  std::unordered_map<std::string, uint32_t> range_of_path;
  uint64_t job_bytes = 0;  // every event's bytes so far (bounded by kImpossibleJobBytes)
  for (uint32_t pi = 0; pi < job.processes.size(); ++pi) {
    Process& p = job.processes[pi];
    p.first_site = static_cast<uint32_t>(job.sites.size());
    p.site_index = build_sites(pi, p.trace, symbolizer, python_sites, job.sites, job.notes);
    const SiteIndex& site_of_id = p.site_index;
    const size_t first_call = job.calls.size();
    auto gpu = p.gpu_timing ? index_gpu_records(p.trace) : std::unordered_map<uint32_t, GpuSum>{};
    p.gpu_record_call.assign(p.trace.gpu_records.size(), kNoCall);
    std::unordered_map<uint32_t, uint32_t> call_of_correlation;  // claimed ids
    const std::vector<bool> shim_api = shim_apis(p.trace);
    // NVTX: each thread's current range stack, replayed in trace order.
    const bool nvtx = !p.trace.nvtx_names.empty();
    std::optional<RangeReplay> ranges;
    std::vector<uint32_t> process_ranges;
    if (nvtx) {
      p.range_of_stack = index_ranges(p.trace, job.ranges, range_of_path);
      ranges.emplace(p);
    }
    uint64_t impossible = 0, largest_impossible = 0;
    for (auto& e : p.trace.events) {
      check_size(e, job_bytes, impossible, largest_impossible);
      // Built where it stays, not on the stack and copied: this loop runs once
      // per event and was bound by that copy (docs/benchmarks.md).
      const bool shim = e.api < shim_api.size() && shim_api[e.api];
      Call& c = (shim ? job.shim_calls : job.calls).emplace_back();
      c.event = &e;
      c.process = pi;
      c.cls = classify(e);
      if (nvtx) {
        const uint32_t range = ranges->next(e, shim);
        if (!shim) process_ranges.push_back(range);
      }
      if (shim) continue;
      if (e.callsite_id != 0) c.site = site_of_id.find(e.callsite_id);
      if (!gpu.empty() && e.correlation_id != 0) {
        auto it = gpu.find(e.correlation_id);
        if (it != gpu.end() && !it->second.claimed && gpu_kind_matches(c.kind(), it->second.kind)) {
          c.gpu_ns = it->second.ns;
          c.gpu_records = it->second.records;
          c.gpu_begin_ns = it->second.begin;
          c.gpu_end_ns = it->second.end;
          it->second.claimed = true;
          call_of_correlation[e.correlation_id] = static_cast<uint32_t>(job.calls.size() - 1);
        }
      }
    }
    if (impossible > 0) job.notes.push_back(impossible_sizes_note(p.pid(), impossible, largest_impossible));
    if (nvtx) {
      job.call_ranges.resize(first_call, kNoRange);
      job.call_ranges.insert(job.call_ranges.end(), process_ranges.begin(), process_ranges.end());
    }
    for (size_t ri = 0; ri < p.trace.gpu_records.size() && !call_of_correlation.empty(); ++ri) {
      const trace::GpuRecord& r = p.trace.gpu_records[ri];
      auto kind = static_cast<trace::GpuRecordKind>(r.kind);
      if (r.correlation_id == 0 ||
          (kind != trace::GpuRecordKind::Memcpy && kind != trace::GpuRecordKind::Memset))
        continue;
      if (auto it = call_of_correlation.find(r.correlation_id); it != call_of_correlation.end())
        p.gpu_record_call[ri] = it->second;
    }
    if (p.gpu_timing) {
      uint64_t without_id = 0;
      p.gpu_records_joined_by_time =
          join_gpu_by_time(p.trace, job.calls, first_call, &without_id, p.gpu_record_call);
      p.gpu_records_unmatched += without_id - p.gpu_records_joined_by_time;
      if (p.gpu_records_joined_by_time > 0)
        job.notes.push_back(joined_by_time_note(p.pid(), p.gpu_records_joined_by_time));
      GateAccount gate(p.trace);
      for (size_t i = first_call; i < job.calls.size(); ++i) gate.add(job.calls[i]);
      gate.finish(p);
    }
    for (const auto& [id, s] : gpu)
      if (!s.claimed) p.gpu_records_unmatched += s.records;
    p.notes_end = static_cast<uint32_t>(job.notes.size());
  }
  if (!job.call_ranges.empty()) job.call_ranges.resize(job.calls.size(), kNoRange);
  auto symbol_notes = symbolizer.notes();
  job.notes.insert(job.notes.begin(), symbol_notes.begin(), symbol_notes.end());
  return job;
}

std::vector<trace::Trace> read_traces(const std::vector<std::string>& paths,
                                      std::vector<std::string>& errors, const trace::EventBlocks& events) {
  std::vector<trace::Trace> traces;
  for (const auto& path : paths) {
    trace::Trace t;
    std::string error;
    if (trace::read_trace(path, t, error, events) != trace::ReadStatus::Ok) {
      errors.push_back(error);
      continue;
    }
    traces.push_back(std::move(t));
  }
  return traces;
}

std::string RangeStack::path() const {
  std::string p;
  for (const auto& n : names) {
    if (!p.empty()) p += " / ";
    p += n;
  }
  return p;
}

std::vector<bool> stacks_holding(const std::vector<RangeStack>& ranges, const std::string& name) {
  std::vector<bool> inside(ranges.size(), false);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const RangeStack& r = ranges[i];
    const std::string path = r.path();
    inside[i] = path == name || std::find(r.names.begin(), r.names.end(), name) != r.names.end();
    // A path prefix names the outer ranges of deeper stacks: "a / b" holds "a / b / c".
    if (!inside[i] && path.size() > name.size() && path.compare(0, name.size(), name) == 0 &&
        path.compare(name.size(), 3, " / ") == 0)
      inside[i] = true;
  }
  return inside;
}

size_t keep_range(Job& job, const std::string& name) {
  const std::vector<bool> inside = stacks_holding(job.ranges, name);
  std::vector<uint32_t> new_index(job.calls.size(), kNoCall);
  std::vector<Call> kept;
  std::vector<uint32_t> kept_ranges;
  for (size_t i = 0; i < job.calls.size(); ++i) {
    const uint32_t r = job.range_of(i);
    if (r == kNoRange || !inside[r]) continue;
    new_index[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(job.calls[i]);
    kept_ranges.push_back(r);
  }
  for (auto& p : job.processes)
    for (auto& rc : p.gpu_record_call)
      if (rc != kNoCall) rc = new_index[rc];
  job.calls = std::move(kept);
  job.call_ranges = std::move(kept_ranges);
  return job.calls.size();
}

}  // namespace cuxfer::model
