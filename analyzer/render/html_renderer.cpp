#include "analyzer/render/html_renderer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "analyzer/analyses/tally.h"
#include "analyzer/render/markup.h"
#include "analyzer/text/units.h"

namespace cuxfer::render {

using namespace text;  // number and width formatting (analyzer/text/units.h)
namespace {

using trace::Direction;
using trace::MemKind;

std::string esc(std::string_view s) { return markup_escaped(s); }

// A page of the user docs the report cites: a link to it where the docs are
// installed, else its name.
std::string doc_citation(const std::string& docs_url, std::string_view page, std::string_view anchor) {
  const std::string name = "docs/" + std::string(page);
  if (docs_url.empty()) return esc(name);
  std::string href = docs_url + std::string(page);
  if (!anchor.empty()) href += "#" + std::string(anchor);
  return "<a href='" + esc(href) + "'>" + esc(name) + "</a>";
}

std::string class_name(const model::TransferClass& c) {
  return std::string(trace::to_string(c.direction)) + " " + trace::to_string(c.memory);
}

// One colour per class, stable across plots: pageable warm, pinned cool.
std::string class_color(const model::TransferClass& c) {
  const bool h2d = c.direction == Direction::HtoD;
  switch (c.memory) {
    case MemKind::Pageable: return h2d ? "#d62728" : "#ff7f0e";
    case MemKind::Pinned: return h2d ? "#1f77b4" : "#17becf";
    case MemKind::Registered: return h2d ? "#9467bd" : "#c39bd3";
    case MemKind::Managed: return "#8c564b";
    case MemKind::Device: return "#7f7f7f";
    default: return "#bcbd22";
  }
}

// A logarithmic axis mapping [lo, hi] onto pixels [p0, p1].
struct LogAxis {
  double lo, hi, p0, p1;
  double at(double v) const {
    v = std::clamp(v, lo, hi);
    return p0 + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (p1 - p0);
  }
};

const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 4px} .sub{color:#666} .sim{background:#fff3cd;border:1px solid #e0c060;padding:6px 10px;margin:10px 0;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0} .card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:18px} table{border-collapse:collapse;width:100%;margin:6px 0 12px}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top} th{background:#f6f6f6;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums} .finding{border-left:4px solid #d62728;padding:2px 12px;margin:12px 0;background:#fcfcfc}
.advice{color:#333} .est{color:#a33;font-weight:600} svg text{font:11px system-ui,sans-serif;fill:#333} .legend{font-size:12px}
code{font:12px ui-monospace,monospace;background:#f4f4f4;padding:0 3px}
)";

// Achieved bandwidth against size, per class, with the pinned ceiling.
void bandwidth_plot(std::string& out, const analyses::BandwidthTally& bandwidth, const model::MachineProfile* profile,
                    const analyses::Thresholds& nominal) {
  const std::vector<analyses::BandwidthTally::Series> series = bandwidth.series();
  const uint64_t min_b = bandwidth.min_bytes, max_b = bandwidth.max_bytes;
  const double min_g = bandwidth.min_gbps;
  double max_g = bandwidth.max_gbps;
  if (series.empty()) {
    out += "<p class='sub'>No copy in these traces has a time that measures its transfer (GPU timing off and "
           "every copy asynchronous): nothing to plot.</p>\n";
    return;
  }
  const double ceiling = profile ? std::max(profile->pinned_gbps(0, max_b), profile->pinned_gbps(1, max_b))
                                 : nominal.nominal_pinned_gbps;
  max_g = std::max(max_g, ceiling);
  const int W = 1000, H = 430, L = 70, R = 210, T = 16, B = 46;
  // One power of two of margin on each side, so that a run with one size still has a plot.
  const double xlo = std::exp2(std::floor(std::log2(static_cast<double>(min_b))) - 1),
               xhi = std::exp2(std::ceil(std::log2(static_cast<double>(max_b)) + 0.01) + 1);
  const double ylo = std::pow(10, std::floor(std::log10(std::max(min_g, 1e-6)))),
               yhi = std::pow(10, std::ceil(std::log10(max_g * 1.05)));
  LogAxis x{xlo, xhi, double(L), double(W - R)}, y{ylo, yhi, double(H - B), double(T)};
  out += fmt::format("<svg width='{}' height='{}' viewBox='0 0 {} {}' role='img' aria-label='bandwidth against size'>\n", W,
                     H, W, H);
  out += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='#fff' stroke='#ccc'/>\n", L, T, W - R - L, H - B - T);
  for (double v = xlo; v <= xhi * 1.001; v *= 4) {
    const double px = x.at(v);
    out += fmt::format("<line x1='{0:.1f}' x2='{0:.1f}' y1='{1}' y2='{2}' stroke='#eee'/><text x='{0:.1f}' y='{3}' "
                       "text-anchor='middle'>{4}</text>\n",
                       px, T, H - B, H - B + 16, esc(format_bytes(static_cast<uint64_t>(v))));
  }
  for (double v = ylo; v <= yhi * 1.001; v *= 10) {
    const double py = y.at(v);
    out += fmt::format("<line x1='{0}' x2='{1}' y1='{2:.1f}' y2='{2:.1f}' stroke='#eee'/><text x='{3}' y='{4:.1f}' "
                       "text-anchor='end'>{5}</text>\n",
                       L, W - R, py, L - 6, py + 4, fmt::format("{:g}", v));
  }
  out += fmt::format("<text x='{}' y='{}' text-anchor='middle'>transfer size</text>", (L + W - R) / 2, H - 8);
  out += fmt::format("<text transform='translate(16,{}) rotate(-90)' text-anchor='middle'>achieved GB/s (log)</text>\n",
                     (T + H - B) / 2);
  // The pinned ceiling: the machine's curve per direction, or the nominal line.
  int legend_y = T + 14;
  auto legend = [&](const std::string& color, const std::string& label, bool dashed) {
    out += fmt::format("<line x1='{0}' x2='{1}' y1='{2}' y2='{2}' stroke='{3}' stroke-width='2'{4}/><text class='legend' "
                       "x='{5}' y='{6}'>{7}</text>\n",
                       W - R + 12, W - R + 36, legend_y, color, dashed ? " stroke-dasharray='5,4'" : "",
                       W - R + 42, legend_y + 4, esc(label));
    legend_y += 18;
  };
  if (profile) {
    for (int dir = 0; dir < 2; ++dir) {
      std::string pts;
      for (double v = xlo; v <= xhi * 1.001; v *= std::sqrt(2.0))
        pts += fmt::format("{:.1f},{:.1f} ", x.at(v), y.at(profile->pinned_gbps(dir, static_cast<uint64_t>(v))));
      out += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='1.5' stroke-dasharray='5,4'>"
                         "<title>pinned {} on this machine (cuxfer calibrate)</title></polyline>\n",
                         pts, dir == 0 ? "#1f77b4" : "#17becf", dir == 0 ? "H2D" : "D2H");
      legend(dir == 0 ? "#1f77b4" : "#17becf", std::string("pinned ceiling ") + (dir == 0 ? "H2D" : "D2H"), true);
    }
  } else {
    out += fmt::format("<line x1='{0}' x2='{1}' y1='{2:.1f}' y2='{2:.1f}' stroke='#555' stroke-dasharray='5,4'><title>nominal "
                       "pinned bandwidth; run cuxfer calibrate for this machine's curve</title></line>\n",
                       L, W - R, y.at(ceiling));
    legend("#555", fmt::format("nominal pinned {:g} GB/s", ceiling), true);
  }
  for (const auto& s : series) {
    const std::string color = class_color(s.cls), name = class_name(s.cls);
    std::string pts, dots;
    for (const auto& point : s.points) {
      const int bucket = point.bucket;
      const double b = std::exp2(bucket + 0.5), m = point.median_gbps;
      const double px = x.at(b), py = y.at(m);
      pts += fmt::format("{:.1f},{:.1f} ", px, py);
      dots += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='{:.1f}' fill='{}'><title>{}: {} to {}, median {:.3g} GB/s over "
                          "{} cop{}</title></circle>\n",
                          px, py, 2.5 + std::min(4.0, std::log10(static_cast<double>(point.copies))), color,
                          esc(name), esc(format_bytes(uint64_t{1} << bucket)),
                          esc(format_bytes((uint64_t{2} << bucket) - 1)), m, point.copies,
                          point.copies == 1 ? "y" : "ies");
    }
    out += fmt::format("<polyline points='{}' fill='none' stroke='{}' stroke-width='2'/>\n{}", pts, color, dots);
    legend(color, name, false);
  }
  out += "</svg>\n<p class='sub'>Each point: the median achieved bandwidth of one class's copies in a size range "
         "(powers of two), GPU-timed where CUPTI recorded the copy, else CPU-timed where the call's time measures "
         "the transfer; hover for counts. Dashed: the pinned ceiling" +
         std::string(profile ? " measured on this machine by <code>cuxfer calibrate</code>."
                             : " (nominal: no machine profile; <code>cuxfer calibrate</code> measures this machine).") +
         "</p>\n";
}

// Bytes and time per class, side by side.
void class_bars(std::string& out, const analyses::Report& r) {
  uint64_t max_bytes = 1, max_ns = 1;
  for (const auto& c : r.classes) {
    max_bytes = std::max(max_bytes, c.bytes);
    max_ns = std::max(max_ns, c.gpu_ns.value_or(c.cpu_blocked_ns));
  }
  const int W = 1000, row = 26, L = 130, half = (W - L - 40) / 2;
  const int H = static_cast<int>(r.classes.size()) * row + 30;
  out += fmt::format("<svg width='{}' height='{}' viewBox='0 0 {} {}' role='img' aria-label='bytes and time per class'>\n", W,
                     H, W, H);
  out += fmt::format("<text x='{}' y='14' font-weight='600'>bytes</text><text x='{}' y='14' font-weight='600'>time (GPU where "
                     "recorded, else CPU-blocked)</text>\n",
                     L, L + half + 30);
  int yy = 24;
  for (const auto& c : r.classes) {
    const uint64_t ns = c.gpu_ns.value_or(c.cpu_blocked_ns);
    const double bw = static_cast<double>(c.bytes) / static_cast<double>(max_bytes) * (half - 90);
    const double tw = static_cast<double>(ns) / static_cast<double>(max_ns) * (half - 90);
    const std::string color = class_color(c.cls);
    out += fmt::format("<text x='{}' y='{}' text-anchor='end'>{}</text>", L - 8, yy + 14, esc(class_name(c.cls)));
    out += fmt::format("<rect x='{}' y='{}' width='{:.1f}' height='16' fill='{}'/><text x='{:.1f}' y='{}'>{}</text>", L, yy + 2,
                       std::max(1.0, bw), color, L + bw + 6, yy + 14, esc(format_bytes(c.bytes)));
    out += fmt::format("<rect x='{}' y='{}' width='{:.1f}' height='16' fill='{}' opacity='0.75'/><text x='{:.1f}' y='{}'>{}{}</text>\n",
                       L + half + 30, yy + 2, std::max(1.0, tw), color, L + half + 36 + tw, yy + 14,
                       esc(format_duration(ns)), c.gpu_ns ? " GPU" : " CPU");
    yy += row;
  }
  out += "</svg>\n";
}

// Transfers (CPU-blocked calls per thread) and GPU activity (copies and
// kernels per stream) on one time axis: the busiest lanes' longest items
// (analyses::TimelineTally).
void timeline(std::string& out, const analyses::TimelineTally& tally) {
  using What = analyses::TimelineTally::What;
  const analyses::TimelineTally::Picture picture = tally.picture();
  if (picture.total_items == 0) {
    out += "<p class='sub'>No transfers to show.</p>\n";
    return;
  }
  const std::vector<analyses::TimelineTally::Item>& items = picture.items;
  const int rows = static_cast<int>(picture.rows.size());
  const uint64_t t0 = picture.t0, t1 = picture.t1;
  const int W = 1100, L = 250, R = 20, lane_h = 20, T = 10;
  const int H = T + rows * lane_h + 30;
  const double span = static_cast<double>(std::max<uint64_t>(t1 - t0, 1));
  auto px = [&](uint64_t t) { return L + static_cast<double>(t - t0) / span * (W - L - R); };
  out += fmt::format("<svg width='{}' height='{}' viewBox='0 0 {} {}' role='img' aria-label='timeline'>\n", W, H, W, H);
  for (int row = 0; row < rows; ++row) {
    const int yy = T + row * lane_h;
    out += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='{}'/><text x='{}' y='{}' text-anchor='end'>{}</text>\n", L,
                       yy, W - L - R, lane_h - 2, row % 2 ? "#fafafa" : "#f2f2f2", L - 6, yy + 13,
                       esc(picture.rows[row]));
  }
  for (const auto& it : items) {
    const uint64_t b = it.begin, e = it.end;
    const std::optional<model::TransferClass> cls =
        it.cls >= 0 ? std::optional(analyses::class_of_index(static_cast<unsigned>(it.cls))) : std::nullopt;
    std::string color, tip;
    switch (it.what) {
      case What::Call:
        color = class_color(*cls);
        tip = fmt::format("{} {} {}", class_name(*cls), format_bytes(it.bytes), format_duration(e - b));
        break;
      case What::Kernel:
        color = "#2ca02c";
        tip = fmt::format("kernel  {}", format_duration(e - b));
        break;
      case What::UmFault:
        color = "#8c564b";
        tip = fmt::format("UM page fault  {}", format_duration(e - b));
        break;
      case What::UmMigration:
        color = "#8c564b";
        tip = fmt::format("UM migration {} {}", format_bytes(it.bytes), format_duration(e - b));
        break;
      case What::Dma:
        color = cls ? class_color(*cls) : "#999";
        tip = fmt::format("DMA {} {}", format_bytes(it.bytes), format_duration(e - b));
        break;
    }
    const double x0 = px(b), w = std::max(1.0, px(std::max(e, b + 1)) - x0);
    out += fmt::format("<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='{}'><title>{}</title></rect>\n", x0,
                       T + static_cast<int>(it.row) * lane_h + 2, w, lane_h - 6, color, esc(tip));
  }
  for (int k = 0; k <= 5; ++k) {
    const uint64_t t = t0 + static_cast<uint64_t>(span * k / 5);
    out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>", px(t), H - 10,
                       esc(format_duration(t - t0)));
  }
  out += "</svg>\n";
  out += fmt::format("<p class='sub'>CPU lanes: the time each copy call blocked its thread; GPU lanes: DMA (coloured "
                     "by the call's class, grey when not joined to a call) and kernels (green). {} of {} items, {} of "
                     "{} lanes shown.</p>\n",
                     items.size(), picture.total_items, rows, picture.total_lanes);
}

void findings(std::string& out, const analyses::Report& r, const std::string& docs_url) {
  std::unordered_map<uint32_t, const symbolize::Frame*> site;  // by id: locations' and sites' frames
  for (const auto& s : r.callsites) site[s.id] = &s.frame;
  for (const auto& l : r.locations) site[l.id] = &l.frame;
  if (r.findings.empty()) {
    out += "<p>No findings: no pattern with a known fix was seen.</p>\n";
    return;
  }
  for (const auto& f : r.findings) {
    out += fmt::format("<div class='finding'><h3>{}</h3><p>{} call{}, {}, {} {}", esc(f.title), format_count(f.calls),
                       f.calls == 1 ? "" : "s", esc(format_bytes(f.bytes)), esc(format_duration(f.time_ns)),
                       f.time_basis == "gpu" ? "GPU time" : "CPU-blocked");
    if (f.achieved_gbps) out += fmt::format(", achieved {:.3g} GB/s", *f.achieved_gbps);
    if (f.reference_gbps) out += fmt::format(" (reference {:.3g} GB/s)", *f.reference_gbps);
    out += "</p>";
    if (f.estimated_recoverable_ns)
      out += fmt::format("<p class='est'>Estimated recoverable: {} (an estimate; model in {})</p>",
                         esc(format_duration(*f.estimated_recoverable_ns)),
                         doc_citation(docs_url, "report.md", "accounting-words"));
    if (!f.reference_source.empty()) out += "<p class='sub'>Reference: " + esc(f.reference_source) + "</p>";
    out += "<p class='advice'>" + esc(f.advice) + "</p>";
    out += "<table><tr><th>call site</th><th class='n'>calls</th><th class='n'>bytes</th><th class='n'>time</th>"
           "<th class='n'>est. recoverable</th></tr>\n";
    for (const auto& s : f.locations) {
      auto it = site.find(s.callsite);
      std::string where = it != site.end() ? it->second->display() : std::string("(no call site captured)");
      if (s.processes > 1) where += fmt::format(" ({} processes)", s.processes);
      out += fmt::format("<tr><td><code>{}</code></td><td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}</td>"
                         "<td class='n'>{}</td></tr>\n",
                         esc(where), format_count(s.calls), esc(format_bytes(s.bytes)), esc(format_duration(s.time_ns)),
                         s.estimated_recoverable_ns ? esc(format_duration(*s.estimated_recoverable_ns)) : "");
    }
    out += "</table></div>\n";
  }
}

// One row per location (a line of code, summed over the processes that ran it).
void callsites(std::string& out, const analyses::Report& r) {
  const bool many = r.processes.size() > 1;
  out +=
      "<table><tr><th>call site</th><th>class</th><th class='n'>calls</th><th class='n'>bytes</th>"
      "<th class='n'>CPU-blocked</th><th class='n'>GPU</th>";
  out += many ? "<th>processes</th></tr>\n" : "</tr>\n";
  size_t n = 0;
  for (const auto& s : r.locations) {
    if (n++ == 20) break;
    // The site, and under it (click) its whole stack: Python and native frames in call order.
    std::string stack;
    if (s.stacks_differ)
      stack += esc(fmt::format("(pid {}'s; other processes' stacks to this line differ)", s.pid)) + "\n";
    for (const auto& f : s.stack) stack += (f.python ? "py  " : "    ") + esc(f.display()) + "\n";
    const std::string where =
        stack.empty() ? fmt::format("<code>{}</code>", esc(s.frame.display()))
                      : fmt::format("<details><summary><code>{}</code></summary><pre>{}</pre></details>",
                                    esc(s.frame.display()), stack);
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}"
        "</td><td class='n'>{}</td>",
        where, esc(s.main_class), format_count(s.calls), esc(format_bytes(s.bytes)),
        esc(format_duration(s.cpu_blocked_ns)), s.gpu_ns ? esc(format_duration(*s.gpu_ns)) : "");
    if (many) {
      std::string pids;
      for (size_t i = 0; i < s.pids.size() && i < 8; ++i) pids += (i ? ", " : "") + std::to_string(s.pids[i]);
      if (s.pids.size() > 8) pids += fmt::format(", … ({} in all)", s.pids.size());
      out += "<td>" + esc(pids) + "</td>";
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  if (r.locations.size() > 20)
    out += fmt::format(
        "<p class='sub'>{} more call sites; every process's in <code>cuxfer report --csv</code>.</p>\n",
        r.locations.size() - 20);
}

// One bar per rank, its height `value` against the largest rank's; a rank
// more than twice the median or under half of it is drawn in the outliers'
// colour, the median is a dashed line, and each bar's title names its rank
// and value: a job's imbalance at a glance, 1,000 ranks in one strip.
void rank_strip(std::string& out, const std::vector<analyses::RankTotals>& ranks, const std::string& label,
                uint64_t (*value)(const analyses::RankTotals&), std::string (*show)(uint64_t)) {
  constexpr double W = 900, H = 44;
  std::vector<uint64_t> v;
  v.reserve(ranks.size());
  for (const auto& k : ranks) v.push_back(value(k));
  if (v.empty()) return;
  std::vector<uint64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? double(sorted[n / 2]) : (double(sorted[n / 2 - 1]) + double(sorted[n / 2])) / 2;
  const double top = double(sorted.back());
  if (top <= 0) return;
  out += fmt::format("<p class='sub'>{} per rank (dashed: the median; red: more than twice the median or under "
                     "half of it)</p>\n",
                     esc(label));
  out += fmt::format("<svg class='strip' width='{0}' height='{1}' viewBox='0 0 {0} {1}' preserveAspectRatio='none' "
                     "role='img' aria-label='{2} per rank'>\n",
                     W, H, esc(label));
  const double step = W / double(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = double(v[i]);
    const double h = std::max(x > 0 ? 1.0 : 0.0, H * x / top);
    const bool outlier = median > 0 ? (x > 2 * median || x < median / 2) : x > 0;
    out += fmt::format("<rect x='{:.2f}' y='{:.2f}' width='{:.2f}' height='{:.2f}' fill='{}'><title>rank {}: {}</title>"
                       "</rect>\n",
                       step * double(i), H - h, std::max(step * 0.85, 0.5), h, outlier ? "#c0392b" : "#4a78b5",
                       ranks[i].rank, esc(show(v[i])));
  }
  const double my = H - H * median / top;
  out += fmt::format("<line x1='0' x2='{}' y1='{:.2f}' y2='{:.2f}' stroke='#333' stroke-dasharray='4 3'/></svg>\n", W,
                     my, my);
}

// Sorts a table.sortable by the column whose header is clicked (again:
// the other way): numbers by their cells' data-v, the rest as text. The
// report stays one self-contained file.
constexpr const char* kSortScript =
    "<script>document.querySelectorAll('table.sortable th').forEach(function(th){"
    "th.title='sort';th.style.cursor='pointer';th.addEventListener('click',function(){"
    "var t=th.closest('table'),c=th.cellIndex,up=th.dataset.dir!=='up';th.dataset.dir=up?'up':'down';"
    "var rows=Array.prototype.slice.call(t.rows,1);rows.sort(function(a,b){var x=a.cells[c],y=b.cells[c];"
    "var d=x.dataset.v!==undefined?Number(x.dataset.v)-Number(y.dataset.v):x.textContent.localeCompare(y.textContent);"
    "return up?d:-d;});rows.forEach(function(r){t.tBodies[0].appendChild(r);});});});</script>\n";

// Per rank and the spread; only for a job of two ranks or more.
void ranks(std::string& out, const analyses::Report& r) {
  const analyses::Ranks& k = r.ranks;
  if (k.ranks.empty() || !k.spread) return;
  const analyses::RankSpread& s = *k.spread;
  auto ratio = [](const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : std::string("n/a"); };
  out += fmt::format("<h2>Ranks ({})</h2>\n<p class='sub'>most bytes: rank {} ({}); most through pageable memory: "
                     "rank {} ({}, max/median {}); slowest (most CPU-blocked time in copies): rank {} ({}, "
                     "max/median {})</p>\n",
                     k.ranks.size(), s.most_bytes_rank, esc(format_bytes(s.most_bytes)), s.most_pageable_rank,
                     esc(format_bytes(s.most_pageable_bytes)), ratio(s.pageable_imbalance), s.slowest_rank,
                     esc(format_duration(s.slowest_cpu_blocked_ns)), ratio(s.cpu_blocked_imbalance));
  rank_strip(out, k.ranks, "CPU-blocked time in copies",
             [](const analyses::RankTotals& x) { return x.cpu_blocked_ns; },
             [](uint64_t v) { return format_duration(v); });
  rank_strip(out, k.ranks, "Bytes through pageable memory",
             [](const analyses::RankTotals& x) { return x.pageable_bytes; },
             [](uint64_t v) { return format_bytes(v); });
  out += "<table class='sortable'><thead><tr><th>rank</th><th>host</th><th class='n'>copies</th><th class='n'>bytes</th>"
         "<th class='n'>pageable</th><th class='n'>CPU-blocked</th><th class='n'>GPU</th><th>findings</th></tr></thead>"
         "<tbody>\n";
  for (const auto& x : k.ranks) {
    std::string f;
    for (const auto& fi : x.findings) f += (f.empty() ? "" : ", ") + esc(fi.kind);
    out += fmt::format("<tr><td data-v='{}'>{}</td><td>{}</td><td class='n' data-v='{}'>{}</td>"
                       "<td class='n' data-v='{}'>{}</td><td class='n' data-v='{}'>{}</td>"
                       "<td class='n' data-v='{}'>{}</td><td class='n' data-v='{}'>{}</td><td>{}</td></tr>\n",
                       x.rank, x.rank, esc(x.host), x.copies, format_count(x.copies), x.bytes,
                       esc(format_bytes(x.bytes)), x.pageable_bytes, esc(format_bytes(x.pageable_bytes)),
                       x.cpu_blocked_ns, esc(format_duration(x.cpu_blocked_ns)), x.gpu_ns.value_or(0),
                       x.gpu_ns ? esc(format_duration(*x.gpu_ns)) : "", f);
  }
  out += "</tbody></table>\n";
  out += kSortScript;
}

// What the pinned rewrite did with pageable copies, and why it left the
// others as made (per reason, as the shim recorded it); only when it was on.
void rewrite_section(std::string& out, const analyses::Report& r) {
  const analyses::RewriteTotals& rw = r.rewrite;
  if (!rw.active) return;
  out += "<h2>Rewrite (pin)</h2>\n";
  out += fmt::format("<p class='sub'>staged: {} ({}); in-place registration: {} ({}); passed through as pageable: "
                     "{} ({})</p>\n",
                     esc(counted(rw.staged_calls, "copy", "copies")), esc(format_bytes(rw.staged_bytes)),
                     esc(counted(rw.registered_calls, "copy", "copies")), esc(format_bytes(rw.registered_bytes)),
                     esc(counted(rw.passthrough_pageable_calls, "copy", "copies")),
                     esc(format_bytes(rw.passthrough_pageable_bytes)));
  if (rw.staged_calls && rw.staged_cpu_ns > rw.staged_if_pinned_ns)
    out += fmt::format("<p class='sub'>pinned at the source (PyTorch: DataLoader(pin_memory=True)), the staged copies "
                       "would take about {} instead of {} in the app's calls: {} more than the rewrite brings (an "
                       "estimate, {})</p>\n",
                       esc(format_duration(rw.staged_if_pinned_ns)), esc(format_duration(rw.staged_cpu_ns)),
                       esc(format_duration(rw.staged_cpu_ns - rw.staged_if_pinned_ns)), esc(rw.pinned_basis));
  if (rw.passthrough_reasons.empty()) return;
  out += "<table><tr><th>passed through because</th><th class='n'>copies</th><th class='n'>bytes</th></tr>\n";
  for (const auto& p : rw.passthrough_reasons)
    out += fmt::format("<tr><td title='{}'>{}</td><td class='n'>{}</td><td class='n'>{}</td></tr>\n", esc(p.reason),
                       esc(p.text), format_count(p.calls), esc(format_bytes(p.bytes)));
  out += "</table>\n";
}

// Copies per NVTX range, nested ranges indented under their outer ones.
void nvtx_ranges(std::string& out, const analyses::Report& r) {
  if (r.ranges.empty()) return;
  out += "<h2>NVTX ranges</h2>\n<p class='sub'>a range's copies include its nested ranges'</p>\n";
  out += "<table><tr><th>range</th><th class='n'>copies</th><th class='n'>bytes</th><th class='n'>pageable</th>"
         "<th class='n'>CPU-blocked</th><th class='n'>GPU</th><th>findings</th></tr>\n";
  for (const auto& g : r.ranges) {
    std::string f;
    for (const auto& fi : g.findings) f += fmt::format("{}{} ({})", f.empty() ? "" : ", ", esc(fi.kind), fi.calls);
    out += fmt::format("<tr><td style='padding-left:{}em' title='{}'>{}</td><td class='n'>{}</td><td class='n'>{}</td>"
                       "<td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}</td><td>{}</td></tr>\n",
                       0.3 + 1.2 * (g.depth - 1), esc(g.path), esc(g.name), format_count(g.calls),
                       esc(format_bytes(g.bytes)), esc(format_bytes(g.pageable_bytes)),
                       esc(format_duration(g.cpu_blocked_ns)), g.gpu_ns ? esc(format_duration(*g.gpu_ns)) : "", f);
  }
  out += "</table>\n";
}

}  // namespace

std::string file_url(const std::string& absolute_path) {
  std::string url = "file://";
  for (unsigned char c : absolute_path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~')
      url += static_cast<char>(c);
    else
      url += fmt::format("%{:02X}", c);
  }
  return url;
}

std::string render_html(const analyses::Report& r, const model::Job& job, const model::MachineProfile* profile,
                        const std::string& docs_url) {
  return render_html(r, analyses::copy_plots(job), profile, docs_url);
}

std::string render_html(const analyses::Report& r, const analyses::CopyPlots& plots,
                        const model::MachineProfile* profile, const std::string& docs_url) {
  std::string out;
  out.reserve(1 << 16);
  std::string cmd = r.program;
  for (size_t i = 1; i < r.argv.size(); ++i) cmd += " " + r.argv[i];
  out += "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'><title>cuxfer report: " + esc(r.program) +
         "</title><style>" + kStyle + "</style></head><body>\n";
  out += "<h1>cuxfer transfer report</h1><div class='sub'><code>" + esc(cmd) + "</code> · " +
         fmt::format("{} process{} · timing: {}", r.processes.size(), r.processes.size() == 1 ? "" : "es",
                     r.timing == "gpu" ? "GPU (CUPTI)" : "CPU") +
         "</div>\n";
  if (r.simulated)
    out += "<div class='sim'>SIMULATED CUDA: these traces come from tests/simcuda; no number here describes a GPU.</div>\n";
  uint64_t ns_total = 0;
  for (const auto& c : r.classes) ns_total += c.gpu_ns.value_or(c.cpu_blocked_ns);
  out += "<div class='cards'>";
  out += fmt::format("<div class='card'>copies<b>{}</b></div>", format_count(r.totals.calls));
  out += fmt::format("<div class='card'>bytes moved<b>{}</b></div>", esc(format_bytes(r.totals.bytes)));
  out += fmt::format("<div class='card'>CPU blocked in copies<b>{}</b></div>", esc(format_duration(r.totals.cpu_blocked_ns)));
  out += fmt::format("<div class='card'>through pageable memory<b>{}</b></div>",
                     esc(format_percent(r.pageable_share.fraction)));
  uint64_t recoverable = 0;
  for (const auto& f : r.findings) recoverable = std::max(recoverable, f.estimated_recoverable_ns.value_or(0));
  if (recoverable)
    out += fmt::format("<div class='card'>largest recoverable (est.)<b>{}</b></div>", esc(format_duration(recoverable)));
  if (r.rewrite.active)
    out += fmt::format("<div class='card'>rewrite: staged / registered<b>{} / {}</b></div>",
                       esc(format_bytes(r.rewrite.staged_bytes)), esc(format_bytes(r.rewrite.registered_bytes)));
  out += "</div>\n";

  out += "<h2>Findings</h2>\n";
  findings(out, r, docs_url);
  ranks(out, r);
  nvtx_ranges(out, r);
  out += "<h2>Achieved bandwidth against transfer size</h2>\n";
  analyses::Thresholds nominal;
  bandwidth_plot(out, plots.bandwidth, profile, nominal);
  out += "<h2>Bytes and time per direction and memory kind</h2>\n";
  class_bars(out, r);
  rewrite_section(out, r);
  out += "<h2>Timeline</h2>\n";
  timeline(out, plots.timeline);
  out += "<h2>Top call sites</h2>\n";
  callsites(out, r);
  if (!r.notes.empty()) {
    out += "<h2>Notes</h2><ul>";
    for (const auto& n : r.notes) out += "<li>" + esc(n) + "</li>";
    out += "</ul>\n";
  }
  out += "<p class='sub'>cuxfer " CUXFER_VERSION " · " + doc_citation(docs_url, "report.md", "") +
         " explains every number.</p></body></html>\n";
  return out;
}

}  // namespace cuxfer::render
