#include "analyzer/cli/tune_command.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "analyzer/analyses/diff.h"
#include "analyzer/analyses/policy_candidates.h"
#include "analyzer/analyses/report.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/launcher/recorder.h"
#include "analyzer/model/job.h"
#include "analyzer/render/diff_renderer.h"
#include "analyzer/render/tune_report.h"
#include "analyzer/text/units.h"
#include "analyzer/symbolize/symbolizer.h"
#include "analyzer/tune/decision.h"
#include "analyzer/tune/plan.h"
#include "policy/policy.h"

namespace cuxfer::cli {

const char* const kTuneHelp =
    R"(Usage: cuxfer tune [options] -- COMMAND [ARGS...]

Finds the policy entries (docs/policy.md) that make COMMAND faster, by
measuring them. Runs COMMAND once under observe (recorded with
CUXFER_FINGERPRINT_MIN=1), derives the candidates `cuxfer policy` would
write, then runs it again and again: baseline runs (no policy) interleaved
with runs that apply all candidates, then, within --max-runs, runs with
single candidates whose effect could not be told apart, and runs that
confirm the winning set. A candidate is kept only where the median
CPU-blocked time of the call sites it changes got faster by more than the
run-to-run noise, and the median wall time of the whole run did not get
slower by more than the noise; a zero_copy candidate (which also changes
kernels) only where the whole run got faster by more than the noise. Noise:
the larger spread (max - min, relative to the median) of the two groups of
runs compared, at least 2%. docs/tune.md has the whole rule.

COMMAND must be repeatable: exit 0 every time, and print the same
`checksum=...` lines if it prints any. A run that fails stops tune with one
line; nothing is written then.

Options:
  --reps N           baseline and candidate runs per comparison (default 3, 2-50)
  --max-runs M       at most M runs of COMMAND in all, the observe run
                     included (default 20; at least 1 + 2 * reps)
  -o, --output FILE  the winning policy (default cuxfer-policy.json)
  --report FILE      the measured report (default cuxfer-tune-report.txt):
                     each candidate's measurements and verdict, and the diff
                     of a median baseline run against a median run of the
                     winning policy, per call site
  --keep-traces DIR  keep every run's traces and output under DIR (default:
                     a temporary directory, removed at the end)
  --shim PATH        the shim library (as for cuxfer record)
  --no-symbols, --sysroot DIR, --python-frames user|all, --python-user PKG, --profile FILE, --no-profile
                     as for cuxfer policy
  -q, --quiet        no progress lines and no summary
  -h, --help         show this help

Exit status: 0 policy and report written (also when nothing was kept); 1 a
run failed, or a file could not be written; 2 usage error; 126/127 COMMAND
not executable / not found.
)";

namespace {

constexpr const char* kCmd = "cuxfer tune";
constexpr uint8_t kMemKindMapped = 7;  // trace::MemKind "mapped": a zero-copy allocation's memory

enum class RunKind { Observe, Baseline, Combined, Solo, Confirm };

struct TuneOptions {
  uint64_t reps = 3, max_runs = 20;
  std::string output = "cuxfer-policy.json", report = "cuxfer-tune-report.txt";
  std::string keep_dir, shim, profile_path;
  bool quiet = false, no_profile = false;
  SymbolOptions symbols;
  std::vector<std::string> command;
};

// What one run did at the copy call sites of one candidate.
struct SiteStats {
  uint64_t calls = 0, bytes = 0;
  uint64_t pageable_path_bytes = 0;  // pageable host memory, neither staged nor registered: the driver's bounce path
  uint64_t dma_bytes = 0;            // moved by DMA (no side is a zero-copy allocation's mapped memory)
  uint64_t cpu_ns = 0;
};

struct Run {
  RunKind kind = RunKind::Observe;
  int candidate = -1;  // Solo: which
  uint32_t number = 0;
  std::string dir, log, label;
  uint64_t wall_ns = 0;
  std::vector<std::string> traces;
  std::vector<SiteStats> per_candidate;
  std::string policy_note;  // the shim's "policy: ..." note, first process that wrote one
};

// A candidate's outcome.
struct Outcome {
  tune::Judgement judgement;
  std::string measured_in;  // "all candidates", "alone", or "" (not measured)
  RunKind group = RunKind::Combined;
  bool kept = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every "checksum=<token>" the app printed, in order.
std::vector<std::string> checksums(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = text.find("checksum="); pos != std::string::npos; pos = text.find("checksum=", pos + 1)) {
    size_t end = text.find_first_of(" \t\r\n", pos);
    out.push_back(text.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
  }
  return out;
}

std::string seconds(uint64_t ns) { return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9); }

std::string site_label(const policy::Site& s) {
  if (s.python())
    return fmt::format("{}:{} in {}", s.python_file.substr(s.python_file.rfind('/') + 1), s.python_line,
                       s.python_function);
  std::string name = !s.symbol.empty() ? s.symbol : fmt::format("+0x{:x}", s.offset);
  if (size_t paren = name.find('('); paren != std::string::npos && paren > 0) name = name.substr(0, paren);
  if (!s.source.empty()) name += " (" + s.source.substr(s.source.rfind('/') + 1) + ")";
  else name += " [" + s.module.substr(s.module.rfind('/') + 1) + "]";
  return name;
}

class Tuner {
 public:
  explicit Tuner(TuneOptions o) : o_(std::move(o)), symbolizer_(o_.symbols.make()) {}
  int run();

 private:
  bool make_work_dir();
  // Runs COMMAND once; false (one line printed) when it failed.
  bool run_once(RunKind kind, int candidate, uint32_t rep, const std::string& policy_file, Run& out);
  std::string write_work_policy(const std::string& name, const policy::Policy& p);
  model::Job load_job(const std::vector<std::string>& traces);
  void measure(const model::Job& job, Run& run) const;
  std::vector<const Run*> group(RunKind kind, int candidate = -1) const;
  tune::CandidateSamples samples(size_t candidate, const std::vector<const Run*>& now) const;
  const Run* median_run(const std::vector<const Run*>& runs) const;
  uint32_t runs_left() const { return static_cast<uint32_t>(o_.max_runs) - static_cast<uint32_t>(runs_.size()); }
  int fail_run(const Run& r, const std::string& why);
  // What the runs measured, for the report, the summary and the policy.
  struct Measured {
    std::vector<Outcome> outcomes;
    std::vector<const Run*> baseline, combined, winning;  // winning: the runs that measure the kept set
    std::vector<size_t> kept;
    std::string comparison_note;
    std::vector<double> base_wall, combined_wall;
    double combined_effect = 0, combined_noise = 0;
  };
  render::TuneReport report_of(const Measured& m);
  policy::Policy winning_policy(const Measured& m) const;
  void print_summary(const Measured& m) const;
  int finish(const policy::Policy& winning, const std::string& report);
  void cleanup();

  TuneOptions o_;
  std::unique_ptr<symbolize::Symbolizer> symbolizer_;
  std::string work_, command_line_;
  bool temp_work_ = false;
  int exit_status_ = 1;  // of the last failed step
  bool report_simulated_ = false;  // the observe run was on simulated CUDA
  std::deque<Run> runs_;  // a deque: groups of runs point into it while more are added
  std::vector<std::string> reference_checksums_;
  analyses::PolicyCandidates candidates_;
  std::vector<std::set<std::string>> candidate_sites_;  // per candidate: site ids of its copies
};

bool Tuner::make_work_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!o_.keep_dir.empty()) {
    fs::create_directories(o_.keep_dir, ec);
    if (ec || !fs::is_directory(o_.keep_dir)) {
      std::fprintf(stderr, "%s: cannot create --keep-traces %s: %s\n", kCmd, o_.keep_dir.c_str(),
                   ec ? ec.message().c_str() : "not a directory");
      return false;
    }
    if (!fs::is_empty(o_.keep_dir, ec)) {
      std::fprintf(stderr, "%s: --keep-traces %s is not empty\n", kCmd, o_.keep_dir.c_str());
      return false;
    }
    work_ = fs::absolute(o_.keep_dir).lexically_normal().string();
    return true;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/cuxfer-tune-XXXXXX";
  if (!::mkdtemp(templ.data())) {
    std::fprintf(stderr, "%s: cannot make a temporary directory %s: %s\n", kCmd, templ.c_str(), std::strerror(errno));
    return false;
  }
  work_ = templ;
  temp_work_ = true;
  return true;
}

void Tuner::cleanup() {
  if (!temp_work_) return;
  std::error_code ec;
  std::filesystem::remove_all(work_, ec);
}

std::string Tuner::write_work_policy(const std::string& name, const policy::Policy& p) {
  const std::string path = work_ + "/" + name;
  return write_output(path, policy::write_policy(p), kCmd) ? path : std::string();
}

int Tuner::fail_run(const Run& r, const std::string& why) {
  std::fprintf(stderr, "%s: run %u (%s): %s; its output is in %s%s\n", kCmd, r.number, r.label.c_str(), why.c_str(),
               r.log.c_str(), temp_work_ ? " (kept)" : "");
  return 1;
}

bool Tuner::run_once(RunKind kind, int candidate, uint32_t rep, const std::string& policy_file, Run& r) {
  r = Run{};
  r.kind = kind;
  r.candidate = candidate;
  r.number = static_cast<uint32_t>(runs_.size()) + 1;
  const size_t n = candidates_.policy.entries.size();
  const std::string reps = fmt::format("rep {}/{}", rep, o_.reps);
  switch (kind) {
    case RunKind::Observe: r.label = "observe, CUXFER_FINGERPRINT_MIN=1"; break;
    case RunKind::Baseline: r.label = "baseline, no policy, " + reps; break;
    case RunKind::Combined: r.label = fmt::format("all {} candidate{}, {}", n, n == 1 ? "" : "s", reps); break;
    case RunKind::Solo:
      r.label = fmt::format("candidate {} alone ({} {}), {}", candidate + 1,
                            policy::path_name(candidates_.policy.entries[candidate].path),
                            site_label(candidates_.policy.entries[candidate].site), reps);
      break;
    case RunKind::Confirm: r.label = "the kept candidates, " + reps; break;
  }
  r.dir = fmt::format("{}/run-{:02}", work_, r.number);
  r.log = r.dir + ".log";

  launcher::RecordSettings s;
  s.output_dir = r.dir;
  s.rewrite = "off";  // the baseline is observe only; a policy's entries are the only change
  // Every run pays CUPTI's per-copy cost alike: with --cupti=auto the
  // governor turns the copy records on and off by the run's copy rate and
  // by sample windows, which moves the call sites' CPU-blocked times from
  // run to run (gpu.tune.* saw 12-160 % noise with it, 2026-12-01).
  s.cupti = "on";
  s.shim = o_.shim;
  s.policy = policy_file;
  s.quiet = true;
  s.command_name = kCmd;
  s.command = o_.command;
  if (kind == RunKind::Observe) {
    s.extra_env["CUXFER_FINGERPRINT"] = "1";
    s.extra_env["CUXFER_FINGERPRINT_MIN"] = "1";
  }
  launcher::PreparedRecording prepared;
  launcher::PrepareResult pr = launcher::prepare_recording(s, prepared);
  if (!pr.ok) {
    std::fprintf(stderr, "%s: %s\n", kCmd, pr.error.c_str());
    exit_status_ = pr.exit_status;
    return false;
  }
  if (policy_file.empty()) prepared.unset.push_back("CUXFER_POLICY");  // an inherited one must not apply

  const int log_fd = ::open(r.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", kCmd, r.log.c_str(), std::strerror(errno));
    exit_status_ = 1;
    return false;
  }
  launcher::RecordedRun rec = launcher::run_recording(prepared, {log_fd, log_fd});
  ::close(log_fd);
  exit_status_ = 1;
  if (!rec.error.empty()) {
    std::fprintf(stderr, "%s: %s\n", kCmd, rec.error.c_str());
    return false;
  }
  if (!rec.child.started) {
    std::fprintf(stderr, "%s: cannot run %s: %s\n", kCmd, prepared.program.c_str(),
                 std::strerror(rec.child.error_number));
    exit_status_ = rec.child.error_number == ENOENT ? 127 : 126;
    return false;
  }
  r.wall_ns = rec.wall_ns;
  for (const auto& t : rec.traces) r.traces.push_back(t.trace_path);
  runs_.push_back(r);  // counted against --max-runs from here, failed or not
  Run& stored = runs_.back();
  if (!o_.quiet)
    std::fprintf(stderr, "%s: run %u of at most %llu: %s: %s\n", kCmd, r.number,
                 static_cast<unsigned long long>(o_.max_runs), r.label.c_str(), seconds(r.wall_ns).c_str());
  const int ws = rec.child.wait_status;
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    fail_run(r, o_.command[0] + " " + launcher::describe_wait_status(ws) + " (every run must exit 0)");
    return false;
  }
  if (r.traces.empty()) {
    fail_run(r, "no trace written (does " + o_.command[0] + " use CUDA?)");
    return false;
  }
  const std::vector<std::string> sums = checksums(read_file(r.log));
  if (kind == RunKind::Observe) {
    reference_checksums_ = sums;
  } else if (sums != reference_checksums_) {
    fail_run(r, fmt::format("its results differ from the observe run's ({} vs {}): the command is not repeatable, "
                            "or a candidate changed its results",
                            sums.empty() ? "no checksum=" : sums.front(),
                            reference_checksums_.empty() ? "no checksum=" : reference_checksums_.front()));
    return false;
  }
  if (kind != RunKind::Observe) {
    model::Job job = load_job(stored.traces);
    measure(job, stored);
  }
  r = stored;
  exit_status_ = 0;
  return true;
}

model::Job Tuner::load_job(const std::vector<std::string>& traces) {
  std::vector<std::string> errors;
  auto loaded = load_traces(traces, kCmd, errors);
  return model::build_job(std::move(loaded), *symbolizer_, o_.symbols.python_sites);
}

void Tuner::measure(const model::Job& job, Run& run) const {
  // Name every job site as the policy does (build id + offset, or a Python line).
  std::vector<std::string> ids(job.sites.size());
  for (uint32_t i = 0; i < job.sites.size(); ++i) {
    policy::Site id;
    std::string why;
    if (analyses::identify_site(job, i, policy::SiteKind::Call, id, why)) ids[i] = policy::site_identity(id);
  }
  run.per_candidate.assign(candidate_sites_.size(), {});
  std::vector<std::vector<size_t>> site_candidates(job.sites.size());
  for (size_t i = 0; i < job.sites.size(); ++i)
    for (size_t c = 0; c < candidate_sites_.size(); ++c)
      if (!ids[i].empty() && candidate_sites_[c].count(ids[i])) site_candidates[i].push_back(c);
  for (const model::Call& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy || c.failed() || c.site == model::kNoSite) continue;
    for (size_t k : site_candidates[c.site]) {
      SiteStats& s = run.per_candidate[k];
      ++s.calls;
      s.bytes += c.bytes();
      s.cpu_ns += c.cpu_ns();
      const bool mapped = c.event->src_kind == kMemKindMapped || c.event->dst_kind == kMemKindMapped;
      if (!mapped) s.dma_bytes += c.bytes();
      if (!mapped && c.cls.memory == trace::MemKind::Pageable && !c.staged() && !c.registered())
        s.pageable_path_bytes += c.bytes();
    }
  }
  for (const auto& p : job.processes) {
    for (const auto& note : p.trace.notes)
      if (note.rfind("policy: ", 0) == 0 && run.policy_note.empty()) run.policy_note = note;
  }
}

std::vector<const Run*> Tuner::group(RunKind kind, int candidate) const {
  std::vector<const Run*> out;
  for (const Run& r : runs_)
    if (r.kind == kind && (kind != RunKind::Solo || r.candidate == candidate)) out.push_back(&r);
  return out;
}

tune::CandidateSamples Tuner::samples(size_t c, const std::vector<const Run*>& now) const {
  tune::CandidateSamples s;
  s.zero_copy = candidates_.policy.entries[c].path == policy::Path::ZeroCopy;
  for (const Run* r : group(RunKind::Baseline)) {
    s.base_site_ns.push_back(static_cast<double>(r->per_candidate[c].cpu_ns));
    s.base_wall_ns.push_back(static_cast<double>(r->wall_ns));
  }
  for (const Run* r : now) {
    s.now_site_ns.push_back(static_cast<double>(r->per_candidate[c].cpu_ns));
    s.now_wall_ns.push_back(static_cast<double>(r->wall_ns));
  }
  return s;
}

// The run of median wall time (the lower of the middle two for an even count).
const Run* Tuner::median_run(const std::vector<const Run*>& runs) const {
  if (runs.empty()) return nullptr;
  std::vector<const Run*> sorted = runs;
  std::sort(sorted.begin(), sorted.end(), [](const Run* a, const Run* b) { return a->wall_ns < b->wall_ns; });
  return sorted[(sorted.size() - 1) / 2];
}

std::string quote_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}


const char* verdict_name(const Outcome& o) { return o.kept ? "KEEP" : "reject"; }

int Tuner::run() {
  command_line_ = quote_command(o_.command);
  if (!make_work_dir()) return 1;
  const uint32_t reps = static_cast<uint32_t>(o_.reps);

  // 1. Observe, and the candidates.
  Run observe;
  if (!run_once(RunKind::Observe, -1, 1, "", observe)) return exit_status_;
  std::string profile_note;
  {
    model::Job job = load_job(observe.traces);
    std::optional<model::MachineProfile> profile;
    if (!choose_profile(job, o_.profile_path, o_.no_profile, kCmd, profile, profile_note)) return 1;
    analyses::Thresholds thresholds;
    if (profile) thresholds.profile = &*profile;
    const analyses::Report report = analyses::analyze(job, thresholds);
    // Speculative candidates too: measuring them is what tune is for.
    candidates_ = analyses::derive_policy(job, report, thresholds, analyses::Speculation::Propose);
    report_simulated_ = report.simulated;
  }
  const size_t n = candidates_.policy.entries.size();
  for (const auto& sites : candidates_.copy_sites) {
    std::set<std::string> ids;
    for (const auto& s : sites) ids.insert(policy::site_identity(s));
    candidate_sites_.push_back(std::move(ids));
  }
  if (n == 0) {
    if (!o_.quiet) std::fprintf(stderr, "%s: no candidates: no finding of the observe run supports a policy entry\n", kCmd);
    policy::Policy empty;
    empty.generator = std::string("cuxfer ") + CUXFER_VERSION + " tune";
    empty.comment = "cuxfer tune found no candidates for: " + command_line_;
    std::string text = fmt::format("cuxfer tune report\ncommand: {}\n", command_line_);
    text += "\nNo candidates: no finding of the observe run supports a policy entry; the policy is empty.\n";
    if (!candidates_.skipped.empty()) text += "Skipped:\n";
    for (const auto& line : candidates_.skipped) text += "  " + line + "\n";
    return finish(empty, text);
  }
  const std::string all_file = write_work_policy("candidates.json", candidates_.policy);
  if (all_file.empty()) return 1;

  // 2. Baseline and all-candidate runs, interleaved.
  for (uint32_t i = 1; i <= reps; ++i) {
    Run r;
    if (!run_once(RunKind::Baseline, -1, i, "", r)) return exit_status_;
    if (!run_once(RunKind::Combined, -1, i, all_file, r)) return exit_status_;
  }
  const auto baseline = group(RunKind::Baseline), combined = group(RunKind::Combined);
  std::vector<Outcome> outcomes(n);
  std::vector<tune::CombinedOutcome> plan_input(n);
  for (size_t c = 0; c < n; ++c) {
    outcomes[c].judgement = tune::judge(samples(c, combined));
    outcomes[c].measured_in = n == 1 ? "alone" : "with all";
    outcomes[c].group = RunKind::Combined;
    plan_input[c] = {candidates_.policy.entries[c].path == policy::Path::ZeroCopy, outcomes[c].judgement.keep(),
                     candidates_.policy.entries[c].estimated_gain_ns.value_or(0)};
  }
  std::vector<double> base_wall, combined_wall;
  for (const Run* r : baseline) base_wall.push_back(static_cast<double>(r->wall_ns));
  for (const Run* r : combined) combined_wall.push_back(static_cast<double>(r->wall_ns));
  const double combined_effect = tune::relative_effect(base_wall, combined_wall);
  const double combined_noise = tune::comparison_noise(base_wall, combined_wall);
  const bool combined_worse = combined_effect < -combined_noise;

  // 3. Candidates on their own, within the bound.
  const std::vector<size_t> solo = tune::plan_solo_runs(plan_input, combined_worse, reps, runs_left());
  for (size_t c : solo) {
    policy::Policy one;
    one.generator = candidates_.policy.generator;
    one.entries.push_back(candidates_.policy.entries[c]);
    const std::string file = write_work_policy(fmt::format("candidate-{}.json", c + 1), one);
    if (file.empty()) return 1;
    for (uint32_t i = 1; i <= reps; ++i) {
      Run r;
      if (!run_once(RunKind::Solo, static_cast<int>(c), i, file, r)) return exit_status_;
    }
    outcomes[c].judgement = tune::judge(samples(c, group(RunKind::Solo, static_cast<int>(c))));
    outcomes[c].measured_in = "alone";
    outcomes[c].group = RunKind::Solo;
  }
  std::vector<tune::Standing> standing(n);
  for (size_t c = 0; c < n; ++c)
    standing[c] = {outcomes[c].judgement, plan_input[c].zero_copy, outcomes[c].group == RunKind::Solo};
  tune::settle_unmeasured(standing, combined_effect, combined_noise);
  for (size_t c = 0; c < n; ++c) {
    outcomes[c].judgement = standing[c].judgement;
    outcomes[c].kept = outcomes[c].judgement.keep();
  }

  // 4. The winning set, and the runs that measure it.
  std::vector<size_t> kept;
  for (size_t c = 0; c < n; ++c)
    if (outcomes[c].kept) kept.push_back(c);
  std::vector<const Run*> winning_runs = combined;
  std::string comparison_note;
  switch (tune::choose_winning_runs(standing, runs_left(), reps)) {
    case tune::WinningRuns::Combined:
      break;
    case tune::WinningRuns::Solo:
      winning_runs = group(RunKind::Solo, static_cast<int>(kept[0]));
      break;
    case tune::WinningRuns::Confirm: {
      policy::Policy w;
      for (size_t c : kept) w.entries.push_back(candidates_.policy.entries[c]);
      const std::string file = write_work_policy("kept.json", w);
      if (file.empty()) return 1;
      for (uint32_t i = 1; i <= reps; ++i) {
        Run r;
        if (!run_once(RunKind::Confirm, -1, i, file, r)) return exit_status_;
      }
      winning_runs = group(RunKind::Confirm);
      std::vector<double> w_wall;
      for (const Run* r : winning_runs) w_wall.push_back(static_cast<double>(r->wall_ns));
      const double e = tune::relative_effect(base_wall, w_wall), noise = tune::comparison_noise(base_wall, w_wall);
      if (tune::confirm_rejects(e, noise)) {
        for (size_t c : kept) {
          outcomes[c].kept = false;
          outcomes[c].judgement.verdict = tune::Verdict::Slower;
          outcomes[c].judgement.reason = fmt::format("the kept candidates together made the whole run {} slower "
                                                     "(noise {}) in the confirming runs",
                                                     tune::percent(-e), tune::percent(noise));
        }
        kept.clear();
      }
      break;
    }
    case tune::WinningRuns::CombinedNoRoom:
      comparison_note = fmt::format("The kept candidates were not run as a set (--max-runs {} left no room): the "
                                    "comparison below is with the runs that applied all {} candidates.",
                                    o_.max_runs, n);
      break;
    case tune::WinningRuns::NoneKept:
      comparison_note = n == 1 ? std::string("No candidate was kept: the comparison below is with the runs that "
                                             "applied the candidate, for what it did.")
                               : fmt::format("No candidate was kept: the comparison below is with the runs that "
                                             "applied all {} candidates, for what they did.", n);
      break;
  }

  Measured m{std::move(outcomes), baseline, combined, winning_runs, kept, comparison_note, base_wall, combined_wall,
             combined_effect, combined_noise};
  const std::string report_text = render::render_tune_report(report_of(m));
  if (!o_.quiet) print_summary(m);
  return finish(winning_policy(m), report_text);
}

render::TuneReport Tuner::report_of(const Measured& m) {
  const double base_noise = tune::relative_noise(m.base_wall);
  render::TuneReport rep;
  rep.command_line = command_line_;
  rep.runs = runs_.size();
  rep.max_runs = o_.max_runs;
  for (const Run& r : runs_) {
    switch (r.kind) {
      case RunKind::Observe: ++rep.observe_runs; break;
      case RunKind::Baseline: ++rep.baseline_runs; break;
      case RunKind::Combined: ++rep.combined_runs; break;
      case RunKind::Solo: ++rep.solo_runs; break;
      case RunKind::Confirm: ++rep.confirm_runs; break;
    }
  }
  rep.reps = o_.reps;
  rep.baseline_wall_ns = tune::median(m.base_wall);
  rep.baseline_noise = base_noise;
  rep.min_noise = tune::kMinNoise;
  rep.combined_wall_ns = tune::median(m.combined_wall);
  rep.combined_effect = m.combined_effect;
  rep.combined_noise = m.combined_noise;
  rep.simulated = report_simulated_;
  const size_t n = candidates_.policy.entries.size();
  for (size_t c = 0; c < n; ++c) {
    const policy::Entry& e = candidates_.policy.entries[c];
    const Outcome& out = m.outcomes[c];
    const auto now = out.group == RunKind::Solo ? group(RunKind::Solo, static_cast<int>(c)) : m.combined;
    const tune::CandidateSamples smp = samples(c, now);
    const auto median_of = [&](const std::vector<const Run*>& runs, uint64_t SiteStats::*field) {
      std::vector<double> v;
      for (const Run* r : runs) v.push_back(static_cast<double>(r->per_candidate[c].*field));
      return tune::median(v);
    };
    render::TuneCandidateRow row;
    row.kept = out.kept;
    row.path = policy::path_name(e.path);
    row.site = site_label(e.site);
    row.estimated_gain_ns = e.estimated_gain_ns.value_or(0);
    row.alone = out.measured_in == "alone";
    row.base_site_ns = tune::median(smp.base_site_ns);
    row.now_site_ns = tune::median(smp.now_site_ns);
    row.base_site_runs = smp.base_site_ns;
    row.now_site_runs = smp.now_site_ns;
    row.site_effect = out.judgement.site_effect;
    row.site_noise = out.judgement.site_noise;
    row.base_wall_ns = tune::median(smp.base_wall_ns);
    row.now_wall_ns = tune::median(smp.now_wall_ns);
    row.wall_effect = out.judgement.wall_effect;
    row.wall_noise = out.judgement.wall_noise;
    row.base_pageable_bytes = median_of(m.baseline, &SiteStats::pageable_path_bytes);
    row.now_pageable_bytes = median_of(now, &SiteStats::pageable_path_bytes);
    row.base_dma_bytes = median_of(m.baseline, &SiteStats::dma_bytes);
    row.now_dma_bytes = median_of(now, &SiteStats::dma_bytes);
    row.reason = out.judgement.reason;
    rep.candidates.push_back(std::move(row));
  }
  rep.skipped = candidates_.skipped;
  std::set<std::string> notes;
  for (const Run& r : runs_)
    if (!r.policy_note.empty()) notes.insert(r.policy_note);
  rep.shim_notes.assign(notes.begin(), notes.end());
  const Run* base_median = median_run(m.baseline);
  const Run* new_median = median_run(m.winning);
  rep.baseline_run = base_median->number;
  rep.compared_run = new_median->number;
  rep.compared_with_all = m.kept.empty() || !m.comparison_note.empty();
  rep.comparison_note = m.comparison_note;
  {
    model::Job b = load_job(base_median->traces), w = load_job(new_median->traces);
    analyses::Diff d = analyses::diff_jobs(b, w);
    d.base.traces = base_median->traces;
    d.now.traces = new_median->traces;
    render::DiffTextOptions opts;
    opts.width = 100;
    opts.top_sites = 20;
    opts.noise_note =
        "One run of each, the median ones: the verdicts above weigh every run against run-to-run noise.";
    rep.diff_text = render::render_diff_text(d, opts);
  }

  return rep;
}

policy::Policy Tuner::winning_policy(const Measured& m) const {
  policy::Policy winning;
  winning.generator = std::string("cuxfer ") + CUXFER_VERSION + " tune";
  winning.comment = fmt::format("Kept by cuxfer tune: {} of {} candidates, measured over {} runs of: {}. "
                                "Each entry's reason ends with what was measured.",
                                m.kept.size(), candidates_.policy.entries.size(), runs_.size(), command_line_);
  for (size_t c : m.kept) {
    policy::Entry e = candidates_.policy.entries[c];
    e.reason += (e.reason.empty() ? "" : "; ") + std::string("measured by cuxfer tune ") +
                (m.outcomes[c].measured_in == "alone" ? "alone" : "with all candidates") + ": " +
                m.outcomes[c].judgement.reason;
    winning.entries.push_back(std::move(e));
  }
  return winning;
}

void Tuner::print_summary(const Measured& m) const {
  const size_t n = candidates_.policy.entries.size();
  const double base_noise = tune::relative_noise(m.base_wall);
  std::string summary = fmt::format("{}: kept {} of {} candidate{} ({} runs)\n", kCmd, m.kept.size(), n,
                                    n == 1 ? "" : "s", runs_.size());
  for (size_t c = 0; c < n; ++c)
    summary += fmt::format("  {:<6} {:<9} {}: {}\n", verdict_name(m.outcomes[c]),
                           policy::path_name(candidates_.policy.entries[c].path),
                           site_label(candidates_.policy.entries[c].site), m.outcomes[c].judgement.reason);
  if (base_noise > 0.10)
    summary += fmt::format("  the baseline runs' wall times vary by {}: is the command repeatable?\n",
                           tune::percent(base_noise));
  std::fputs(summary.c_str(), stdout);
}

int Tuner::finish(const policy::Policy& winning, const std::string& report) {
  if (!write_output(o_.output, policy::write_policy(winning), kCmd)) return 1;
  if (!write_output(o_.report, report, kCmd)) return 1;
  if (!o_.quiet)
    std::fprintf(stdout, "%s: wrote %s (%zu entr%s) and %s%s\n", kCmd, o_.output.c_str(), winning.entries.size(),
                 winning.entries.size() == 1 ? "y" : "ies", o_.report.c_str(),
                 temp_work_ ? "" : (" (traces in " + work_ + ")").c_str());
  cleanup();
  return 0;
}

}  // namespace

int run_tune(std::vector<std::string> args) {
  ArgReader in(kCmd, std::move(args));
  TuneOptions o;
  OptionTable options(kTuneHelp, Positionals::Command);
  options.group([&](ArgReader& r) { return o.symbols.take(r); })
      .value("reps", 0,
             [&](const std::string& v, ArgReader& r) {
               if (!parse_unsigned(v, o.reps) || o.reps < 2 || o.reps > 50)
                 r.fail(fmt::format("--reps needs a number from 2 to 50, got '{}'", v));
             })
      .value("max-runs", 0,
             [&](const std::string& v, ArgReader& r) {
               if (!parse_unsigned(v, o.max_runs) || o.max_runs > 10000)
                 r.fail(fmt::format("--max-runs needs a number of runs, got '{}'", v));
             })
      .value("output", 'o',
             [&](const std::string& v, ArgReader& r) {
               if (v.empty() || v == "-") r.fail("--output needs a file name");
               o.output = v;
             })
      .value("report", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty() || v == "-") r.fail("--report needs a file name");
               o.report = v;
             })
      .flag("force", 0, [] {})  // files are always replaced
      .value("keep-traces", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--keep-traces needs a directory");
               o.keep_dir = v;
             })
      .value("shim", 0, [&](const std::string& v, ArgReader&) { o.shim = v; })
      .value("profile", 0, [&](const std::string& v, ArgReader&) { o.profile_path = v; })
      .flag("no-profile", 0, [&] { o.no_profile = true; })
      .flag("quiet", 'q', [&] { o.quiet = true; });
  if (auto status = options.read(in)) return *status;
  o.command = in.rest();
  if (o.command.empty()) {
    std::fprintf(stderr, "%s: no command given (usage: cuxfer tune [options] -- COMMAND [ARGS...])\n", kCmd);
    return kExitUsage;
  }
  const uint32_t minimum = tune::minimum_runs(static_cast<uint32_t>(o.reps));
  if (o.max_runs < minimum) {
    std::fprintf(stderr, "%s: --max-runs %llu is fewer than the %u runs --reps %llu needs (1 observe, %llu baseline, "
                 "%llu with the candidates)\n", kCmd, static_cast<unsigned long long>(o.max_runs), minimum,
                 static_cast<unsigned long long>(o.reps), static_cast<unsigned long long>(o.reps),
                 static_cast<unsigned long long>(o.reps));
    return kExitUsage;
  }
  if (o.output == o.report) {
    std::fprintf(stderr, "%s: the policy and the report cannot both be %s\n", kCmd, o.output.c_str());
    return kExitUsage;
  }
  // Refuse before the (long) runs when a file's directory cannot take it.
  for (const std::string* f : {&o.output, &o.report}) {
    const size_t slash = f->rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : f->substr(0, slash);
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      std::fprintf(stderr, "%s: cannot write %s: %s\n", kCmd, f->c_str(), std::strerror(errno));
      return 1;
    }
  }
  Tuner tuner(std::move(o));
  return tuner.run();
}

}  // namespace cuxfer::cli
