#include "analyzer/render/diff_renderer.h"

#include <algorithm>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/text/units.h"

namespace cuxfer::render {

using namespace text;  // number and width formatting (analyzer/text/units.h)

using analyses::Diff;
using analyses::DiffRun;
using analyses::DiffSide;
using analyses::DiffSite;
using nlohmann::json;

std::string format_signed_duration(int64_t ns) {
  if (ns == 0) return "0 ns";
  uint64_t mag = ns < 0 ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::string out(ns < 0 ? "-" : "+");
  out += format_duration(mag);
  return out;
}

std::string format_ratio(uint64_t base, uint64_t now) {
  if (base == 0) return "n/a";
  return fmt::format("{:.2f}x", static_cast<double>(now) / static_cast<double>(base));
}

namespace {

std::string signed_bytes(uint64_t base, uint64_t now) {
  if (base == now) return "0 B";
  std::string out(now > base ? "+" : "-");
  out += format_bytes(now > base ? now - base : base - now);
  return out;
}

std::string signed_count(uint64_t base, uint64_t now) {
  if (base == now) return "0";
  std::string out(now > base ? "+" : "-");
  out += format_count(now > base ? now - base : base - now);
  return out;
}

int64_t delta(uint64_t base, uint64_t now) { return static_cast<int64_t>(now) - static_cast<int64_t>(base); }

std::string row(const std::string& label, const std::string& b, const std::string& n, const std::string& d,
                const std::string& r) {
  return fmt::format("  {:<26} {:>12} {:>12} {:>12} {:>8}\n", label, b, n, d, r);
}

std::string run_line(const char* name, const DiffRun& r) {
  std::string paths;
  for (size_t i = 0; i < r.traces.size() && i < 3; ++i) paths += (i ? ", " : "") + r.traces[i];
  if (r.traces.size() > 3) paths += fmt::format(", +{} more", r.traces.size() - 3);
  return fmt::format("{}: {} process{}{}{}", name, r.processes, r.processes == 1 ? "" : "es",
                     r.rewrite ? ", rewrite=pin" : "", paths.empty() ? "" : " (" + paths + ")");
}

json class_json(const analyses::DiffClassCount& k) {
  return json{{"class", analyses::class_name(k.cls)}, {"calls", k.calls}, {"bytes", k.bytes}};
}

json side_json(const DiffSide& s) {
  json classes = json::array();
  for (const auto& k : s.classes) classes.push_back(class_json(k));
  return json{{"calls", s.calls},
              {"copy_bytes", s.copy_bytes},
              {"staged_calls", s.staged_calls},
              {"staged_bytes", s.staged_bytes},
              {"cpu_blocked_ns", s.cpu_blocked_ns},
              {"gpu_ns", s.gpu_ns ? json(*s.gpu_ns) : json(nullptr)},
              {"failed_calls", s.failed_calls},
              {"classes", classes}};
}

json ratio_json(uint64_t base, uint64_t now) {
  return base ? json(static_cast<double>(now) / static_cast<double>(base)) : json(nullptr);
}

json delta_json(const DiffSide& b, const DiffSide& n) {
  json d{{"calls", delta(b.calls, n.calls)},
         {"copy_bytes", delta(b.copy_bytes, n.copy_bytes)},
         {"staged_bytes", delta(b.staged_bytes, n.staged_bytes)},
         {"cpu_blocked_ns", delta(b.cpu_blocked_ns, n.cpu_blocked_ns)},
         {"gpu_ns", b.gpu_ns && n.gpu_ns ? json(delta(*b.gpu_ns, *n.gpu_ns)) : json(nullptr)}};
  return d;
}

json ratios_json(const DiffSide& b, const DiffSide& n) {
  return json{{"copy_bytes", ratio_json(b.copy_bytes, n.copy_bytes)},
              {"cpu_blocked_ns", ratio_json(b.cpu_blocked_ns, n.cpu_blocked_ns)},
              {"gpu_ns", b.gpu_ns && n.gpu_ns ? ratio_json(*b.gpu_ns, *n.gpu_ns) : json(nullptr)}};
}

}  // namespace

json diff_to_json(const Diff& d) {
  auto run = [](const DiffRun& r) {
    json j{{"traces", r.traces}, {"processes", r.processes}, {"wall_ns", r.wall_ns}, {"rewrite", r.rewrite}};
    j["totals"] = side_json(r.totals);
    return j;
  };
  json j;
  j["schema"] = d.schema;
  j["base"] = run(d.base);
  j["new"] = run(d.now);
  j["same_work"] = d.same_work;
  json differing = json::array(), only_base = json::array(), only_new = json::array(), sites = json::array();
  for (const auto& s : d.sites) {
    if (!s.same_work) differing.push_back(json{{"site", s.key}, {"difference", s.difference}});
    if (s.in_base && !s.in_new) only_base.push_back(s.key);
    if (s.in_new && !s.in_base) only_new.push_back(s.key);
    sites.push_back(json{{"site", s.key},
                         {"display", s.display},
                         {"in_base", s.in_base},
                         {"in_new", s.in_new},
                         {"same_work", s.same_work},
                         {"base", side_json(s.base)},
                         {"new", side_json(s.now)},
                         {"delta", delta_json(s.base, s.now)},
                         {"ratio", ratios_json(s.base, s.now)},
                         {"time_recovered_ns", s.time_recovered_ns()}});
  }
  j["differing_sites"] = differing;
  j["only_in_base"] = only_base;
  j["only_in_new"] = only_new;
  json totals{{"delta", delta_json(d.base.totals, d.now.totals)},
              {"ratio", ratios_json(d.base.totals, d.now.totals)}};
  totals["delta"]["wall_ns"] = delta(d.base.wall_ns, d.now.wall_ns);
  totals["ratio"]["wall_ns"] = ratio_json(d.base.wall_ns, d.now.wall_ns);
  j["totals"] = totals;
  j["time_recovered_ns"] = d.time_recovered_ns();
  j["time_recovered_basis"] = "measured: base minus new CPU-blocked time";
  j["sites"] = sites;
  j["notes"] = d.notes;
  return j;
}

std::string render_diff_json(const Diff& d) { return diff_to_json(d).dump(2) + "\n"; }

std::string render_diff_text(const Diff& d, const DiffTextOptions& o) {
  const size_t width = std::max<size_t>(o.width, 60);
  std::string out = "cuxfer diff\n";
  out += "  " + fit(run_line("base", d.base), width - 2) + "\n";
  out += "  " + fit(run_line("new ", d.now), width - 2) + "\n\n";

  size_t differing = 0;
  for (const auto& s : d.sites) differing += !s.same_work;
  if (d.same_work) {
    out += "Same work: yes (every call site made the same copies, calls and bytes per class, in both runs)\n\n";
  } else {
    out += fmt::format("!! NOT THE SAME WORK: {} call site{} made different copies; times do not compare like "
                       "for like\n",
                       differing, differing == 1 ? "" : "s");
    size_t shown = 0;
    for (const auto& s : d.sites) {
      if (s.same_work) continue;
      if (shown++ == o.max_differing) {
        out += fmt::format("   ... and {} more (--json lists all)\n", differing - o.max_differing);
        break;
      }
      out += "   ! " + fit(s.label + ": " + s.difference, width - 5) + "\n";
    }
    out += "\n";
  }

  const DiffSide &b = d.base.totals, &n = d.now.totals;
  out += row("Totals", "base", "new", "delta", "new/base");
  out += row("copies", format_count(b.calls), format_count(n.calls), signed_count(b.calls, n.calls),
             format_ratio(b.calls, n.calls));
  out += row("bytes moved by DMA", format_bytes(b.copy_bytes), format_bytes(n.copy_bytes),
             signed_bytes(b.copy_bytes, n.copy_bytes), format_ratio(b.copy_bytes, n.copy_bytes));
  out += row("bytes staged on the CPU", format_bytes(b.staged_bytes), format_bytes(n.staged_bytes),
             signed_bytes(b.staged_bytes, n.staged_bytes), format_ratio(b.staged_bytes, n.staged_bytes));
  out += row("CPU-blocked time", format_duration(b.cpu_blocked_ns), format_duration(n.cpu_blocked_ns),
             format_signed_duration(delta(b.cpu_blocked_ns, n.cpu_blocked_ns)),
             format_ratio(b.cpu_blocked_ns, n.cpu_blocked_ns));
  if (b.gpu_ns && n.gpu_ns)
    out += row("GPU time", format_duration(*b.gpu_ns), format_duration(*n.gpu_ns),
               format_signed_duration(delta(*b.gpu_ns, *n.gpu_ns)), format_ratio(*b.gpu_ns, *n.gpu_ns));
  else
    out += row("GPU time", b.gpu_ns ? format_duration(*b.gpu_ns) : "n/a",
               n.gpu_ns ? format_duration(*n.gpu_ns) : "n/a", "n/a", "n/a");
  out += row("wall time (traced span)", format_duration(d.base.wall_ns), format_duration(d.now.wall_ns),
             format_signed_duration(delta(d.base.wall_ns, d.now.wall_ns)),
             format_ratio(d.base.wall_ns, d.now.wall_ns));
  out += "\n";
  for (const auto& line :
       wrap(fmt::format("Time recovered: {} (base minus new CPU-blocked time; measured, not estimated){}",
                        format_signed_duration(d.time_recovered_ns()),
                        n.staged_bytes ? fmt::format(". Staging copied {} once more on the CPU.",
                                                     format_bytes(n.staged_bytes))
                                       : ""),
                  width))
    out += line + "\n";

  // Matched call sites.
  const size_t fixed = 8 + 1 + 10 + 1 + 10 + 1 + 10 + 1 + 10 + 1 + 10;
  const size_t name_w = width > fixed + 2 + 16 ? width - fixed - 2 - 1 : 16;
  std::string sites;
  size_t shown = 0, matched = 0;
  for (const auto& s : d.sites) {
    if (!(s.in_base && s.in_new)) continue;
    ++matched;
    if (shown >= o.top_sites) continue;
    ++shown;
    sites += fmt::format("  {:<{}} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", fit(s.label, name_w), name_w,
                         format_count(s.now.calls), format_bytes(s.now.copy_bytes),
                         format_bytes(s.now.staged_bytes), format_duration(s.base.cpu_blocked_ns),
                         format_duration(s.now.cpu_blocked_ns), format_signed_duration(s.time_recovered_ns()));
  }
  if (matched) {
    out += fmt::format("\nCall sites in both runs ({}; most time recovered first)\n", matched);
    out += fmt::format("  {:<{}} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "site", name_w, "copies", "bytes",
                       "staged", "CPU base", "CPU new", "recovered");
    out += sites;
    if (matched > shown) out += fmt::format("  ... {} more (--top, --json)\n", matched - shown);
  }
  for (int which = 0; which < 2; ++which) {
    std::vector<const DiffSite*> only;
    for (const auto& s : d.sites)
      if (which == 0 ? (s.in_base && !s.in_new) : (s.in_new && !s.in_base)) only.push_back(&s);
    if (only.empty()) continue;
    out += fmt::format("\nCall sites only in {} ({})\n", which == 0 ? "base" : "new", only.size());
    for (const DiffSite* s : only) {
      const DiffSide& side = which == 0 ? s->base : s->now;
      out += "  " +
             fit(fmt::format("{}: {} copies, {}, {}", s->label, format_count(side.calls),
                             format_bytes(side.copy_bytes), format_duration(side.cpu_blocked_ns)),
                 width - 2) +
             "\n";
    }
  }
  if (!d.notes.empty()) {
    out += "\nNotes\n";
    for (const auto& note : d.notes)
      for (const auto& line : wrap("- " + note, width - 2)) out += "  " + line + "\n";
  }
  return out;
}

}  // namespace cuxfer::render
