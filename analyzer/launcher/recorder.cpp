#include "analyzer/launcher/recorder.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include <cuxfer/build_info.h>
#include <fmt/format.h>

#include "analyzer/launcher/program_check.h"
#include "analyzer/launcher/shim_path.h"
#include "analyzer/launcher/shim_stamp.h"
#include "analyzer/model/machine_profile.h"
#include "analyzer/text/units.h"
#include "policy/policy.h"

extern char** environ;

namespace cuxfer::launcher {
namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

PrepareResult fail(int status, std::string line) { return {false, status, std::move(line)}; }

// A line on stderr that no -q hides (the rewrite runs degraded), printed once
// per process however many runs are prepared (cuxfer tune prepares one a run).
void print_once(const std::string& line) {
  static std::mutex mu;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mu);
  if (printed.insert(line).second) std::fprintf(stderr, "%s\n", line.c_str());
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

// The pinned rewrite's cost model: with a machine profile for this host
// (cuxfer calibrate) and no threshold set by hand, the staging thresholds are
// where staging is modelled faster than the driver's pageable path there.
void apply_machine_profile(const RecordSettings& o, std::map<std::string, std::string>& set) {
  const char* inherited = std::getenv("CUXFER_REWRITE");
  const std::string rewrite = !o.rewrite.empty() ? o.rewrite : inherited ? inherited : "";
  if (rewrite != "pin") return;
  for (const char* v : {"CUXFER_STAGE_MIN", "CUXFER_STAGE_MIN_H2D", "CUXFER_STAGE_MIN_D2H"})
    if (std::getenv(v)) return;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  auto profile = model::find_machine_profile(host);
  if (!profile) {
    const std::string dir = model::machine_profile_dir();
    if (!o.quiet && dir.empty())
      std::fprintf(stderr, "%s: no machine profile: no home directory (set HOME or CUXFER_PROFILE_DIR); staging "
                   "thresholds are the defaults measured on an H200\n", o.command_name);
    else if (!o.quiet)
      std::fprintf(stderr, "%s: no machine profile for %s in %s (run 'cuxfer calibrate'); staging "
                   "thresholds are the defaults measured on an H200\n", o.command_name, host, dir.c_str());
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
                        min ? text::format_bytes(*min) : std::string("never"));
  }
  if (!o.quiet)
    std::fprintf(stderr, "%s: staging thresholds from the machine profile %s: %s\n", o.command_name,
                 profile->path.c_str(), line.c_str());
}

// access(W_OK) answers from the mode bits, which root passes everywhere: a
// folder of sysfs or of a read-only mount says writable, and the shim only
// finds out when the program has run. Creating a file is the real test.
std::string cannot_create_file_in(const std::string& dir) {
  std::string probe = dir + "/.cuxfer-probe.XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

PrepareResult prepare_recording(const RecordSettings& o, PreparedRecording& out) {
  if (o.command.empty()) return fail(2, "no command given");
  // The policy file: read and validated here, so that a bad one is one line
  // before the command starts rather than a message from every process.
  bool policy_registers = false;
  if (!o.policy.empty()) {
    policy::Policy p;
    std::string error;
    if (!policy::read_policy_file(o.policy, p, error)) return fail(2, "--policy " + error);
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(o.policy, ec);
    if (ec) return fail(2, fmt::format("--policy {}: {}", o.policy, ec.message()));
    out.policy = abs.lexically_normal().string();
    for (const auto& e : p.entries) policy_registers |= e.path == policy::Path::Register;
  }

  // Output directory: absolute, so that a child that changes directory still
  // writes where the user asked. One that does not exist yet is created, like
  // mkdir -p (trace files themselves are created owner-only).
  if (::access(o.output_dir.c_str(), F_OK) != 0) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return fail(2, fmt::format("cannot create output directory {}: {}", o.output_dir, ec.message()));
  }
  out.output_dir = real_path(o.output_dir);
  struct stat st {};
  if (out.output_dir.empty() || ::stat(out.output_dir.c_str(), &st) != 0)
    return fail(2, fmt::format("output directory {}: {}", o.output_dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) return fail(2, fmt::format("output directory {} is not a directory", o.output_dir));
  if (::access(out.output_dir.c_str(), W_OK | X_OK) != 0)
    return fail(2, fmt::format("output directory {} is not writable: {}", o.output_dir, std::strerror(errno)));
  if (std::string why = cannot_create_file_in(out.output_dir); !why.empty())
    return fail(2, fmt::format("output directory {} is not writable: {}", o.output_dir, why));

  ResolvedProgram program = resolve_program(o.command[0], std::getenv("PATH"));
  if (program.result == ResolvedProgram::Result::NotFound)
    return fail(127, fmt::format("{}: command not found", o.command[0]));
  if (program.result == ResolvedProgram::Result::NotExecutable)
    return fail(126, fmt::format("{}: permission denied", program.path));
  PreloadCheck check = check_preloadable(program.path);
  if (!check.ok) return fail(2, fmt::format("{} {}", program.path, check.reason));
  out.program = program.path;
  out.argv = o.command;

  std::string shim_arg = o.shim;
  const char* shim_source = "--shim";
  if (shim_arg.empty()) {
    const char* env = std::getenv("CUXFER_SHIM");
    shim_arg = env && *env ? env : default_shim_path();
    shim_source = env && *env ? "CUXFER_SHIM" : "default location";
  }
  out.shim = real_path(shim_arg);
  if (out.shim.empty() || ::access(out.shim.c_str(), R_OK) != 0)
    return fail(2, fmt::format("the cuxfer shim is not at {} ({}): {}; {}name it with --shim PATH or CUXFER_SHIM",
                               shim_arg, shim_source, std::strerror(errno),
                               o.shim.empty() && !std::getenv("CUXFER_SHIM")
                                   ? "this installation is incomplete: reinstall cuxfer, or "
                                   : ""));
  // Before anything runs: a shim from another build writes traces this
  // command may misread, and a library that is no shim records nothing.
  if (std::string line = shim_mismatch(out.shim, read_shim_stamp(out.shim), CUXFER_BUILD_ID); !line.empty())
    return fail(2, line);
  if (out.shim.find_first_of(": ") != std::string::npos)
    return fail(2, fmt::format("the shim path {} contains ':' or a space, which LD_PRELOAD cannot express; move it",
                               out.shim));

  // Registration in place (the rewrite's, or a policy's `register` entries)
  // needs the libc hooks library next to the shim; it is preloaded only then,
  // so that observe mode leaves the app's allocator alone. Without it the
  // rewrite could only stage: that is an error unless CUXFER_REGISTER=off
  // asks for staging alone, and either way it is said even with -q.
  // A sanitizer runtime that must be the first library loaded (GCC's
  // -fsanitize=address links libasan.so, which aborts the program otherwise)
  // goes in front of the shim; the shim after it records the same.
  const std::string runtime_first = runtime_needing_first_place(needed_libraries(out.program));
  const char* inherited_preload = std::getenv("LD_PRELOAD");
  std::string preload = prepend_preload(out.shim, inherited_preload, runtime_first);
  if (!runtime_first.empty() && !o.quiet && (!inherited_preload || !std::strstr(inherited_preload, runtime_first.c_str())))
    std::fprintf(stderr, "%s: %s needs %s first in its library list: preloaded before the shim\n", o.command_name,
                 out.program.c_str(), runtime_first.c_str());
  {
    const char* inherited = std::getenv("CUXFER_REWRITE");
    const std::string rewrite = !o.rewrite.empty() ? o.rewrite : inherited ? inherited : "";
    const char* reg = std::getenv("CUXFER_REGISTER");
    const bool register_off = reg && std::string_view(reg) == "off";
    if (rewrite == "pin" || policy_registers) {
      const std::string why = rewrite == "pin"
                                  ? std::string(!o.rewrite.empty() ? "--rewrite=pin" : "CUXFER_REWRITE=pin")
                                  : fmt::format("--policy {} (register entries)", o.policy);
      const std::string hooks = out.shim.substr(0, out.shim.rfind('/') + 1) + "libcuxfer_memhooks.so";
      const bool have_hooks = ::access(hooks.c_str(), R_OK) == 0;
      const int hooks_errno = errno;
      if (register_off) {
        print_once(fmt::format("{}: {}: registration in place is off (CUXFER_REGISTER=off): copies are only staged{}",
                               o.command_name, why,
                               have_hooks ? std::string() : fmt::format(" ({} is not there either)", hooks)));
      } else if (!have_hooks) {
        return fail(2, fmt::format("{}: cannot use {}: {}; registering buffers in place needs it next to the "
                                   "shim: build it (cmake --build BUILD --target cuxfer), or set "
                                   "CUXFER_REGISTER=off to only stage copies",
                                   why, hooks, std::strerror(hooks_errno)));
      } else if (preload.find(hooks) == std::string::npos) {
        preload.insert(preload.find(out.shim) + out.shim.size(), ":" + hooks);
      }
    }
  }
  out.set = {
      {"LD_PRELOAD", preload},
      {"CUXFER_OUTPUT_DIR", out.output_dir},
      {"CUXFER_LAUNCHER", "1"},
  };
  // GCC 12's LeakSanitizer (Debian 12's libasan.so.8) can crash at the exit
  // of a program recorded this way ("Tracer caught signal 11": its record of
  // dynamic TLS blocks, taken in its __tls_get_addr interceptor, holds a
  // bogus block beside the shim's static TLS, depending on the process's
  // layout), and the program then exits 1. Its leak check does not need that
  // interception (glibc's TLS blocks are heap reachable from the thread's
  // own static TLS), so it is turned off, unless the user set it.
  if (std::string asan_options = asan_options_for(preload, std::getenv("ASAN_OPTIONS")); !asan_options.empty())
    out.set["ASAN_OPTIONS"] = asan_options;
  // The options when given; else what the environment says passes through
  // (`CUXFER_CUPTI=off cuxfer record ...` means what it says), else the
  // defaults. The shim checks an inherited value and says so once if bad.
  const auto inherited = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
  };
  if (o.stack_depth_given || !inherited("CUXFER_STACK_DEPTH"))
    out.set["CUXFER_STACK_DEPTH"] = std::to_string(o.stack_depth);
  if (!o.cupti.empty() || !inherited("CUXFER_CUPTI"))
    out.set["CUXFER_CUPTI"] = o.cupti.empty() ? std::string("auto") : o.cupti;
  // NVTX ranges (shim/record/nvtx_ranges.h): the shim is NVTX's injection
  // library. A tool already named there (nsys, another tracer) is chained:
  // the shim loads it and passes every NVTX call on.
  if (const char* nvtx = std::getenv("NVTX_INJECTION64_PATH"); nvtx && *nvtx && std::string_view(nvtx) != out.shim) {
    if (const char* chained = std::getenv("CUXFER_NVTX_NEXT"); !chained || !*chained) out.set["CUXFER_NVTX_NEXT"] = nvtx;
  }
  out.set["NVTX_INJECTION64_PATH"] = out.shim;
  if (!o.rewrite.empty()) out.set["CUXFER_REWRITE"] = o.rewrite;
  if (!o.capture_range.empty()) out.set["CUXFER_CAPTURE_RANGE"] = o.capture_range;
  if (!out.policy.empty()) out.set["CUXFER_POLICY"] = out.policy;
  if (o.kernels) out.set.emplace("CUXFER_CUPTI_KERNELS", "1");  // a new key: constructed, not assigned
  apply_machine_profile(o, out.set);
  for (const auto& [k, v] : o.extra_env) out.set[k] = v;
  out.unset.clear();
  if (o.name.empty())
    out.unset.push_back("CUXFER_TRACE_NAME");
  else
    out.set["CUXFER_TRACE_NAME"] = o.name;
  return {true, 0, {}};
}

namespace {

// Unique per run of the command on this host, and stable in every process of
// it: the host, the launcher's pid and the time the run starts.
std::string new_run_id() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string word;
  for (const char* p = host; *p && word.size() < 64; ++p)
    word += std::isalnum(static_cast<unsigned char>(*p)) || *p == '.' || *p == '-' ? *p : '_';
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return fmt::format("{}:{}:{}", word.empty() ? "host" : word, ::getpid(),
                     std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

}  // namespace

RecordedRun run_recording(const PreparedRecording& p, const ChildIo& io) {
  RecordedRun r;
  auto manifest = Manifest::create(&r.error);
  if (!manifest) return r;
  std::map<std::string, std::string> set = p.set;
  set["CUXFER_MANIFEST"] = manifest->path();
  set["CUXFER_RUN_ID"] = new_run_id();
  const auto env = child_environment(set, p.unset);
  const auto start = std::chrono::steady_clock::now();
  r.child = run_child(p.program, p.argv, env, io);
  r.wall_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  r.traces = manifest->read();
  return r;
}

}  // namespace cuxfer::launcher
