#include "analyzer/model/machine_profile.h"

#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace cuxfer::model {
namespace {

using nlohmann::json;

// Log-log interpolation of a bandwidth curve; the ends are held flat.
double interpolate(const std::vector<CopyPoint>& curve, uint64_t bytes) {
  if (curve.empty()) return 0;
  if (bytes <= curve.front().bytes) return curve.front().gbps;
  if (bytes >= curve.back().bytes) return curve.back().gbps;
  auto hi = std::lower_bound(curve.begin(), curve.end(), bytes,
                             [](const CopyPoint& p, uint64_t b) { return p.bytes < b; });
  auto lo = std::prev(hi);
  if (hi->bytes == bytes) return hi->gbps;
  const double x = std::log(static_cast<double>(bytes)), x0 = std::log(static_cast<double>(lo->bytes)),
               x1 = std::log(static_cast<double>(hi->bytes));
  const double y0 = std::log(std::max(lo->gbps, 1e-12)), y1 = std::log(std::max(hi->gbps, 1e-12));
  return std::exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

uint64_t chunk_for(uint64_t bytes) {  // rewrite/staging.cpp
  uint64_t quarter = (bytes / 4 + (256u << 10) - 1) & ~uint64_t((256u << 10) - 1);
  return std::clamp<uint64_t>(quarter, 1u << 20, 8u << 20);
}

bool read_curve(const json& j, const char* memory, std::vector<CopyPoint> (&out)[2], std::string& error) {
  for (const auto& p : j) {
    if (!p.is_object() || p.value("memory", "") != memory) continue;
    const std::string dir = p.value("dir", "");
    if (dir != "H2D" && dir != "D2H") return error = "copy point with dir '" + dir + "'", false;
    CopyPoint c;
    c.bytes = p.value("bytes", uint64_t{0});
    c.gbps = p.value("gbps", 0.0);
    if (c.bytes == 0 || !(c.gbps > 0) || !std::isfinite(c.gbps))
      return error = std::string("copy point with bad bytes/gbps (") + memory + " " + dir + ")", false;
    out[dir == "H2D" ? 0 : 1].push_back(c);
  }
  for (auto& v : out) {
    std::sort(v.begin(), v.end(), [](const CopyPoint& a, const CopyPoint& b) { return a.bytes < b.bytes; });
    if (v.empty()) return error = std::string("no ") + memory + " copy curve for both directions", false;
  }
  return true;
}

}  // namespace

double MachineProfile::pinned_gbps(int dir, uint64_t bytes) const { return interpolate(pinned[dir], bytes); }
double MachineProfile::pageable_gbps(int dir, uint64_t bytes) const { return interpolate(pageable[dir], bytes); }

double MachineProfile::registration_ns(uint64_t bytes) const {
  if (registration.empty()) return 0;
  auto cost = [](const RegistrationPoint& p) { return (p.register_us + p.unregister_us) * 1e3; };
  if (bytes <= registration.front().bytes)
    return cost(registration.front()) * static_cast<double>(bytes) / static_cast<double>(registration.front().bytes);
  for (size_t i = 1; i < registration.size(); ++i)
    if (bytes <= registration[i].bytes) {
      const auto &a = registration[i - 1], &b = registration[i];
      const double t = static_cast<double>(bytes - a.bytes) / static_cast<double>(b.bytes - a.bytes);
      return cost(a) + t * (cost(b) - cost(a));
    }
  const auto& z = registration.back();
  return cost(z) * static_cast<double>(bytes) / static_cast<double>(z.bytes);
}

double MachineProfile::memcpy_gbps(uint32_t threads) const {
  double best = 0;
  for (const auto& m : host_memcpy)
    if (m.threads <= threads) best = m.gbps;
  return best > 0 ? best : (host_memcpy.empty() ? 0 : host_memcpy.front().gbps);
}

double MachineProfile::staged_ns(int dir, uint64_t bytes, uint32_t threads) const {
  const double cpu = memcpy_gbps(threads);
  if (cpu <= 0 || pinned[dir].empty()) return INFINITY;
  const uint64_t chunk = std::min(chunk_for(bytes), bytes);
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  // Waking the memcpy threads costs ~10 us a chunk (measured staging is
  // 10-25 % slower than the model without it at 1-4 MiB on the H200).
  const double cpu_chunk = static_cast<double>(chunk) / cpu + (threads > 1 ? 10e3 : 0);
  const double dma_chunk = static_cast<double>(chunk) / pinned_gbps(dir, chunk);
  const double per_chunk_latency = 4.0 / pinned_gbps(dir, 4);  // a tiny pinned copy's time
  return static_cast<double>(chunks) * (std::max(cpu_chunk, dma_chunk) + per_chunk_latency) +
         std::min(cpu_chunk, dma_chunk);
}

std::optional<uint64_t> MachineProfile::stage_min(int dir, uint32_t threads) const {
  std::optional<uint64_t> from;
  for (auto it = pageable[dir].rbegin(); it != pageable[dir].rend(); ++it) {
    if (it->bytes < (64u << 10)) break;
    const double driver = static_cast<double>(it->bytes) / it->gbps;
    // A margin for the model's error: staging must be modelled 20 % faster.
    if (staged_ns(dir, it->bytes, threads) < 0.8 * driver) from = it->bytes;
    else break;
  }
  return from;
}

bool parse_machine_profile(const std::string& text, MachineProfile& p, std::string& error) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error = "not a JSON object", false;
  if (j.value("schema", "") != MachineProfile::kSchema)
    return error = "schema is '" + j.value("schema", "") + "', expected " + MachineProfile::kSchema, false;
  try {
    p.created = j.value("created", "");
    const json& host = j.at("host");
    p.hostname = host.value("hostname", "");
    p.cpu = host.value("cpu", "");
    p.cores = host.value("cores", 0u);
    const json& gpu = j.at("gpu");
    p.gpu_index = gpu.value("index", 0);
    p.gpu_name = gpu.value("name", "");
    p.gpu_uuid = gpu.value("uuid", "");
    p.pci_bus_id = gpu.value("pci_bus_id", "");
    p.driver_version = gpu.value("driver_version", 0);
    p.simulated = j.value("simulated", false);
    if (!read_curve(j.at("copy"), "pinned", p.pinned, error) || !read_curve(j.at("copy"), "pageable", p.pageable, error))
      return false;
    for (const auto& r : j.value("registration", json::array()))
      p.registration.push_back({r.value("bytes", uint64_t{0}), r.value("register_us", 0.0), r.value("unregister_us", 0.0)});
    std::sort(p.registration.begin(), p.registration.end(),
              [](const RegistrationPoint& a, const RegistrationPoint& b) { return a.bytes < b.bytes; });
    for (const auto& m : j.value("host_memcpy", json::array()))
      p.host_memcpy.push_back({m.value("threads", 0u), m.value("gbps", 0.0)});
    std::sort(p.host_memcpy.begin(), p.host_memcpy.end(),
              [](const MemcpyPoint& a, const MemcpyPoint& b) { return a.threads < b.threads; });
  } catch (const json::exception& e) {
    return error = std::string("missing or mistyped field: ") + e.what(), false;
  }
  if (p.hostname.empty()) return error = "host.hostname is empty", false;
  return true;
}

bool read_machine_profile(const std::string& path, MachineProfile& out, std::string& error) {
  std::ifstream in(path);
  if (!in) return error = "cannot read " + path, false;
  std::stringstream ss;
  ss << in.rdbuf();
  if (!parse_machine_profile(ss.str(), out, error)) return error = path + ": " + error, false;
  out.path = path;
  return true;
}

std::string machine_profile_json(const MachineProfile& p) {
  json copy = json::array();
  for (int dir = 0; dir < 2; ++dir)
    for (auto [memory, curve] : {std::pair{"pinned", &p.pinned[dir]}, std::pair{"pageable", &p.pageable[dir]}})
      for (const auto& c : *curve)
        copy.push_back({{"dir", dir == 0 ? "H2D" : "D2H"}, {"memory", memory}, {"bytes", c.bytes}, {"gbps", c.gbps}});
  json reg = json::array();
  for (const auto& r : p.registration)
    reg.push_back({{"bytes", r.bytes}, {"register_us", r.register_us}, {"unregister_us", r.unregister_us}});
  json mem = json::array();
  for (const auto& m : p.host_memcpy) mem.push_back({{"threads", m.threads}, {"gbps", m.gbps}});
  json j = {{"schema", MachineProfile::kSchema},
            {"created", p.created},
            {"simulated", p.simulated},
            {"host", {{"hostname", p.hostname}, {"cpu", p.cpu}, {"cores", p.cores}}},
            {"gpu",
             {{"index", p.gpu_index},
              {"name", p.gpu_name},
              {"uuid", p.gpu_uuid},
              {"pci_bus_id", p.pci_bus_id},
              {"driver_version", p.driver_version}}},
            {"copy", copy},
            {"registration", reg},
            {"host_memcpy", mem}};
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string machine_profile_dir() {
  if (const char* d = std::getenv("CUXFER_PROFILE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/cuxfer/machines";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/cuxfer/machines";
  // No HOME (a daemon, a scheduler's job): the user's home from the password
  // database, never a shared directory such as /tmp, where another user could
  // plant the profile that sets this user's thresholds.
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir && pw->pw_dir[0] == '/')
    return std::string(pw->pw_dir) + "/.cache/cuxfer/machines";
  return {};
}

std::string machine_profile_file_name(const std::string& hostname, const std::string& gpu_uuid) {
  std::string name = hostname + "-" + (gpu_uuid.empty() ? "gpu" : gpu_uuid) + ".json";
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  return name;
}

std::optional<MachineProfile> find_machine_profile(const std::string& hostname) {
  const std::string dir = machine_profile_dir();
  if (dir.empty()) return std::nullopt;
  DIR* d = opendir(dir.c_str());
  if (!d) return std::nullopt;
  std::optional<MachineProfile> best;
  int64_t best_mtime = -1;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(hostname + "-", 0) != 0 || name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0)
      continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) continue;
    MachineProfile p;
    std::string error;
    if (!read_machine_profile(path, p, error) || p.hostname != hostname) continue;
    const bool better = !best || (p.gpu_index == 0 && best->gpu_index != 0) ||
                        (p.gpu_index == best->gpu_index && st.st_mtime > best_mtime);
    if (better) {
      best = std::move(p);
      best_mtime = st.st_mtime;
    }
  }
  closedir(d);
  return best;
}

}  // namespace cuxfer::model
