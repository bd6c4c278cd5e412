#include "analyzer/cli/calibrate_command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "analyzer/cli/options.h"
#include "analyzer/cli/output_file.h"
#include "analyzer/model/machine_profile.h"
#include "analyzer/text/units.h"

extern char** environ;

namespace cuxfer::cli {

const char* const kCalibrateHelp =
    R"(Usage: cuxfer calibrate [-o FILE] [--device N] [--max-size BYTES] [--quick]

Measures this machine's host<->device transfer curves for one GPU, like
bandwidthTest (pinned and pageable, H2D and D2H, 4 B to 1 GiB), the cost of
registering host memory in place, and host memcpy bandwidth per thread count;
stores them as a machine profile (docs/calibrate.md). Takes well under a
minute. `cuxfer report` then estimates from it, and `cuxfer record
--rewrite=pin` sets its staging thresholds from it.

Options:
  -o FILE           write the profile here (default: the profile directory,
                    $CUXFER_PROFILE_DIR or ~/.cache/cuxfer/machines, as
                    <host>-<gpu uuid>.json)
  --device N        the GPU to measure (default 0)
  --max-size BYTES  largest copy measured (default 1G; K/M/G suffixes)
  --quick           fewer repetitions (noisier; for tests)
  -h, --help        this help

Exit status: 0 written; 1 failed; 2 usage error; 77 no GPU.
)";

namespace {

// The measuring program: $CUXFER_CALIBRATE_PROGRAM, else cuxfer-calibrate next to this executable.
std::string program_path() {
  if (const char* p = std::getenv("CUXFER_CALIBRATE_PROGRAM"); p && *p) return p;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "cuxfer-calibrate";
  self[n] = 0;
  std::string dir(self);
  dir.resize(dir.rfind('/'));
  return dir + "/cuxfer-calibrate";
}

// Runs argv, returns its stdout; stderr passes through (progress lines).
bool run_capture(const std::vector<std::string>& argv, std::string& out, int& status, std::string& error) {
  int fds[2];
  if (pipe(fds) != 0) return error = std::strerror(errno), false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return error = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)), false;
  }
  char buf[65536];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR))
    if (k > 0) out.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

// "4096", "64K", "16M", "1G" (binary multiples).
bool parse_byte_count(std::string v, uint64_t& out) {
  uint64_t mult = 1;
  if (!v.empty()) {
    switch (v.back()) {
      case 'K': case 'k': mult = 1ull << 10; break;
      case 'M': case 'm': mult = 1ull << 20; break;
      case 'G': case 'g': mult = 1ull << 30; break;
      default: break;
    }
    if (mult != 1) v.pop_back();
  }
  uint64_t n = 0;
  if (!parse_unsigned(v, n) || n > (UINT64_MAX / mult)) return false;
  out = n * mult;
  return true;
}

bool make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string part = dir.substr(0, i);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  return true;
}

std::string threshold(const std::optional<uint64_t>& b) {
  return b ? "staging modelled faster from " + text::format_bytes(*b)
           : std::string("staging never modelled faster than the driver's pageable path");
}

}  // namespace

int run_calibrate(std::vector<std::string> args) {
  ArgReader in("cuxfer calibrate", std::move(args));
  std::string out_path, device = "0", max_size;
  bool quick = false;
  OptionTable options(kCalibrateHelp, Positionals::None);
  options.value("output", 'o', [&](const std::string& v, ArgReader&) { out_path = v; })
      .value("device", 0,
             [&](const std::string& v, ArgReader& r) {
               uint64_t n = 0;
               if (!parse_unsigned(v, n) || n > 1024) r.fail("--device needs a GPU index, not '" + v + "'");
               device = std::to_string(n);
             })
      .value("max-size", 0,
             [&](const std::string& v, ArgReader& r) {
               uint64_t n = 0;
               if (!parse_byte_count(v, n) || n < 4096)
                 r.fail("--max-size needs a byte count of at least 4096 (K/M/G suffixes), not '" + v + "'");
               max_size = std::to_string(n);
             })
      .flag("quick", 0, [&] { quick = true; });
  if (auto status = options.read(in)) return *status;
  std::vector<std::string> argv = {program_path(), "--device", device};
  if (!max_size.empty()) argv.insert(argv.end(), {"--max-size", max_size});
  if (quick) argv.push_back("--quick");
  if (access(argv[0].c_str(), X_OK) != 0) {
    const char* env = std::getenv("CUXFER_CALIBRATE_PROGRAM");
    if (env && *env)
      std::fprintf(stderr, "cuxfer calibrate: the measuring program %s (CUXFER_CALIBRATE_PROGRAM) cannot be run: %s\n",
                   argv[0].c_str(), std::strerror(errno));
    else
      std::fprintf(stderr, "cuxfer calibrate: the measuring program %s is missing: %s; build it with the product "
                   "(cmake --build BUILD --target cuxfer) or name one with CUXFER_CALIBRATE_PROGRAM\n",
                   argv[0].c_str(), std::strerror(errno));
    return 1;
  }
  std::string text, error;
  int status = 0;
  if (!run_capture(argv, text, status, error)) {
    std::fprintf(stderr, "cuxfer calibrate: %s\n", error.c_str());
    return 1;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    std::fprintf(stderr, "cuxfer calibrate: no GPU: there is nothing to calibrate on this machine\n");
    return 77;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "cuxfer calibrate: %s failed (%s); no profile written\n", argv[0].c_str(),
                 WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status)).c_str() : "killed");
    return 1;
  }
  model::MachineProfile p;
  if (!model::parse_machine_profile(text, p, error)) {
    std::fprintf(stderr, "cuxfer calibrate: the measurement is not a valid profile: %s\n", error.c_str());
    return 1;
  }
  if (out_path.empty()) {
    const std::string dir = model::machine_profile_dir();
    if (dir.empty()) {
      std::fprintf(stderr, "cuxfer calibrate: no home directory for the profile: set HOME or CUXFER_PROFILE_DIR, "
                   "or name the file with -o\n");
      return 1;
    }
    if (!make_dirs(dir)) {
      std::fprintf(stderr, "cuxfer calibrate: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
      return 1;
    }
    out_path = dir + "/" + model::machine_profile_file_name(p.hostname, p.gpu_uuid);
  }
  // Replaced atomically through a new temporary file of this process's own
  // (O_EXCL): a symlink or file planted at any name beside the profile is
  // never followed or written through.
  if (!replace_file(out_path, text, "cuxfer calibrate")) return 1;
  using text::format_bytes;
  std::printf("cuxfer calibrate: %s%s on %s -> %s\n", p.gpu_name.c_str(), p.simulated ? " (SIMULATED CUDA)" : "",
              p.hostname.c_str(), out_path.c_str());
  for (int dir = 0; dir < 2; ++dir) {
    const char* name = dir == 0 ? "H2D" : "D2H";
    const uint64_t big = p.pinned[dir].back().bytes;
    std::printf("  %s: pinned %.1f GB/s, pageable %.1f GB/s at %s; %s\n", name,
                p.pinned_gbps(dir, big), p.pageable_gbps(dir, big), format_bytes(big).c_str(),
                threshold(p.stage_min(dir, std::max(1u, std::min(8u, p.cores / 2)))).c_str());
  }
  if (!p.registration.empty()) {
    const auto& r = p.registration.back();
    std::printf("  registration: %.1f ms per GiB (register + unregister of %s)\n",
                (r.register_us + r.unregister_us) / 1e3 * static_cast<double>(1ull << 30) / static_cast<double>(r.bytes),
                format_bytes(r.bytes).c_str());
  }
  if (!p.host_memcpy.empty())
    std::printf("  host memcpy: %.1f GB/s on 1 thread, %.1f GB/s on %u\n", p.host_memcpy.front().gbps,
                p.host_memcpy.back().gbps, p.host_memcpy.back().threads);
  return 0;
}

}  // namespace cuxfer::cli
