#include "analyzer/launcher/record_command.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "analyzer/cli/options.h"
#include "analyzer/launcher/child_process.h"
#include "analyzer/launcher/manifest.h"
#include "analyzer/launcher/program_check.h"
#include "analyzer/model/machine_profile.h"
#include "analyzer/render/units.h"
#include "policy/policy.h"

extern char** environ;

namespace cuxfer::launcher {

const char* const kRecordHelp =
    R"(Usage: cuxfer record [options] -- COMMAND [ARGS...]

Runs COMMAND with the cuxfer shim preloaded. Every process of it that uses
CUDA (children and forks included) writes one trace,
<dir>/cuxfer-<name>-<pid>.trace. cuxfer exits as COMMAND did: same exit
status, or the same signal.

Options:
  -o, --output-dir DIR  where traces go (default: the current directory)
  --name NAME           trace name (default: each process's executable name)
  --stack-depth N       frames captured per call site (default 16; 0 = only
                        the immediate call site)
  --no-stacks           same as --stack-depth 0
  --cupti=auto|off      GPU timing through CUPTI when available (default auto)
  --kernels             also record kernels through CUPTI, for the copy/compute
                        overlap analysis (adds CUPTI work to every launch)
  --rewrite=pin|off     pin: run pageable host<->device copies through pinned
                        staging buffers (transparently; the report says what
                        was staged); off: observe only. Default: neither, the
                        command inherits CUXFER_REWRITE (unset = off)
  --policy FILE         apply a policy file (cuxfer policy writes one;
                        docs/policy.md): checked before COMMAND starts, passed
                        to the shim as CUXFER_POLICY (absolute path)
  --shim PATH           the shim library (default: ../lib/libcuxfer.so next
                        to this program, or $CUXFER_SHIM)
  -q, --quiet           print nothing but errors
  -h, --help            show this help

Then: cuxfer report TRACE...
)";

namespace {

constexpr uint64_t kMaxStackDepth = 256;

int usage_error(const std::string& line) {
  std::fprintf(stderr, "cuxfer record: %s\n", line.c_str());
  return cli::kExitUsage;
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

std::string current_dir() {
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

// Shows a path relative to the current directory when it is inside it.
std::string short_path(const std::string& path, const std::string& cwd) {
  if (!cwd.empty() && path.size() > cwd.size() + 1 && path.compare(0, cwd.size(), cwd) == 0 &&
      path[cwd.size()] == '/')
    return path.substr(cwd.size() + 1);
  return path;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=+:,@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct RecordOptions {
  std::string output_dir = ".";
  std::string name;
  uint64_t stack_depth = 16;
  std::string cupti = "auto";
  bool kernels = false;
  std::string rewrite;  // "pin" | "off" | "" (not set: CUXFER_REWRITE passes through)
  std::string shim;
  std::string policy;  // --policy FILE, absolute once checked; "" = CUXFER_POLICY passes through
  bool quiet = false;
  std::vector<std::string> command;
};

// Parses; returns -1 to go on, else the exit status.
int parse(std::vector<std::string> args, RecordOptions& o) {
  cli::ArgReader in("cuxfer record", std::move(args));
  while (!in.done() && !in.failed()) {
    if (in.end_of_options() || !in.at_option()) break;
    std::string v;
    if (in.flag("help", 'h')) {
      std::fputs(kRecordHelp, stdout);
      return 0;
    } else if (in.flag("quiet", 'q')) {
      o.quiet = true;
    } else if (in.flag("no-stacks")) {
      o.stack_depth = 0;
    } else if (in.option("stack-depth", 0, v)) {
      if (!cli::parse_unsigned(v, o.stack_depth) || o.stack_depth > kMaxStackDepth)
        in.fail(fmt::format("--stack-depth needs a number from 0 to {}, got '{}'", kMaxStackDepth, v));
    } else if (in.option("cupti", 0, v)) {
      if (v != "auto" && v != "off") in.fail(fmt::format("--cupti is auto or off, got '{}'", v));
      o.cupti = v;
    } else if (in.flag("kernels")) {
      o.kernels = true;
    } else if (in.option("rewrite", 0, v)) {
      if (v != "pin" && v != "off") in.fail(fmt::format("--rewrite is pin or off, got '{}'", v));
      o.rewrite = v;
    } else if (in.option("output-dir", 'o', v)) {
      o.output_dir = v;
    } else if (in.option("name", 0, v)) {
      if (v.empty() || v.find('/') != std::string::npos || v == "." || v == "..")
        in.fail(fmt::format("--name must be a file name without '/', got '{}'", v));
      o.name = v;
    } else if (in.option("shim", 0, v)) {
      o.shim = v;
    } else if (in.option("policy", 0, v)) {
      if (v.empty()) in.fail("--policy needs a file name");
      o.policy = v;
    } else if (!in.failed()) {
      std::fprintf(stderr, "%s\n", in.unknown_option().c_str());
      return cli::kExitUsage;
    }
  }
  if (in.failed()) {
    std::fprintf(stderr, "%s\n", in.error().c_str());
    return cli::kExitUsage;
  }
  o.command = in.rest();
  if (o.command.empty())
    return usage_error("no command given (usage: cuxfer record [options] -- COMMAND [ARGS...])");
  return -1;
}

// The environment of the child: ours, with LD_PRELOAD extended and the
// CUXFER_* variables the launcher owns set (or removed) explicitly.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& set,
                                           const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    std::string key(kv.substr(0, kv.find('=')));
    if (set.count(key)) continue;
    bool drop = false;
    for (const auto& u : unset) drop |= key == u;
    if (!drop) env.emplace_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

namespace {

// The pinned rewrite's cost model: with a machine profile for this host
// (cuxfer calibrate) and no threshold set by hand, the staging thresholds are
// where staging is modelled faster than the driver's pageable path there.
void apply_machine_profile(const RecordOptions& o, std::map<std::string, std::string>& set) {
  const char* inherited = std::getenv("CUXFER_REWRITE");
  const std::string rewrite = !o.rewrite.empty() ? o.rewrite : inherited ? inherited : "";
  if (rewrite != "pin") return;
  for (const char* v : {"CUXFER_STAGE_MIN", "CUXFER_STAGE_MIN_H2D", "CUXFER_STAGE_MIN_D2H"})
    if (std::getenv(v)) return;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  auto profile = model::find_machine_profile(host);
  if (!profile) {
    if (!o.quiet)
      std::fprintf(stderr, "cuxfer record: no machine profile for %s in %s (run 'cuxfer calibrate'); staging "
                   "thresholds are the defaults measured on an H200\n", host, model::machine_profile_dir().c_str());
    return;
  }
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  uint32_t threads = std::clamp(cores / 2, 1u, 8u);
  if (const char* t = std::getenv("CUXFER_STAGE_THREADS"); t && std::atoi(t) > 0) threads = std::atoi(t);
  std::string line;
  for (int dir = 0; dir < 2; ++dir) {
    auto min = profile->stage_min(dir, threads);
    const uint64_t bytes = min.value_or(uint64_t{1} << 62);  // never
    set[dir == 0 ? "CUXFER_STAGE_MIN_H2D" : "CUXFER_STAGE_MIN_D2H"] = std::to_string(bytes);
    line += fmt::format("{}{} {}", dir ? ", " : "", dir == 0 ? "H2D" : "D2H",
                        min ? render::format_bytes(*min) : std::string("never"));
  }
  if (!o.quiet)
    std::fprintf(stderr, "cuxfer record: staging thresholds from the machine profile %s: %s\n",
                 profile->path.c_str(), line.c_str());
}

}  // namespace

std::string default_shim_path() {
  std::string self = real_path("/proc/self/exe");
  size_t slash = self.rfind('/');
  if (slash == std::string::npos) return {};
  const std::string bin_dir = self.substr(0, slash);
  const std::string build_layout = bin_dir + "/../lib/libcuxfer.so";
#ifdef CUXFER_INSTALL_LIBDIR
  if (::access(build_layout.c_str(), F_OK) != 0) {
    std::string installed = bin_dir + "/../" CUXFER_INSTALL_LIBDIR "/libcuxfer.so";
    if (::access(installed.c_str(), F_OK) == 0) return installed;
  }
#endif
  return build_layout;
}

std::string prepend_preload(const std::string& shim, const char* existing) {
  if (!existing || !*existing) return shim;
  std::string_view rest(existing);
  // ld.so separates entries with ':' or ' '.
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t end = rest.find_first_of(": ", pos);
    if (end == std::string_view::npos) end = rest.size();
    if (rest.substr(pos, end - pos) == shim) return std::string(existing);
    pos = end + 1;
  }
  return shim + ":" + std::string(existing);
}

int run_record(std::vector<std::string> args) {
  RecordOptions o;
  if (int rc = parse(std::move(args), o); rc >= 0) return rc;

  // The policy file: read and validated here, so that a bad one is one line
  // before the command starts rather than a message from every process.
  if (!o.policy.empty()) {
    policy::Policy p;
    std::string error;
    if (!policy::read_policy_file(o.policy, p, error)) return usage_error("--policy " + error);
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(o.policy, ec);
    if (ec) return usage_error(fmt::format("--policy {}: {}", o.policy, ec.message()));
    o.policy = abs.lexically_normal().string();
  }

  // Output directory: absolute, so that a child that changes directory still
  // writes where the user asked.
  // A directory that does not exist yet is created, like mkdir -p (trace
  // files themselves are created owner-only).
  if (::access(o.output_dir.c_str(), F_OK) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec)
      return usage_error(fmt::format("cannot create output directory {}: {}", o.output_dir, ec.message()));
  }
  std::string out_dir = real_path(o.output_dir);
  struct stat st {};
  if (out_dir.empty() || ::stat(out_dir.c_str(), &st) != 0)
    return usage_error(fmt::format("output directory {}: {}", o.output_dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return usage_error(fmt::format("output directory {} is not a directory", o.output_dir));
  if (::access(out_dir.c_str(), W_OK | X_OK) != 0)
    return usage_error(
        fmt::format("output directory {} is not writable: {}", o.output_dir, std::strerror(errno)));

  ResolvedProgram program = resolve_program(o.command[0], std::getenv("PATH"));
  if (program.result == ResolvedProgram::Result::NotFound) {
    std::fprintf(stderr, "cuxfer record: %s: command not found\n", o.command[0].c_str());
    return 127;
  }
  if (program.result == ResolvedProgram::Result::NotExecutable) {
    std::fprintf(stderr, "cuxfer record: %s: permission denied\n", program.path.c_str());
    return 126;
  }
  PreloadCheck check = check_preloadable(program.path);
  if (!check.ok) return usage_error(fmt::format("{} {}", program.path, check.reason));

  std::string shim_arg = o.shim;
  const char* shim_source = "--shim";
  if (shim_arg.empty()) {
    const char* env = std::getenv("CUXFER_SHIM");
    shim_arg = env && *env ? env : default_shim_path();
    shim_source = env && *env ? "CUXFER_SHIM" : "default location";
  }
  std::string shim = real_path(shim_arg);
  if (shim.empty() || ::access(shim.c_str(), R_OK) != 0)
    return usage_error(
        fmt::format("the cuxfer shim is not at {} ({}): {}; name it with --shim "
                    "PATH or CUXFER_SHIM",
                    shim_arg, shim_source, std::strerror(errno)));
  if (shim.find_first_of(": ") != std::string::npos)
    return usage_error(
        fmt::format("the shim path {} contains ':' or a space, which LD_PRELOAD "
                    "cannot express; move it",
                    shim));

  std::string error;
  auto manifest = Manifest::create(&error);
  if (!manifest) return usage_error(error);

  // Registration in place needs the libc hooks library next to the shim; it is
  // preloaded only then, so that observe mode leaves the app's allocator alone.
  std::string preload = prepend_preload(shim, std::getenv("LD_PRELOAD"));
  {
    const char* inherited = std::getenv("CUXFER_REWRITE");
    const std::string rewrite = !o.rewrite.empty() ? o.rewrite : inherited ? inherited : "";
    const char* reg = std::getenv("CUXFER_REGISTER");
    if (rewrite == "pin" && !(reg && std::string(reg) == "off")) {
      const std::string hooks = shim.substr(0, shim.rfind('/') + 1) + "libcuxfer_memhooks.so";
      if (::access(hooks.c_str(), R_OK) == 0) {
        if (preload.find(hooks) == std::string::npos) preload.insert(preload.find(shim) + shim.size(), ":" + hooks);
      }
      else if (!o.quiet)
        std::fprintf(stderr, "cuxfer record: %s not found: the rewrite will stage copies but not register "
                     "buffers in place\n", hooks.c_str());
    }
  }
  std::map<std::string, std::string> set = {
      {"LD_PRELOAD", preload},
      {"CUXFER_OUTPUT_DIR", out_dir},
      {"CUXFER_STACK_DEPTH", std::to_string(o.stack_depth)},
      {"CUXFER_CUPTI", o.cupti},
      {"CUXFER_MANIFEST", manifest->path()},
      {"CUXFER_LAUNCHER", "1"},
  };
  if (!o.rewrite.empty()) set["CUXFER_REWRITE"] = o.rewrite;
  if (!o.policy.empty()) set["CUXFER_POLICY"] = o.policy;
  if (o.kernels) set["CUXFER_CUPTI_KERNELS"] = "1";
  apply_machine_profile(o, set);
  std::vector<std::string> unset;
  if (o.name.empty())
    unset.push_back("CUXFER_TRACE_NAME");
  else
    set["CUXFER_TRACE_NAME"] = o.name;

  ChildResult child = run_child(program.path, o.command, child_environment(set, unset));
  if (!child.started) {
    int e = child.error_number;
    std::fprintf(stderr, "cuxfer record: cannot run %s: %s\n", program.path.c_str(), std::strerror(e));
    return e == ENOENT ? 127 : 126;
  }

  std::vector<ManifestEntry> traces = manifest->read();
  manifest.reset();
  if (!o.quiet) {
    std::string cwd = current_dir();
    bool partial = WIFSIGNALED(child.wait_status);
    if (traces.empty()) {
      std::fprintf(stderr,
                   "cuxfer: no trace written: %s %s without loading the shim or without "
                   "using CUDA\n",
                   o.command[0].c_str(), describe_wait_status(child.wait_status).c_str());
    } else {
      std::fprintf(stderr, "cuxfer: wrote %zu trace(s):\n", traces.size());
      std::string report = "cuxfer report";
      for (const auto& t : traces) {
        std::string shown = short_path(t.trace_path, cwd);
        std::fprintf(stderr, "  %s\n", shown.c_str());
        report += " " + shell_quote(shown);
      }
      if (traces.size() > 8) {
        std::string glob = o.name.empty() ? "cuxfer-*.trace" : "cuxfer-" + o.name + "-*.trace";
        report = out_dir == cwd ? "cuxfer report " + glob
                                : "cuxfer report " + shell_quote(short_path(out_dir, cwd)) + "/" + glob;
      }
      if (partial)
        std::fprintf(stderr, "cuxfer: %s %s: its trace may be partial\n", o.command[0].c_str(),
                     describe_wait_status(child.wait_status).c_str());
      std::fprintf(stderr, "cuxfer: see the report with: %s\n", report.c_str());
    }
  }
  exit_like(child.wait_status);
}

}  // namespace cuxfer::launcher
