#include "analyzer/render/text_renderer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "analyzer/text/units.h"

namespace cuxfer::render {

using namespace text;  // number and width formatting (analyzer/text/units.h)
namespace {

using analyses::Report;

// A table whose first column takes what the others leave of the width. When
// even a narrow first column does not fit, optional columns are dropped, the
// last added first.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> optional = {})
      : headers_(std::move(headers)), optional_(std::move(optional)) {
    optional_.resize(headers_.size(), false);
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void render(std::string& out, size_t width, const std::string& indent = "  ") const {
    constexpr size_t kMinFirst = 16;
    const size_t n = headers_.size();
    std::vector<size_t> w(n, 0);
    for (size_t i = 0; i < n; ++i) w[i] = display_width(headers_[i]);
    for (const auto& r : rows_)
      for (size_t i = 0; i < n && i < r.size(); ++i) w[i] = std::max(w[i], display_width(r[i]));
    std::vector<bool> shown(n, true);
    auto others = [&] {
      size_t sum = indent.size();
      for (size_t i = 1; i < n; ++i)
        if (shown[i]) sum += w[i] + 2;
      return sum;
    };
    for (size_t i = n; i-- > 1 && others() + std::min(w[0], kMinFirst) > width;)
      if (optional_[i]) shown[i] = false;
    w[0] = std::min(w[0], width > others() + kMinFirst ? width - others() : kMinFirst);
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = indent;
      for (size_t i = 0; i < n; ++i) {
        if (!shown[i]) continue;
        std::string cell = i < r.size() ? r[i] : "";
        if (i == 0) {
          cell = fit(cell, w[0]);
          s += cell + std::string(w[0] - display_width(cell), ' ');
        } else {
          s += "  " + std::string(w[i] - display_width(cell), ' ') + cell;
        }
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      out += s + "\n";
    };
    line(headers_);
    for (const auto& r : rows_) line(r);
  }

 private:
  std::vector<std::string> headers_;
  std::vector<bool> optional_;
  std::vector<std::vector<std::string>> rows_;
};

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string ratio_to(uint64_t value, uint64_t median) {
  return median ? fmt::format("{:.2f}x the median", static_cast<double>(value) / static_cast<double>(median))
                : std::string("median 0");
}

// A distribution's row: min, median, p95, max, and whose the max is.
std::vector<std::string> distribution_row(const std::string& name, const analyses::Distribution& d,
                                          std::string (*format)(uint64_t), const char* id_word) {
  return {name, format(d.min), format(d.median), format(d.p95), format(d.max),
          fmt::format("{} {}", id_word, d.max_id), ratio_to(d.max, d.median)};
}

void wrapped(std::string& out, const std::string& text, size_t width, const std::string& first,
             const std::string& rest) {
  size_t first_cols = display_width(first.substr(first.rfind('\n') + 1));
  size_t indent = std::max(first_cols, display_width(rest));
  size_t avail = width > indent + 20 ? width - indent : 20;
  auto lines = wrap(text, avail);
  for (size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? first : rest) + lines[i] + "\n";
}

// The numbers the text gives call sites: a location's rank in the call-site
// table (#1 the most CPU-blocked time, as the user reads it down), for each
// of its sites; any other site (an allocation site, say) the next number
// when first named. The report's ids (Job::sites order, kept in --json) ran
// #8, #5, #7, #6 down the ranked table.
class SiteNumbers {
 public:
  explicit SiteNumbers(const Report& r) : report_(r) {
    for (size_t i = 0; i < r.locations.size(); ++i) {
      numbers_[r.locations[i].id] = static_cast<uint32_t>(i + 1);
      for (uint32_t site : r.locations[i].callsites) numbers_.emplace(site, static_cast<uint32_t>(i + 1));
    }
    next_ = static_cast<uint32_t>(r.locations.size() + 1);
  }
  uint32_t number(uint32_t id) {
    auto [it, added] = numbers_.emplace(id, next_);
    next_ += added;
    return it->second;
  }
  // "#3 main (app.cpp:12)"
  std::string label(uint32_t id) {
    if (id == 0) return "(no call site captured)";
    for (const auto& s : report_.locations)
      if (s.id == id) return fmt::format("#{} {}", number(id), s.frame.short_display());
    for (const auto& s : report_.callsites)
      if (s.id == id) return fmt::format("#{} {}", number(id), s.frame.short_display());
    return fmt::format("#{}", number(id));
  }

 private:
  const Report& report_;
  std::map<uint32_t, uint32_t> numbers_;
  uint32_t next_ = 1;
};

// What the header says when GPU time is n/a ("CUPTI unavailable: simulated
// CUDA"), or "" when it says nothing; the Processes section leaves out what
// this said, so that it is said once.
std::string cpu_timing_reason(const Report& r) {
  // Nothing to time (no copies: a managed-memory-only program) is no reason
  // to say CUPTI was unavailable when it was active.
  if (r.timing != "cpu" || r.totals.calls + r.totals.failed_calls == 0) return "";
  for (const auto& p : r.processes)
    if (p.cupti_state != "active" && p.copies > 0) {
      std::string reason = p.cupti_state == "unknown" ? "CUPTI state unknown" : "CUPTI unavailable";
      if (!p.cupti_reason.empty()) reason += ": " + p.cupti_reason;
      return reason;
    }
  return "CUPTI unavailable";
}

// The process's CUPTI state as the header already said it.
bool cupti_said_above(const analyses::ProcessSummary& p, const std::string& said) {
  if (said.empty() || p.cupti_handover_s >= 0 || p.cupti_state == "active") return false;
  const std::string mine = std::string(p.cupti_state == "unknown" ? "CUPTI state unknown" : "CUPTI unavailable") +
                           (p.cupti_reason.empty() ? "" : ": " + p.cupti_reason);
  return mine == said;
}

// The shim's note "CUPTI unavailable: <reason>; GPU times are not recorded"
// repeats the state its trace records (the Processes line, or the header).
bool repeats_cupti_state(const std::string& note, const analyses::ProcessSummary& p) {
  return p.cupti_state != "active" && note.rfind("CUPTI unavailable: " + p.cupti_reason, 0) == 0;
}

void header(std::string& out, const Report& r, size_t width) {
  std::string program = r.program.empty() ? "(unknown program)" : r.program;
  std::string cmd = program;
  for (size_t i = 1; i < r.argv.size(); ++i) cmd += " " + r.argv[i];
  out += fit(fmt::format("cuxfer report: {}", cmd), width) + "\n";
  std::string pids;
  for (size_t i = 0; i < r.processes.size() && i < 8; ++i)
    pids += (i ? ", " : "") + std::to_string(r.processes[i].pid);
  if (r.processes.size() > 8) pids += fmt::format(", … ({} in all)", r.processes.size());
  wrapped(out,
          fmt::format("{} {}, traced span {}, {}, {} moved",
                      r.processes.size() == 1 ? "process" : "processes", pids, format_duration(r.span_ns),
                      counted(r.totals.calls, "copy", "copies"), format_bytes(r.totals.bytes)),
          width, "  ", "    ");

  if (r.simulated) {
    // Kept on one line whatever the width: people and scripts look for it.
    const std::string banner = "SIMULATED CUDA (tests/simcuda) — no GPU was used; timings are not meaningful";
    out += display_width(banner) + 8 <= width ? "\n*** " + banner + " ***\n" : "\n" + banner + "\n";
  }
  if (const std::string reason = cpu_timing_reason(r); !reason.empty())
    wrapped(out, fmt::format("GPU time: n/a ({}) — CPU timing shown", reason), width, "", "  ");
  for (const auto& p : r.processes) {
    if (!p.complete)
      wrapped(out, fmt::format("pid {} ({}): {}", p.pid, basename_of(p.trace_path), p.cut_reason), width,
              "PARTIAL: ", "         ");
    if (p.events_dropped || p.gpu_records_dropped)
      out += fmt::format(
          "PARTIAL: pid {}: {} events and {} GPU records dropped by the shim "
          "(buffers full); totals undercount\n",
          p.pid, format_count(p.events_dropped), format_count(p.gpu_records_dropped));
  }
}

void transfers(std::string& out, const Report& r, size_t width) {
  out += "\nTransfers by direction and host memory\n";
  if (r.classes.empty()) {
    out += "  (no copies recorded)\n";
    return;
  }
  // A "staged" column (bytes the pinned rewrite staged) only when it staged any.
  const bool staged = r.rewrite.staged_calls > 0;
  std::vector<std::string> headers = {"class", "calls", "bytes", "CPU-blocked", "GPU time", "GB/s"};
  std::vector<bool> optional = {false, false, false, false, true, false};
  if (staged) headers.push_back("staged"), optional.push_back(true);
  Table t(headers, optional);
  bool cpu_mark = false, na_mark = false;
  for (const auto& c : r.classes) {
    if (c.calls == 0 && c.failed_calls > 0) continue;
    std::string gbps = format_gbps(c.gbps);
    if (c.gbps && c.gbps_basis == "cpu" && r.timing == "gpu") {
      gbps += "*";
      cpu_mark = true;
    }
    if (!c.gbps) na_mark = true;
    std::vector<std::string> row = {analyses::class_name(c.cls), format_count(c.calls), format_bytes(c.bytes),
                                    format_duration(c.cpu_blocked_ns),
                                    c.gpu_ns ? format_duration(*c.gpu_ns) : "n/a", gbps};
    if (staged) row.push_back(c.staged_calls ? format_bytes(c.staged_bytes) : "");
    t.add(std::move(row));
  }
  std::vector<std::string> total = {"total", format_count(r.totals.calls), format_bytes(r.totals.bytes),
                                    format_duration(r.totals.cpu_blocked_ns), "", ""};
  if (staged) total.push_back(format_bytes(r.rewrite.staged_bytes));
  t.add(std::move(total));
  t.render(out, width);
  if (staged)
    wrapped(out, "staged: bytes copied through the pinned rewrite's staging buffers (see Rewrite (pin))",
            width, "  ", "    ");
  if (cpu_mark) out += "  * from CPU-blocked time: no GPU record matched every call\n";
  if (na_mark)
    wrapped(out,
            "n/a: no time measures these transfers (async copies return before the DMA ends; "
            "device-to-device copies do not block the CPU) and no GPU time was recorded",
            width, "  ", "    ");
  if (r.totals.failed_calls)
    out += fmt::format("  {} failed cop{} (returned an error; not counted above)\n",
                       format_count(r.totals.failed_calls), r.totals.failed_calls == 1 ? "y" : "ies");

  const auto& s = r.pageable_share;
  if (s.host_bytes)
    wrapped(
        out,
        fmt::format("{} of host<->device bytes ({} of {}) went through pageable memory",
                    format_percent(s.fraction), format_bytes(s.pageable_bytes), format_bytes(s.host_bytes)),
        width, "\nPageable share: ", "  ");
  if (r.memsets.calls || r.memsets.failed_calls)
    out += fmt::format("Memsets: {}, {}, CPU-blocked {}\n", counted(r.memsets.calls, "call", "calls"),
                       format_bytes(r.memsets.bytes), format_duration(r.memsets.cpu_blocked_ns));
  std::string allocs;
  auto alloc = [&](const char* name, const analyses::AllocTotals& a) {
    if (!a.calls && !a.frees) return;
    allocs += fmt::format("{}{} {}, {} ({} to allocate)", allocs.empty() ? "" : "; ", name,
                          counted(a.calls, "call", "calls"), format_bytes(a.bytes),
                          format_duration(a.cpu_blocked_ns));
  };
  alloc("device", r.allocations.device);
  alloc("managed", r.allocations.managed);
  alloc("pinned host", r.allocations.host_pinned);
  alloc("registered host", r.allocations.host_registered);
  if (!allocs.empty()) wrapped(out, allocs, width, "Allocations: ", "  ");
}

// Per process and device; only when there is more than one of them.
void devices(std::string& out, const Report& r, size_t width) {
  if (r.devices.size() < 2) return;
  out += "\nPer device\n";
  if (r.devices.size() > analyses::kPerRankLayoutMax) {
    std::set<uint32_t> pids;
    std::set<int> gpus;
    for (const auto& d : r.devices) pids.insert(d.pid), gpus.insert(d.device);
    if (pids.size() == r.devices.size()) {  // one device each: the process's numbers are the device's
      wrapped(out,
              fmt::format("each of the {} processes copied on one device ({} in all); its numbers are the "
                          "process's (Processes below; --json devices)",
                          format_count(pids.size()), counted(gpus.size(), "device number", "device numbers")),
              width, "  ", "    ");
      return;
    }
    std::vector<std::pair<uint64_t, uint32_t>> copies, bytes, blocked;
    for (const auto& d : r.devices) {
      copies.push_back({d.calls, d.pid});
      bytes.push_back({d.bytes, d.pid});
      blocked.push_back({d.cpu_blocked_ns, d.pid});
    }
    out += fmt::format("  {} process and device pairs (each one's numbers: --json devices)\n",
                       format_count(r.devices.size()));
    Table t({"per pair", "min", "median", "p95", "max", "largest", "max/median"},
            {false, false, false, false, false, false, true});
    t.add(distribution_row("copies", analyses::distribution_of(copies), format_count, "pid"));
    t.add(distribution_row("bytes", analyses::distribution_of(bytes), format_bytes, "pid"));
    t.add(distribution_row("CPU-blocked", analyses::distribution_of(blocked), format_duration, "pid"));
    t.render(out, width);
    return;
  }
  for (const auto& d : r.devices)
    wrapped(out,
            fmt::format("pid {} GPU {}: {} cop{}, {} (H2D {}, D2H {}, D2D {}, peer {}; pageable {}), CPU-blocked {}{}",
                        d.pid, d.device < 0 ? std::string("?") : std::to_string(d.device), format_count(d.calls),
                        d.calls == 1 ? "y" : "ies", format_bytes(d.bytes), format_bytes(d.h2d_bytes),
                        format_bytes(d.d2h_bytes), format_bytes(d.d2d_bytes), format_bytes(d.peer_bytes),
                        format_bytes(d.pageable_bytes), format_duration(d.cpu_blocked_ns),
                        d.gpu_ns ? ", GPU " + format_duration(*d.gpu_ns) : std::string()),
            width, "  ", "    ");
}

// Peer copies per device pair; only when there were any.
void peer_pairs(std::string& out, const Report& r, size_t width) {
  if (r.peer_pairs.empty()) return;
  out += "\nPeer copies (GPU to GPU)\n";
  for (const auto& p : r.peer_pairs) {
    auto dev = [](int d) { return d < 0 ? std::string("?") : std::to_string(d); };
    const uint64_t t = p.gpu_ns.value_or(p.cpu_blocked_ns);
    wrapped(out,
            fmt::format("pid {} GPU {} -> GPU {}: {} cop{}, {}, {} {}{}", p.pid, dev(p.src_device),
                        dev(p.dst_device), format_count(p.calls), p.calls == 1 ? "y" : "ies", format_bytes(p.bytes),
                        p.gpu_ns ? "GPU" : "CPU-blocked", format_duration(t),
                        t ? fmt::format(", {} GB/s", format_gbps(static_cast<double>(p.bytes) / static_cast<double>(t)))
                          : std::string()),
            width, "  ", "    ");
  }
}

// Copy/compute overlap; only when kernels were recorded (--kernels).
void overlap(std::string& out, const Report& r, size_t width) {
  if (!r.overlap.kernels_recorded) return;
  out += "\nCopy/compute overlap (kernels recorded)\n";
  for (const auto& d : r.overlap.devices) {
    auto pct = [](uint64_t part, uint64_t whole) {
      return whole ? format_percent(static_cast<double>(part) / static_cast<double>(whole)) : std::string("n/a");
    };
    wrapped(out,
            fmt::format("pid {} GPU {}: {} busy {}; copies' DMA {}, {} of it under kernels; synchronous "
                        "copies between kernels blocked {}, the GPU idle for {} of it",
                        d.pid, d.device, counted(d.kernels, "kernel", "kernels"), format_duration(d.kernel_busy_ns),
                        format_duration(d.dma_ns), pct(d.dma_under_kernels_ns, d.dma_ns),
                        format_duration(d.sync_copy_ns), pct(d.sync_copy_idle_ns, d.sync_copy_ns)),
            width, "  ", "    ");
  }
}

// Unified memory (CUPTI unified-memory records); only when the app allocated
// managed memory.
void managed(std::string& out, const Report& r, size_t width, SiteNumbers& sites) {
  const auto& m = r.managed;
  if (!m.records_on && m.unavailable.empty() && m.total.allocations == 0) return;
  out += "\nManaged memory\n";
  for (const auto& u : m.unavailable) wrapped(out, "migrations not recorded for " + u, width, "  ", "    ");
  if (!m.records_on) {
    if (m.unavailable.empty())
      wrapped(out, "migrations not recorded (needs CUPTI; see the processes' notes)", width, "  ", "    ");
    return;
  }
  auto line = [&](const std::string& where, const analyses::ManagedTotals& t) {
    wrapped(out,
            fmt::format("{}: {} allocation{} ({}); migrated H2D {} in {}, D2H {} in {}; on demand {} "
                        "(serving it {}), prefetched {}; GPU fault groups {}, CPU faults {}",
                        where, format_count(t.allocations), t.allocations == 1 ? "" : "s",
                        format_bytes(t.allocated_bytes), format_bytes(t.htod_bytes), format_count(t.htod_migrations),
                        format_bytes(t.dtoh_bytes), format_count(t.dtoh_migrations), format_bytes(t.on_demand_bytes),
                        format_duration(t.on_demand_ns), format_bytes(t.prefetched_bytes),
                        format_count(t.gpu_fault_groups), format_count(t.cpu_faults)),
            width, "  ", "    ");
  };
  line("all", m.total);
  size_t shown = 0;
  for (const auto& s : m.sites) {
    if (shown++ == 5) {
      out += fmt::format("  … and {} more\n", counted(m.sites.size() - 5, "allocation site", "allocation sites"));
      break;
    }
    const std::string where = s.callsite && !s.frame.short_display().empty()
                                  ? fmt::format("#{} {}", sites.number(s.callsite), s.frame.short_display())
                                  : sites.label(s.callsite);
    line(fmt::format("pid {} allocated at {}", s.pid, where), s);
  }
}

// What the pinned rewrite did; only when it was on in some process.
void rewrite(std::string& out, const Report& r, size_t width) {
  const auto& rw = r.rewrite;
  if (!rw.active) return;
  out += "\nRewrite (pin)\n";
  const uint64_t pageable = rw.staged_bytes + rw.registered_bytes + rw.passthrough_pageable_bytes;
  auto share = [&](uint64_t bytes) {
    return pageable ? format_percent(static_cast<double>(bytes) / static_cast<double>(pageable)) : "0.0%";
  };
  wrapped(out,
          fmt::format("staged through pinned buffers: {} cop{}, {} ({} of pageable host<->device bytes)", format_count(rw.staged_calls),
                      rw.staged_calls == 1 ? "y" : "ies", format_bytes(rw.staged_bytes), share(rw.staged_bytes)),
          width, "  ", "    ");
  // Staging keeps a copy's semantics, so the CPU copy stays in the app's
  // call; only memory pinned where it is made takes it out.
  if (rw.staged_calls && rw.staged_cpu_ns > rw.staged_if_pinned_ns)
    wrapped(out,
            fmt::format("pinned at the source (PyTorch: DataLoader(pin_memory=True) or tensor.pin_memory(); "
                        "cudaHostAlloc), the staged copies would take about {} instead of {} in the app's calls: "
                        "{} more than the rewrite brings (an estimate: {} async cop{} returning once queued, "
                        "synchronous bytes at the pinned bandwidth, {})",
                        format_duration(rw.staged_if_pinned_ns), format_duration(rw.staged_cpu_ns),
                        format_duration(rw.staged_cpu_ns - rw.staged_if_pinned_ns), format_count(rw.staged_async_calls),
                        rw.staged_async_calls == 1 ? "y" : "ies", rw.pinned_basis),
            width, "    ", "      ");
  if (rw.registered_calls)
    wrapped(out,
            fmt::format("through in-place registration: {} cop{}, {} ({})", format_count(rw.registered_calls),
                        rw.registered_calls == 1 ? "y" : "ies", format_bytes(rw.registered_bytes),
                        share(rw.registered_bytes)),
            width, "  ", "    ");
  if (rw.passthrough_pageable_calls) {
    wrapped(out,
            fmt::format("passed through as pageable: {}, {} ({}), why:",
                        counted(rw.passthrough_pageable_calls, "copy", "copies"),
                        format_bytes(rw.passthrough_pageable_bytes), share(rw.passthrough_pageable_bytes)),
            width, "  ", "    ");
    // What the shim recorded where it decided, per reason, most bytes first.
    for (const auto& p : rw.passthrough_reasons)
      wrapped(out, fmt::format("{}: {}, {}", p.text, counted(p.calls, "copy", "copies"), format_bytes(p.bytes)),
              width, "    ", "      ");
  } else {
    out += "  passed through as pageable: none\n";
  }
  if (rw.pool_allocations)
    wrapped(out,
            fmt::format("staging pool: {} pinned, pinning cost {} (the shim's own allocation{}; not in Allocations)",
                        format_bytes(rw.pool_bytes), format_duration(rw.pinning_cost_ns),
                        rw.pool_allocations == 1 ? "" : fmt::format("s: {}", format_count(rw.pool_allocations))),
            width, "  ", "    ");
  else
    out += "  staging pool: none allocated\n";
  if (rw.registrations || rw.registrations_refused)
    wrapped(out,
            fmt::format("registrations: {} made, {} pinned in place, pinning cost {}{}",
                        format_count(rw.registrations), format_bytes(rw.registration_bytes),
                        format_duration(rw.registration_cost_ns),
                        rw.registrations_refused
                            ? fmt::format("; {} refused by the driver (staged instead)",
                                          format_count(rw.registrations_refused))
                            : ""),
            width, "  ", "    ");
  if (rw.zero_copy_allocations || rw.zero_copy_calls)
    wrapped(out,
            fmt::format("zero copy: {} device allocation{} ({}) backed by mapped host memory; {} cop{} ({}) "
                        "into or out of them",
                        format_count(rw.zero_copy_allocations), rw.zero_copy_allocations == 1 ? "" : "s",
                        format_bytes(rw.zero_copy_allocation_bytes), format_count(rw.zero_copy_calls),
                        rw.zero_copy_calls == 1 ? "y" : "ies", format_bytes(rw.zero_copy_bytes)),
            width, "  ", "    ");
  wrapped(out,
          "Staging copies every byte twice (CPU into a pinned buffer, then DMA), as the driver's own "
          "pageable path does: it saves time, not bytes. A registered buffer is DMA'd in place: "
          "its copies save the CPU copy too.",
          width, "  ", "  ");
}

void apis(std::string& out, const Report& r, size_t width) {
  if (r.apis.empty()) return;
  out += "\nCalls by API\n";
  Table t({"API", "calls", "bytes", "CPU-blocked", "failed"});
  for (const auto& a : r.apis)
    t.add({a.name, format_count(a.calls), format_bytes(a.bytes), format_duration(a.cpu_blocked_ns),
           a.failed_calls ? format_count(a.failed_calls) : ""});
  t.render(out, width);
}

// One row per location: the sites of several processes at one line are
// summed, named by the largest one's id and pid ("12034 +7": seven more).
void callsites(std::string& out, const Report& r, size_t width, size_t top, SiteNumbers& sites) {
  if (r.locations.empty()) return;
  out += fmt::format("\nTop call sites by CPU-blocked time ({} of {})\n", std::min(top, r.locations.size()),
                     r.locations.size());
  const bool many = r.processes.size() > 1;
  const bool gpu = r.timing == "gpu";
  std::vector<std::string> headers = {"call site", "class", "calls", "bytes", "CPU-blocked"};
  std::vector<bool> optional = {false, true, false, true, false};
  if (gpu) headers.push_back("GPU time"), optional.push_back(true);
  if (many) headers.push_back("pid"), optional.push_back(true);
  Table t(headers, optional);
  bool merged = false;
  for (size_t i = 0; i < r.locations.size() && i < top; ++i) {
    const auto& s = r.locations[i];
    std::vector<std::string> row = {fmt::format("#{} {}", sites.number(s.id), s.frame.short_display()), s.main_class,
                                    format_count(s.calls), format_bytes(s.bytes),
                                    format_duration(s.cpu_blocked_ns)};
    if (gpu) row.push_back(s.gpu_ns ? format_duration(*s.gpu_ns) : "n/a");
    if (many)
      row.push_back(s.pids.size() > 1 ? fmt::format("{} +{}", s.pid, s.pids.size() - 1)
                                      : std::to_string(s.pid));
    merged |= s.callsites.size() > 1;
    t.add(std::move(row));
  }
  t.render(out, width);
  if (merged)
    wrapped(out,
            "A row sums one line of code over the processes that ran it (\"+N\": N more); each process's own "
            "sites are in --json (callsites, locations) and --csv.",
            width, "  ", "  ");
}

// Innermost first, as captured: Python frames where their interpreter loop
// ran, native frames around them. A location's stack is its largest site's.
void callsite_stacks(std::string& out, const Report& r, size_t top, SiteNumbers& sites) {
  if (r.locations.empty()) return;
  out += "\nCall stacks of those sites (innermost first; \"*\" marks the frame that names the site)\n";
  for (size_t i = 0; i < r.locations.size() && i < top; ++i) {
    const auto& s = r.locations[i];
    out += fmt::format("  #{} {}\n", sites.number(s.id), s.frame.short_display());
    if (s.stacks_differ)
      out += fmt::format("      (pid {}'s; the other processes' stacks to this line differ: see --json)\n",
                         s.pid);
    if (s.stack.empty()) out += "      (no stack captured)\n";
    for (const auto& f : s.stack) {
      const bool chosen = f.address == s.frame.address && f.python == s.frame.python;
      out += fmt::format("    {} {}{}\n", chosen ? '*' : ' ', f.python ? "py  " : "", f.display());
    }
  }
}

void findings(std::string& out, const Report& r, size_t width, SiteNumbers& sites) {
  out += "\nFindings\n";
  // An empty list from a cut trace is no all-clear: say how much was read.
  const analyses::ReadExtent read = analyses::read_extent(r);
  if (read.nothing_read()) {
    wrapped(out,
            fmt::format("unknown: no event could be read ({} of {} trace{} cut short, PARTIAL above)", read.cut,
                        read.traces, read.traces == 1 ? " is" : "s are"),
            width, "  ", "    ");
    return;
  }
  if (read.partial())
    wrapped(out,
            fmt::format("from what could be read only: {} of {} trace{} cut short (PARTIAL above); what the "
                        "processes did after the cut is not in this report",
                        read.cut, read.traces, read.traces == 1 ? " is" : "s are"),
            width, "  ", "    ");
  if (r.findings.empty()) {
    out +=
        "  none: no async copy from pageable memory, no pageable transfer of 1 MiB or more, "
        "no storm of tiny copies\n";
    return;
  }
  if (const auto& c = r.combined_estimate)
    wrapped(out,
            fmt::format("The estimates below overlap (the same copies are listed under several findings): "
                        "added up they make {}; counting each call site once, {} in all",
                        format_duration(c->sum_ns), format_duration(c->recoverable_ns)),
            width, "  ", "  ");
  int n = 0;
  for (const auto& f : r.findings) {
    out += "\n";
    wrapped(out, fmt::format("{}. {} [{}]", ++n, f.title, analyses::finding_kind_name(f.kind)), width, "  ", "     ");
    std::string time_word = f.time_basis == "gpu" ? "GPU time" : "CPU-blocked";
    const char* unit = f.kind == analyses::FindingKind::ManagedMigrations ? "migration" : "call";
    std::string numbers = fmt::format("{} {}{}, {}, {} {}", format_count(f.calls), unit, f.calls == 1 ? "" : "s",
                                      format_bytes(f.bytes),
                                      time_word, format_duration(f.time_ns));
    if (f.kind == analyses::FindingKind::AsyncPageable)
      numbers += fmt::format(" (max {} in one call)", format_duration(f.max_ns));
    if (f.achieved_gbps)
      numbers += fmt::format("; achieved {} GB/s vs {} GB/s pinned", format_gbps(f.achieved_gbps),
                             format_gbps(f.reference_gbps));
    if (f.calls_per_second)
      numbers += fmt::format("; up to {} calls/s from one site",
                             format_count(static_cast<uint64_t>(*f.calls_per_second)));
    wrapped(out, numbers, width, "     ", "     ");
    if (f.estimated_recoverable_ns)
      wrapped(out,
              fmt::format("estimated recoverable time: {}; reference: {}",
                          format_duration(*f.estimated_recoverable_ns), f.reference_source),
              width, "     ", "       ");
    size_t shown = 0;
    for (const auto& s : f.locations) {
      if (shown++ == 5) {
        out += fmt::format("     … and {} more\n", counted(f.locations.size() - 5, "call site", "call sites"));
        break;
      }
      std::string line = fmt::format("{} {}{}, {}, {}", format_count(s.calls), unit, s.calls == 1 ? "" : "s",
                                     format_bytes(s.bytes),
                                     format_duration(s.time_ns));
      if (s.calls_per_second)
        line += fmt::format(", {} calls/s", format_count(static_cast<uint64_t>(*s.calls_per_second)));
      if (s.achieved_gbps) line += fmt::format(", {} GB/s", format_gbps(s.achieved_gbps));
      const std::string where = s.processes > 1
                                    ? fmt::format("{} ({} processes)", sites.label(s.callsite),
                                                  format_count(s.processes))
                                    : sites.label(s.callsite);
      out += fit(fmt::format("     at {}: {}", where, line), width) + "\n";
    }
    wrapped(out, f.advice, width, "     fix: ", "          ");
  }
}

// Copies per NVTX range, nested ranges indented under their outer ones.
void nvtx_ranges(std::string& out, const Report& r, size_t width) {
  if (r.ranges.empty()) return;
  out += "\nNVTX ranges (a range's copies include its nested ranges')\n";
  out += fit(fmt::format("  {:<34} {:>8} {:>10} {:>10} {:>12} {:>10}", "range", "copies", "bytes", "pageable",
                         "CPU-blocked", "GPU time"),
             width) +
         "\n";
  for (const auto& g : r.ranges) {
    const std::string label = std::string(2 * (g.depth - 1), ' ') + g.name;
    out += fit(fmt::format("  {:<34} {:>8} {:>10} {:>10} {:>12} {:>10}", label, format_count(g.calls),
                           format_bytes(g.bytes), format_bytes(g.pageable_bytes), format_duration(g.cpu_blocked_ns),
                           g.gpu_ns ? format_duration(*g.gpu_ns) : std::string("-")),
               width) +
           "\n";
    std::string detail;
    for (const auto& k : g.classes)
      detail += fmt::format("{}{} {} ({})", detail.empty() ? "" : "; ", k.cls, format_bytes(k.bytes), format_count(k.calls));
    if (g.classes.size() > 1) wrapped(out, detail, width, std::string(4 + 2 * (g.depth - 1), ' '), std::string(6 + 2 * (g.depth - 1), ' '));
    std::string found;
    for (const auto& f : g.findings)
      found += fmt::format("{}{} ({})", found.empty() ? "" : ", ", f.kind, counted(f.calls, "copy", "copies"));
    if (!found.empty())
      wrapped(out, "findings: " + found, width, std::string(4 + 2 * (g.depth - 1), ' '), std::string(6 + 2 * (g.depth - 1), ' '));
  }
}

// "rank 17", "ranks 0–999 except 17 and 300", "ranks 3, 8–11 and 40": a set of
// ranks (or pids) in one phrase, at most `most` pieces before "… (N in all)".
// `all`: every id of the job, ascending, for "except".
std::string id_set(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& all, const char* one,
                   const char* many, size_t most = 8) {
  if (ids.empty()) return "";
  if (ids.size() == 1) return fmt::format("{} {}", one, ids.front());
  // "a, b and c"; cut short: "a, b, … (N ranks in all)".
  auto join = [&](const std::vector<std::string>& parts, bool cut) {
    std::string s;
    for (size_t i = 0; i < parts.size(); ++i)
      s += (i == 0 ? "" : i + 1 == parts.size() && !cut ? " and " : ", ") + parts[i];
    if (cut) s += fmt::format(", … ({} {} in all)", format_count(ids.size()), many);
    return s;
  };
  // Most of the job: name the few it lacks.
  std::vector<uint32_t> missing;
  for (uint32_t id : all)
    if (!std::binary_search(ids.begin(), ids.end(), id)) missing.push_back(id);
  if (missing.size() <= most && ids.size() > 2 * missing.size() && ids.size() + missing.size() == all.size()) {
    std::string s = fmt::format("{} {}–{}", many, all.front(), all.back());
    if (missing.empty()) return s;
    std::vector<std::string> parts;
    for (uint32_t id : missing) parts.push_back(std::to_string(id));
    return s + " except " + join(parts, false);
  }
  std::vector<std::string> parts;
  size_t runs = 0;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (parts.size() < most)
      parts.push_back(j == i ? std::to_string(ids[i]) : fmt::format("{}–{}", ids[i], ids[j]));
    ++runs;
    i = j + 1;
  }
  return std::string(many) + " " + join(parts, parts.size() < runs);
}

// Many ranks: the distribution of each number, the ranks far from the median
// and why, the ranks grouped by pattern, and the sites and findings over the
// ranks. Each rank's own line is in --json (ranks).
void ranks_at_scale(std::string& out, const Report& r, size_t width, SiteNumbers& sites) {
  const analyses::Ranks& k = r.ranks;
  const analyses::RankDigest d = analyses::digest_ranks(k.ranks);
  std::vector<uint32_t> all;
  std::vector<std::string> hosts;
  for (const auto& x : k.ranks) {
    all.push_back(x.rank);
    hosts.push_back(x.host);
  }
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  out += fmt::format("\nRanks ({} on {}; each rank's numbers: --json ranks)\n", format_count(k.ranks.size()),
                     counted(hosts.size(), "host", "hosts"));
  Table t({"per rank", "min", "median", "p95", "max", "largest", "max/median"},
          {false, false, false, false, false, false, true});
  t.add(distribution_row("copies", d.copies, format_count, "rank"));
  t.add(distribution_row("bytes", d.bytes, format_bytes, "rank"));
  t.add(distribution_row("pageable", d.pageable, format_bytes, "rank"));
  t.add(distribution_row("CPU-blocked", d.cpu_blocked, format_duration, "rank"));
  if (d.gpu) t.add(distribution_row("GPU time", *d.gpu, format_duration, "rank"));
  t.render(out, width);

  // Outliers, one line per rank (its metrics farthest first).
  std::vector<uint32_t> order;
  for (const auto& o : d.outliers)
    if (std::find(order.begin(), order.end(), o.rank) == order.end()) order.push_back(o.rank);
  if (order.empty()) {
    out += "  outliers: none (every rank within half to twice the median of each number)\n";
  } else {
    constexpr size_t kShown = 10;
    out += fmt::format("  outliers ({} beyond twice or under half the median):\n",
                       counted(order.size(), "rank", "ranks"));
    auto amount = [](const std::string& metric, uint64_t v) {
      return metric == "copies" ? format_count(v) : metric == "CPU-blocked" ? format_duration(v) : format_bytes(v);
    };
    for (size_t i = 0; i < order.size() && i < kShown; ++i) {
      std::string line;
      std::vector<std::string> findings;
      for (const auto& o : d.outliers) {
        if (o.rank != order[i]) continue;
        line += fmt::format("{}{} {}, {}{}", line.empty() ? "" : "; ", o.metric, amount(o.metric, o.value),
                            ratio_to(o.value, o.median),
                            o.cls.empty() ? std::string()
                                          : fmt::format(", mostly {} ({} vs {})", o.cls,
                                                        amount(o.metric, o.cls_value), amount(o.metric, o.cls_median)));
        for (const auto& f : o.findings)
          if (std::find(findings.begin(), findings.end(), f) == findings.end()) findings.push_back(f);
      }
      if (!findings.empty()) {
        std::string f;
        for (const auto& x : findings) f += (f.empty() ? "" : ", ") + x;
        line += "; over 2x in " + f;
      }
      wrapped(out, line, width, fmt::format("    rank {}: ", order[i]), "      ");
    }
    if (order.size() > kShown)
      out += fmt::format("    … and {} more (--json ranks)\n", counted(order.size() - kShown, "rank", "ranks"));
  }

  // Patterns: the largest in full, the others by how they differ from it.
  auto by_number = [&](std::vector<uint32_t> ids) {
    std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return sites.number(a) < sites.number(b); });
    return ids;
  };
  auto site_names = [&](const std::vector<uint32_t>& ids) {
    std::string s;
    for (uint32_t id : by_number(ids)) s += (s.empty() ? "" : ", ") + sites.label(id);
    return s;
  };
  auto words = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  out += fmt::format("  patterns ({}: the call sites, classes and findings a rank has):\n",
                     format_count(d.patterns.size()));
  const analyses::RankPattern& base = d.patterns.front();
  constexpr size_t kPatternsShown = 8;
  for (size_t i = 0; i < d.patterns.size() && i < kPatternsShown; ++i) {
    const analyses::RankPattern& p = d.patterns[i];
    const std::string who = id_set(p.ranks, all, "rank", "ranks");
    std::string what;
    if (i == 0) {
      what = fmt::format("the same {}{}; {}{}", counted(p.sites.size(), "site", "sites"),
                         p.sites.empty() ? "" : " (" + site_names(p.sites) + ")", words(p.classes),
                         p.findings.empty() ? "; no finding" : "; findings " + words(p.findings));
    } else {
      auto diff = [](const auto& a, const auto& b) {  // in a, not in b
        std::decay_t<decltype(a)> out;
        for (const auto& x : a)
          if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
        return out;
      };
      std::vector<std::string> parts;
      if (auto v = diff(p.sites, base.sites); !v.empty()) parts.push_back("also " + site_names(v));
      if (auto v = diff(base.sites, p.sites); !v.empty()) parts.push_back("not " + site_names(v));
      if (auto v = diff(p.classes, base.classes); !v.empty()) parts.push_back("also " + words(v));
      if (auto v = diff(base.classes, p.classes); !v.empty()) parts.push_back("no " + words(v));
      if (auto v = diff(p.findings, base.findings); !v.empty()) parts.push_back("also finding " + words(v));
      if (auto v = diff(base.findings, p.findings); !v.empty()) parts.push_back("without finding " + words(v));
      what = "as the first, " + words(parts);
    }
    wrapped(out, fmt::format("{}{}: {}", who, p.ranks.size() > 1 && i > 0 ? fmt::format(" ({})", p.ranks.size()) : "",
                             what),
            width, "    ", "      ");
  }
  if (d.patterns.size() > kPatternsShown)
    out += fmt::format("    … and {} more\n", counted(d.patterns.size() - kPatternsShown, "pattern", "patterns"));

  // Sites and findings over the ranks: how many ranks have each.
  std::vector<const analyses::AcrossRanks*> site_order;
  for (const auto& a : d.sites) site_order.push_back(&a);
  std::stable_sort(site_order.begin(), site_order.end(), [&](const auto* a, const auto* b) {
    return sites.number(a->site) < sites.number(b->site);
  });
  std::string line;
  for (const analyses::AcrossRanks* a : site_order)
    line += fmt::format("{}{} {}", line.empty() ? "" : "; ", sites.label(a->site),
                        a->ranks.size() == all.size() ? "every rank"
                        : a->ranks.size() <= 3        ? id_set(a->ranks, all, "rank", "ranks")
                                                      : counted(a->ranks.size(), "rank", "ranks"));
  if (!line.empty()) wrapped(out, line, width, "  sites: ", "    ");
  for (const auto& a : d.findings)
    wrapped(out,
            fmt::format("{}: {}, {}; a rank's median {}, most {} (rank {})", a.finding,
                        a.ranks.size() == all.size() ? std::string("every rank")
                                                     : id_set(a.ranks, all, "rank", "ranks", 4),
                        format_duration(a.time_ns), format_duration(a.time_per_rank.median),
                        format_duration(a.time_per_rank.max), a.time_per_rank.max_id),
            width, "  finding ", "    ");
  if (k.unranked_processes)
    out += fmt::format("  {} without a rank (not counted above)\n",
                       counted(k.unranked_processes, "process", "processes"));
}

// Per rank and the spread across ranks; only for a job of two ranks or more.
void ranks(std::string& out, const Report& r, size_t width, SiteNumbers& sites) {
  const analyses::Ranks& k = r.ranks;
  if (k.ranks.empty() || !k.spread) return;
  if (k.ranks.size() > analyses::kPerRankLayoutMax) return ranks_at_scale(out, r, width, sites);
  out += fmt::format("\nRanks ({})\n", k.ranks.size());
  Table t({"rank", "host", "copies", "bytes", "pageable", "CPU-blocked", "GPU time"},
          {false, true, false, false, false, false, true});
  for (const auto& x : k.ranks)
    t.add({std::to_string(x.rank), x.host, format_count(x.copies), format_bytes(x.bytes),
           format_bytes(x.pageable_bytes), format_duration(x.cpu_blocked_ns),
           x.gpu_ns ? format_duration(*x.gpu_ns) : "n/a"});
  t.render(out, width);
  const analyses::RankSpread& s = *k.spread;
  auto ratio = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.2f}x the median", *v) : std::string("median 0");
  };
  wrapped(out, fmt::format("most bytes: rank {} ({}, {})", s.most_bytes_rank, format_bytes(s.most_bytes),
                           ratio(s.bytes_imbalance)),
          width, "  ", "    ");
  wrapped(out, fmt::format("most through pageable memory: rank {} ({}, {})", s.most_pageable_rank,
                           format_bytes(s.most_pageable_bytes), ratio(s.pageable_imbalance)),
          width, "  ", "    ");
  wrapped(out, fmt::format("slowest (most CPU-blocked time in copies): rank {} ({}, {})", s.slowest_rank,
                           format_duration(s.slowest_cpu_blocked_ns), ratio(s.cpu_blocked_imbalance)),
          width, "  ", "    ");
  for (const auto& x : k.ranks) {
    std::string line;
    for (const auto& c : x.classes)
      line += fmt::format("{}{} {} cop{} {}", line.empty() ? "" : "; ", c.cls, format_count(c.calls),
                          c.calls == 1 ? "y" : "ies", format_bytes(c.bytes));
    std::string f;
    for (const auto& fi : x.findings)
      f += fmt::format("{}{} ({} cop{}, {})", f.empty() ? "" : ", ", fi.kind, format_count(fi.calls),
                       fi.calls == 1 ? "y" : "ies", format_duration(fi.time_ns));
    if (!f.empty()) line += "; findings: " + f;
    wrapped(out, line.empty() ? "no copies" : line, width, fmt::format("  rank {}: ", x.rank), "    ");
  }
  if (k.unranked_processes)
    out += fmt::format("  {} without a rank (not counted above)\n",
                       counted(k.unranked_processes, "process", "processes"));
}

// The shim's notes that every process of a job wrote alike (the interpreter
// read, CUPTI's state, the rewrite's settings): a job of eight ranks said
// each eight times. Said once, first; each process keeps its own.
std::vector<std::string> notes_of_every_process(const Report& r) {
  std::vector<std::string> shared;
  if (r.processes.size() < 2) return shared;
  for (const auto& n : r.processes.front().notes)
    if (std::all_of(r.processes.begin() + 1, r.processes.end(),
                    [&](const analyses::ProcessSummary& p) {
                      return std::find(p.notes.begin(), p.notes.end(), n) != p.notes.end();
                    }) &&
        std::find(shared.begin(), shared.end(), n) == shared.end())
      shared.push_back(n);
  return shared;
}

// A note with its numbers masked ("rank: N launcher=torchrun ... world_size=N"):
// the notes of many processes that differ only in their numbers are one.
std::string masked(const std::string& note) {
  std::string out;
  for (size_t i = 0; i < note.size();) {
    if (std::isdigit(static_cast<unsigned char>(note[i])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(note[i - 1])))) {
      size_t j = i;
      while (j < note.size() && std::isdigit(static_cast<unsigned char>(note[j]))) ++j;
      if (j == note.size() || !std::isalpha(static_cast<unsigned char>(note[j]))) {
        out += 'N';
        i = j;
        continue;
      }
    }
    out += note[i++];
  }
  return out;
}

// What a process of many keeps its own line for: it is cut short, dropped
// events, or lost CUPTI to the application's profiler.
bool stands_out(const analyses::ProcessSummary& p) {
  return !p.complete || p.events_dropped || p.gpu_records_dropped || p.cupti_handover_s >= 0;
}

// Many processes: their states counted, the distribution of their numbers,
// their programs and the notes they wrote (alike up to numbers, counted);
// the processes that stand out keep their own lines after this.
void processes_at_scale(std::string& out, const Report& r, size_t width, const std::vector<std::string>& shared) {
  std::map<std::string, size_t> states, programs, notes;
  std::vector<std::pair<uint64_t, uint32_t>> events, copies, bytes, blocked;
  size_t complete = 0;
  for (const auto& p : r.processes) {
    complete += p.complete;
    ++states["CUPTI " + p.cupti_state + (p.cupti_reason.empty() ? "" : " (" + p.cupti_reason + ")")];
    ++programs[p.exe.empty() ? "?" : p.exe];
    events.push_back({p.events, p.pid});
    copies.push_back({p.copies, p.pid});
    bytes.push_back({p.bytes, p.pid});
    blocked.push_back({p.cpu_blocked_ns, p.pid});
    std::set<std::string> mine;
    for (const auto& n : p.notes)
      if (std::find(shared.begin(), shared.end(), n) == shared.end() && !repeats_cupti_state(n, p))
        mine.insert(masked(n));
    for (const auto& n : mine) ++notes[n];
  }
  const size_t n = r.processes.size();
  std::string state = complete == n ? fmt::format("all {} complete", format_count(n))
                                    : fmt::format("{} of {} complete ({} PARTIAL, below)", format_count(complete),
                                                  format_count(n), format_count(n - complete));
  for (const auto& [s, count] : states)
    state += fmt::format("; {} {}", count == n ? std::string("all") : format_count(count), s);
  wrapped(out, state, width, "  ", "    ");
  Table t({"per process", "min", "median", "p95", "max", "largest", "max/median"},
          {false, false, false, false, false, false, true});
  t.add(distribution_row("events", analyses::distribution_of(events), format_count, "pid"));
  // One process a rank: the Ranks section has its copies, bytes and time.
  const bool as_ranks = r.ranks.ranks.size() == n && r.ranks.unranked_processes == 0;
  if (!as_ranks) {
    t.add(distribution_row("copies", analyses::distribution_of(copies), format_count, "pid"));
    t.add(distribution_row("bytes", analyses::distribution_of(bytes), format_bytes, "pid"));
    t.add(distribution_row("CPU-blocked", analyses::distribution_of(blocked), format_duration, "pid"));
  }
  t.render(out, width);
  if (as_ranks) out += "  copies, bytes and CPU-blocked time: as the Ranks above (one process a rank)\n";
  std::string progs;
  for (const auto& [exe, count] : programs) progs += fmt::format("{}{} ({})", progs.empty() ? "" : ", ", exe, format_count(count));
  wrapped(out, progs, width, "  programs: ", "    ");
  constexpr size_t kNotesShown = 8;
  std::vector<std::pair<std::string, size_t>> by_count(notes.begin(), notes.end());
  std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < by_count.size() && i < kNotesShown; ++i)
    wrapped(out, fmt::format("{} ({})", by_count[i].first, counted(by_count[i].second, "process", "processes")),
            width, "  shim: ", "    ");
  if (by_count.size() > kNotesShown)
    out += fmt::format("  … and {} more (--json processes)\n",
                       counted(by_count.size() - kNotesShown, "kind of note", "kinds of note"));
  out += "  each process's line, trace and notes: --json processes\n";
}

void processes(std::string& out, const Report& r, size_t width) {
  out += "\nProcesses\n";
  const std::string said_above = cpu_timing_reason(r);
  // A note every process wrote is said once; the shim's CUPTI note not at
  // all, since the header or the process's line says the same.
  auto said_elsewhere = [&](const std::string& note) {
    return std::all_of(r.processes.begin(), r.processes.end(),
                       [&](const analyses::ProcessSummary& p) { return repeats_cupti_state(note, p); });
  };
  std::vector<std::string> shared = notes_of_every_process(r);
  shared.erase(std::remove_if(shared.begin(), shared.end(), said_elsewhere), shared.end());
  if (!shared.empty()) {
    out += fmt::format("  every process ({}):\n", format_count(r.processes.size()));
    for (const auto& note : shared) wrapped(out, note, width, "      shim: ", "        ");
  }
  const bool at_scale = r.processes.size() > analyses::kPerRankLayoutMax;
  if (at_scale) processes_at_scale(out, r, width, shared);
  for (const auto& p : r.processes) {
    if (at_scale && !stands_out(p)) continue;
    std::string state = p.complete ? "complete" : "PARTIAL";
    std::string cupti =
        p.cupti_handover_s >= 0
            ? fmt::format(", CUPTI active until +{:.3f} s, then handed to the application's profiler ({}): "
                          "CPU timing after that",
                          p.cupti_handover_s, p.cupti_handover_reason)
        : cupti_said_above(p, said_above)
            ? std::string()
            : ", CUPTI " + p.cupti_state + (p.cupti_reason.empty() ? "" : " (" + p.cupti_reason + ")");
    const std::string dropped =
        p.events_dropped ? fmt::format(" ({} dropped)", format_count(p.events_dropped)) : std::string();
    wrapped(out,
            fmt::format("pid {} (parent {}) {}: {}{}, {}{}, {}, {}, CPU-blocked {}; trace {}", p.pid, p.ppid,
                        p.exe.empty() ? "?" : p.exe, state, cupti, counted(p.events, "event", "events"), dropped,
                        counted(p.copies, "copy", "copies"), format_bytes(p.bytes),
                        format_duration(p.cpu_blocked_ns), p.trace_path),
            width, "  ", "      ");
    if (const auto& g = p.cupti_gate; g.governed)
      wrapped(out,
              fmt::format("GPU time: {} of {} copies and memsets. CUPTI's copy records were on {:.1f} % of the time "
                          "(--cupti=auto: off for synchronous copies, whose CPU-blocked time bounds their DMA, "
                          "for asynchronous copies from call sites they have already timed, and where they would "
                          "cost over 1 %; {}); records off: {} synchronous, {} asynchronous{}. "
                          "--cupti=on times every copy",
                          format_count(g.timed), format_count(g.calls),
                          100.0 * g.on_share, counted(g.samples, "sample window", "sample windows"),
                          format_count(g.untimed_sync),
                          format_count(g.untimed_async),
                          g.untimed_repeats > 0
                              ? fmt::format(" ({} from call sites already timed)", format_count(g.untimed_repeats))
                              : std::string()),
              width, "      ", "        ");
    for (const auto& note : p.notes)
      if (std::find(shared.begin(), shared.end(), note) == shared.end() && !repeats_cupti_state(note, p))
        wrapped(out, note, width, "      shim: ", "        ");
  }
}

}  // namespace

std::string render_text(const Report& r, const TextOptions& o) {
  const size_t width = std::max<size_t>(o.width, 40);
  std::string out;
  SiteNumbers sites(r);
  header(out, r, width);
  transfers(out, r, width);
  rewrite(out, r, width);
  overlap(out, r, width);
  managed(out, r, width, sites);
  devices(out, r, width);
  peer_pairs(out, r, width);
  apis(out, r, width);
  callsites(out, r, width, o.top_sites, sites);
  if (o.stacks) callsite_stacks(out, r, o.top_sites, sites);
  findings(out, r, width, sites);
  nvtx_ranges(out, r, width);
  ranks(out, r, width, sites);
  processes(out, r, width);
  if (!r.notes.empty()) {
    out += "\nNotes\n";
    for (const auto& n : r.notes) wrapped(out, n, width, "  - ", "    ");
  }
  return out;
}

}  // namespace cuxfer::render
