#include "analyzer/render/csv_renderer.h"

#include <map>
#include <vector>

#include <fmt/format.h>

namespace cuxfer::render {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

namespace {

// A job of two ranks or more gets a last column, `rank` (empty for a process
// without one); other jobs' CSV is unchanged.
std::map<uint32_t, uint32_t> rank_of_pid(const analyses::Report& report) {
  std::map<uint32_t, uint32_t> out;
  for (const auto& r : report.ranks.ranks)
    for (uint32_t pid : r.pids) out[pid] = r.rank;
  return out;
}

}  // namespace

std::string render_callsites_csv(const analyses::Report& report) {
  const bool ranked = !report.ranks.ranks.empty();
  const std::map<uint32_t, uint32_t> ranks = rank_of_pid(report);
  std::string out = "pid,site_id,function,file,line,module,offset,class,calls,bytes,cpu_blocked_ns,gpu_ns,staged_bytes";
  out += ranked ? ",rank\n" : "\n";
  for (const auto& s : report.callsites) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s.pid, s.id, csv_field(s.frame.function),
                       csv_field(s.frame.file), s.frame.line > 0 ? std::to_string(s.frame.line) : "",
                       csv_field(s.frame.module), s.frame.has_module() ? fmt::format("{:#x}", s.frame.offset) : "",
                       csv_field(s.main_class), s.calls, s.bytes, s.cpu_blocked_ns,
                       s.gpu_ns ? std::to_string(*s.gpu_ns) : "", s.staged_bytes);
    if (ranked) {
      out.back() = ',';
      const auto it = ranks.find(s.pid);
      out += (it == ranks.end() ? std::string() : std::to_string(it->second)) + "\n";
    }
  }
  return out;
}

std::string render_ranges_csv(const analyses::Report& report) {
  std::string out = "path,name,depth,calls,bytes,pageable_bytes,cpu_blocked_ns,gpu_ns,failed_calls\n";
  for (const auto& g : report.ranges)
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(g.path), csv_field(g.name), g.depth, g.calls, g.bytes,
                       g.pageable_bytes, g.cpu_blocked_ns, g.gpu_ns ? std::to_string(*g.gpu_ns) : std::string(),
                       g.failed_calls);
  return out;
}

}  // namespace cuxfer::render
