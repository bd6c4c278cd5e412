#include "analyzer/cli/record_command.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "analyzer/cli/check_command.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/summarize_command.h"
#include "analyzer/launcher/child_process.h"
#include "analyzer/launcher/manifest.h"
#include "analyzer/launcher/program_check.h"
#include "analyzer/launcher/recorder.h"
#include "trace/reader.h"

namespace cuxfer::cli {

using namespace launcher;  // record is the command in front of the launcher

const char* const kRecordHelp =
    R"(Usage: cuxfer record [options] -- COMMAND [ARGS...]

Runs COMMAND with the cuxfer shim preloaded. Every process of it that uses
CUDA (children and forks included) writes one trace,
<dir>/cuxfer-<name>-<pid>.trace, into one folder per run (below). cuxfer
exits as COMMAND did: same exit status, or the same signal.

Options:
  -o, --output-dir DIR  where traces go (default: a new folder for this run,
                        cuxfer-<name>-<n>, n the first number free; the
                        current directory for a rank of mpirun/srun/torchrun)
  --name NAME           trace name (default: each process's executable name)
  --stack-depth N       native frames captured per call site, 0-32 (default:
                        CUXFER_STACK_DEPTH if set, else 16; 0 = only the
                        immediate call site)
  --no-stacks           same as --stack-depth 0
  --cupti=auto|on|off   GPU timing through CUPTI when available. auto (the
                        default): CUPTI's copy records are on while they are
                        worth their cost: for asynchronous copies, within
                        what cuxfer's own work leaves of ~1 % of the run
                        (at least 0.2 %); synchronous copies are timed
                        by their calls, with GPU times sampled (the report
                        says which copies have GPU time). on: records for
                        every copy, whatever they cost. off: no CUPTI.
                        Without the option the command inherits CUXFER_CUPTI
                        (unset = auto)
  --capture-range=cudaProfilerApi|none
                        cudaProfilerApi: record only between the program's
                        cudaProfilerStart()/cuProfilerStart() and the next
                        stop (torch.cuda.profiler.start()/stop(), as Nsight
                        Systems' option of that name); calls outside pass
                        through unrecorded (still rewritten under
                        --rewrite), and the trace's notes say how much was
                        captured. none (the default): the whole run
  --kernels             also record kernels through CUPTI, for the copy/compute
                        overlap analysis (adds CUPTI work to every launch)
  --rewrite=pin|off     pin: run pageable host<->device copies through pinned
                        staging buffers, and register reused buffers in place
                        (transparently; the report says what was staged and
                        registered); off: observe only. Default: neither, the
                        command inherits CUXFER_REWRITE (unset = off).
                        Registering needs libcuxfer_memhooks.so beside the
                        shim: without it, an error (exit 2) unless
                        CUXFER_REGISTER=off (staging only)
  --policy FILE         apply a policy file (cuxfer policy writes one;
                        docs/policy.md): checked before COMMAND starts, passed
                        to the shim as CUXFER_POLICY (absolute path); its
                        register entries need libcuxfer_memhooks.so too
  --shim PATH           the shim library (default: ../lib/libcuxfer.so next
                        to this program, or $CUXFER_SHIM)
  --check FILE          after COMMAND, check its traces against a budget file
                        (cuxfer check --budget FILE; docs/check.md): exit 0
                        when they keep it, 1 when not. The budget is read
                        before COMMAND starts (a bad one: exit 2). When
                        COMMAND fails, its exit status (or signal) stays
                        cuxfer's and the budget is not checked. A budget
                        for a program that COMMAND does not name (its
                        "program": train, while COMMAND runs ./other) is
                        refused before COMMAND starts (exit 2)
  --any-program         with --check: apply a budget for another program
                        (a program started by a script that COMMAND runs)
  --summary             after COMMAND, reduce its traces to a job summary
                        beside them, named after the first trace
                        (cuxfer-...summary.json; cuxfer summarize -j 1; docs/
                        report.md, "Job summaries"): run by each task of a
                        large job, `cuxfer report *.summary.json` then reads
                        summaries instead of traces. A summary that cannot be
                        written is said in one line; the exit status stays
                        the program's
  -q, --quiet           print nothing but errors, and that a rewrite runs
                        without registration in place (CUXFER_REGISTER=off)
  -h, --help            show this help

Then: cuxfer report DIR/
)";

namespace {

// The shim's own bound (shim/core/config.h, CallSiteTable::kMaxNativeDepth):
// a larger depth would reach it as a bad CUXFER_STACK_DEPTH and become 16.
constexpr uint64_t kMaxStackDepth = 32;

int usage_error(const std::string& line) {
  std::fprintf(stderr, "cuxfer record: %s\n", line.c_str());
  return kExitUsage;
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

struct RecordOptions : RecordSettings {
  std::string check;  // --check FILE: a budget to check the traces against
  bool any_program = false;  // --any-program: apply it whatever program it names
  bool summary = false;      // --summary: a job summary of the traces beside them
  bool output_dir_given = false;
};

// A rank of a multi-rank launch runs its own `cuxfer record`: a folder per
// rank would scatter the job, so ranks keep writing into the current
// directory (their trace names carry the rank). The variables are those the
// shim takes ranks from (docs/report.md, "Multi-rank jobs"); SLURM_PROCID
// only inside a job step, as a batch script has it too.
bool launched_as_rank() {
  auto set = [](const char* v) { return std::getenv(v) != nullptr; };
  return (set("RANK") && set("LOCAL_RANK")) || set("OMPI_COMM_WORLD_RANK") || set("PMIX_RANK") || set("PMI_RANK") ||
         (set("SLURM_PROCID") && set("SLURM_STEP_ID"));
}

// The run's own folder, cuxfer-<name>-<n> in the current directory, n the
// first number whose folder does not exist yet (as nsys numbers its
// reports); made here, so that two records started together never share one.
// "" with `error` set when none can be made.
std::string make_run_folder(const RecordOptions& o, std::string& error) {
  std::string name = o.name;
  if (name.empty()) {
    const std::string& program = o.command[0];
    name = program.substr(program.rfind('/') + 1);
  }
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (name.empty() || name[0] == '.') name = "run" + name;
  for (unsigned n = 1; n < 100000; ++n) {
    std::string dir = fmt::format("cuxfer-{}-{}", name, n);
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST) {
      error = fmt::format("cannot make the output folder {}: {} (name one with -o DIR)", dir, std::strerror(errno));
      return {};
    }
  }
  error = fmt::format("cannot make an output folder cuxfer-{}-<n>: all numbers taken (name one with -o DIR)", name);
  return {};
}

// A budget names the program it is for; a command that names no such
// program would run to its end only for the check to refuse its traces (exit
// 2). Said before it starts instead, with one line; false then.
bool budget_fits_command(const check::Budget& budget, const RecordOptions& o) {
  if (budget.program.empty()) return true;
  const std::vector<std::string> names = programs_named(o.command, std::getenv("PATH"));
  if (std::find(names.begin(), names.end(), budget.program) != names.end()) return true;
  const std::string program = o.command[0].substr(o.command[0].rfind('/') + 1);
  std::fprintf(stderr,
               "cuxfer record: --check %s: the budget is for program '%s', which the command does not name "
               "(it runs '%s'); --any-program runs it and applies the budget anyway\n",
               o.check.c_str(), budget.program.c_str(), program.c_str());
  return false;
}

// Parses; returns -1 to go on, else the exit status.
int parse(std::vector<std::string> args, RecordOptions& o) {
  ArgReader in("cuxfer record", std::move(args));
  OptionTable options(kRecordHelp, Positionals::Command);
  options.flag("quiet", 'q', [&] { o.quiet = true; })
      .flag("no-stacks", 0, [&] { o.stack_depth = 0; o.stack_depth_given = true; })
      .value("stack-depth", 0,
             [&](const std::string& v, ArgReader& r) {
               if (!parse_unsigned(v, o.stack_depth) || o.stack_depth > kMaxStackDepth)
                 r.fail(fmt::format("--stack-depth needs a number from 0 to {}, got '{}'", kMaxStackDepth, v));
               o.stack_depth_given = true;
             })
      .value("cupti", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v != "auto" && v != "on" && v != "off") r.fail(fmt::format("--cupti is auto, on or off, got '{}'", v));
               o.cupti = v;
             })
      .value("capture-range", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v != "cudaProfilerApi" && v != "none")
                 r.fail(fmt::format("--capture-range is cudaProfilerApi or none, got '{}'", v));
               o.capture_range = v;
             })
      .flag("kernels", 0, [&] { o.kernels = true; })
      .value("rewrite", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v != "pin" && v != "off") r.fail(fmt::format("--rewrite is pin or off, got '{}'", v));
               o.rewrite = v;
             })
      .value("output-dir", 'o',
             [&](const std::string& v, ArgReader&) {
               o.output_dir = v;
               o.output_dir_given = true;
             })
      .value("name", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty() || v.find('/') != std::string::npos || v == "." || v == "..")
                 r.fail(fmt::format("--name must be a file name without '/', got '{}'", v));
               o.name = v;
             })
      .value("shim", 0, [&](const std::string& v, ArgReader&) { o.shim = v; })
      .value("check", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--check needs a budget file name");
               o.check = v;
             })
      .flag("any-program", 0, [&] { o.any_program = true; })
      .flag("summary", 0, [&] { o.summary = true; })
      .value("policy", 0, [&](const std::string& v, ArgReader& r) {
        if (v.empty()) r.fail("--policy needs a file name");
        o.policy = v;
      });
  if (auto status = options.read(in)) return *status;
  o.command = in.rest();
  if (o.command.empty())
    return usage_error("no command given (usage: cuxfer record [options] -- COMMAND [ARGS...])");
  if (o.any_program && o.check.empty()) return usage_error("--any-program goes with --check FILE");
  return -1;
}

}  // namespace


namespace {

// --summary: the traces reduced to a job summary beside the first of them,
// on one thread (every task of a job does this at once on its node). Its
// failure is said in one line; the program's exit status stays cuxfer's.
void write_summary_of(const std::vector<ManifestEntry>& traces, bool quiet) {
  if (traces.empty()) return;
  std::string path = traces.front().trace_path;
  constexpr std::string_view kTrace = ".trace";
  if (path.size() > kTrace.size() && path.ends_with(kTrace)) path.resize(path.size() - kTrace.size());
  path += ".summary.json";
  std::vector<std::string> args = {"-q", "-j", "1", "-o", path};
  for (const auto& t : traces) args.push_back(t.trace_path);
  if (run_summarize(std::move(args)) != 0) {
    std::fprintf(stderr, "cuxfer record: --summary: no summary written (above: why)\n");
    return;
  }
  if (!quiet) std::fprintf(stderr, "cuxfer: wrote the summary %s\n", short_path(path, current_dir()).c_str());
}

}  // namespace

int run_record(std::vector<std::string> args) {
  RecordOptions o;
  if (int rc = parse(std::move(args), o); rc >= 0) return rc;
  // A bad budget is said before the command runs, as a bad policy is.
  check::Budget budget;
  if (!o.check.empty() && !load_budget(o.check, "cuxfer record", "--check", budget)) return kExitUsage;
  if (!o.check.empty() && !o.any_program && !budget_fits_command(budget, o)) return kExitUsage;

  const bool own_folder = !o.output_dir_given && !launched_as_rank();
  if (own_folder) {
    std::string error;
    o.output_dir = make_run_folder(o, error);
    if (o.output_dir.empty()) return usage_error(error);
  }
  PreparedRecording prepared;
  if (PrepareResult pr = prepare_recording(o, prepared); !pr.ok) {
    if (own_folder) ::rmdir(o.output_dir.c_str());  // nothing ran: leave nothing behind
    std::fprintf(stderr, "cuxfer record: %s\n", pr.error.c_str());
    return pr.exit_status;
  }
  RecordedRun run = run_recording(prepared);
  // A program that wrote no trace leaves no empty folder (rmdir keeps one
  // that holds anything).
  if (own_folder && run.traces.empty()) ::rmdir(prepared.output_dir.c_str());
  if (!run.error.empty()) return usage_error(run.error);
  const ChildResult& child = run.child;
  if (!child.started) {
    int e = child.error_number;
    std::fprintf(stderr, "cuxfer record: cannot run %s: %s\n", prepared.program.c_str(), std::strerror(e));
    return e == ENOENT ? 127 : 126;
  }

  const std::vector<ManifestEntry>& traces = run.traces;
  const std::string& out_dir = prepared.output_dir;
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
        report += ' ';
        report += shell_quote(shown);
      }
      if (own_folder) {
        report = "cuxfer report " + shell_quote(short_path(out_dir, cwd)) + "/";
      } else if (traces.size() > 8) {
        std::string glob = o.name.empty() ? "cuxfer-*.trace" : "cuxfer-" + o.name + "-*.trace";
        report = out_dir == cwd ? "cuxfer report " + glob
                                : "cuxfer report " + shell_quote(short_path(out_dir, cwd)) + "/" + glob;
      }
      if (partial) {
        // A signal at its default action (SIGTERM, SIGINT, SIGHUP, SIGPIPE)
        // lets the shim finish the traces first; other deaths cut them.
        const bool all_clean = std::all_of(traces.begin(), traces.end(),
                                           [](const ManifestEntry& t) { return trace::trace_ends_cleanly(t.trace_path); });
        std::fprintf(stderr, "cuxfer: %s %s: %s\n", o.command[0].c_str(),
                     describe_wait_status(child.wait_status).c_str(),
                     all_clean ? "its traces were finished before it ended" : "its trace may be partial");
      }
      std::fprintf(stderr, "cuxfer: see the report with: %s\n", report.c_str());
    }
  }
  if (o.summary) write_summary_of(traces, o.quiet);
  if (!o.check.empty()) {
    // The app's own failure is the result: a check of a failed run would
    // hide it behind 0/1.
    if (!WIFEXITED(child.wait_status) || WEXITSTATUS(child.wait_status) != 0) {
      std::fprintf(stderr, "cuxfer record: %s %s: the budget %s was not checked\n", o.command[0].c_str(),
                   describe_wait_status(child.wait_status).c_str(), o.check.c_str());
      exit_like(child.wait_status);
    }
    if (traces.empty()) {
      std::fprintf(stderr, "cuxfer record: --check %s: no trace to check\n", o.check.c_str());
      return kExitUsage;
    }
    std::vector<std::string> paths;
    for (const auto& t : traces) paths.push_back(t.trace_path);
    CheckSettings settings;
    settings.any_program = o.any_program;
    return check_traces(budget, o.check, paths, settings, "cuxfer record");
  }
  exit_like(child.wait_status);
}

}  // namespace cuxfer::cli
