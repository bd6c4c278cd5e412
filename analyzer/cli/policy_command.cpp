#include "analyzer/cli/policy_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "analyzer/analyses/policy_candidates.h"
#include "analyzer/analyses/report.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/text/units.h"
#include "policy/policy.h"

namespace cuxfer::cli {

const char* const kPolicyHelp =
    R"(Usage: cuxfer policy [options] TRACE...

Reads one or more cuxfer traces (one job; a directory stands for the
cuxfer-*.trace files in it) and writes a policy file (cuxfer.policy/1,
docs/policy.md) with the candidates the report's findings support, each with
its estimated gain and the findings behind it:
  register / stage  call sites of rewrite_candidates, large_pageable and
                    async_pageable (register when the site reuses a buffer)
  zero_copy         the allocation site of the device buffer a tiny_storm's
                    copies write into or read from (record with
                    CUXFER_FINGERPRINT_MIN=1 so tiny copies carry their
                    device pointer)
Every entry rests on a finding the report lists. Speculative candidates, which
no report finding supports, are held back (the summary names them):
  zero_copy         (--speculative) the allocation site of a device buffer
                    uploaded whole again and again (whole_uploads): a win only
                    if kernels read it about once per upload, which no trace
                    shows; measure it with cuxfer tune before use
Sites are named by module build id + offset; those that cannot be (no build
id) are skipped, and the summary says so. Review the file, then apply it with
`cuxfer record --policy FILE -- COMMAND`.

Options:
  -o, --output FILE  the policy file (default cuxfer-policy.json; '-': stdout,
                     the summary then goes to stderr)
  --no-symbols       do not open the traced binaries (readable names are then
                     module+offset only; the sites are the same)
  --sysroot DIR      look for the traced binaries under DIR first
  --python-frames user|all, --python-user PKG
                     which Python frame names a Python call site (as for
                     cuxfer report)
  --profile FILE     estimate from this machine profile (cuxfer calibrate)
  --no-profile       estimate without a machine profile
  --speculative      also write the speculative candidates, each marked so in
                     the summary and in its entry's "comment"
  -q, --quiet        no summary
  -h, --help         show this help

Exit status: 0 written (also with no candidates); 1 no trace could be read,
or FILE could not be written; 2 usage error.
)";

namespace {

std::string site_name(const policy::Site& s) {
  std::string name = !s.symbol.empty() ? s.symbol : fmt::format("+0x{:x}", s.offset);
  if (!s.source.empty()) name += " (" + s.source.substr(s.source.rfind('/') + 1) + ")";
  std::string module = s.module.substr(s.module.rfind('/') + 1);
  if (!module.empty()) name += " [" + module + "]";
  return name;
}

// Why a speculative entry is one, and how to find out: said in the summary
// and in the entry's comment, where the user reads it.
constexpr const char* kSpeculativeWhy =
    "whole_uploads is no report finding: zero copy removes a buffer's uploads, but kernels then read it over "
    "the bus, a win only if they read it about once per upload, which no trace shows";
constexpr const char* kHowToMeasure =
    "measure before use: cuxfer tune -- COMMAND keeps an entry only if the run gets faster (docs/tune.md)";

// `text` as lines of at most 100 columns, each indented by `indent`.
std::string paragraph(const std::string& text, const char* indent) {
  std::string out;
  for (const auto& line : text::wrap(text, 100 - std::strlen(indent))) out += indent + line + "\n";
  return out;
}

std::string entry_findings(const policy::Entry& e, bool speculative) {
  std::string findings;
  for (const auto& f : e.findings) findings += (findings.empty() ? "" : ", ") + f;
  return speculative ? findings + " (speculative)" : findings;
}

size_t count_speculative(const analyses::PolicyCandidates& c) {
  return static_cast<size_t>(std::count(c.speculative.begin(), c.speculative.end(), true));
}

std::string summary(const analyses::PolicyCandidates& c, const std::string& where) {
  std::string out;
  size_t calls = 0, allocations = 0;
  for (const auto& e : c.policy.entries) (e.site.kind == policy::SiteKind::Call ? calls : allocations)++;
  const size_t speculative = count_speculative(c);
  out += fmt::format("cuxfer policy: wrote {}: {} entr{} ({} call site{}, {} allocation site{}){}\n", where,
                     c.policy.entries.size(), c.policy.entries.size() == 1 ? "y" : "ies", calls, calls == 1 ? "" : "s",
                     allocations, allocations == 1 ? "" : "s",
                     speculative ? fmt::format(", {} of them SPECULATIVE", speculative) : "");
  if (!c.policy.entries.empty()) {
    size_t width = 8;  // "findings"
    for (size_t i = 0; i < c.policy.entries.size(); ++i)
      width = std::max(width, entry_findings(c.policy.entries[i], c.speculative[i]).size());
    out += fmt::format("  {:<11} {:<10} {:>10}  {:<{}}  {}\n", "path", "site", "est. gain", "findings", width,
                       "where");
    for (size_t i = 0; i < c.policy.entries.size(); ++i) {
      const policy::Entry& e = c.policy.entries[i];
      out += fmt::format("  {:<11} {:<10} {:>10}  {:<{}}  {}\n", policy::path_name(e.path),
                         policy::site_kind_name(e.site.kind), text::format_duration(e.estimated_gain_ns.value_or(0)),
                         entry_findings(e, c.speculative[i]), width, site_name(e.site));
    }
    out += "  (gains are estimates: docs/policy.md says how each is made)\n";
    if (speculative)
      out += paragraph(fmt::format("SPECULATIVE: {} entr{} ({}); {}. The file says so in {} \"comment\".",
                                   speculative, speculative == 1 ? "y" : "ies", kSpeculativeWhy,
                                   kHowToMeasure, speculative == 1 ? "its" : "their"),
                       "  ");
  } else {
    out += "  no candidates: no finding supports a policy entry in these traces\n";
  }
  if (!c.held_back.empty()) {
    const bool one = c.held_back.size() == 1;
    out += paragraph(fmt::format("held back {} speculative candidate{} ({}): cuxfer policy --speculative "
                                 "writes {}, cuxfer tune -- COMMAND measures {}:",
                                 c.held_back.size(), one ? "" : "s", kSpeculativeWhy, one ? "it" : "them",
                                 one ? "it" : "them"),
                     "  ");
    for (const auto& s : c.held_back) out += "    " + s + "\n";
  }
  if (!c.skipped.empty()) {
    out += fmt::format("  skipped {}:\n", c.skipped.size());
    for (const auto& s : c.skipped) out += "    " + s + "\n";
  }
  return out;
}

// A speculative entry says so in the file, in its own comment and the
// file's: whoever applies the file may never have seen the summary.
void mark_speculative(analyses::PolicyCandidates& c) {
  const size_t n = count_speculative(c);
  if (n == 0) return;
  for (size_t i = 0; i < c.policy.entries.size(); ++i)
    if (c.speculative[i])
      c.policy.entries[i].comment = std::string("SPECULATIVE: ") + kSpeculativeWhy + "; " + kHowToMeasure;
  c.policy.comment += fmt::format(" {} entr{} SPECULATIVE (no report finding supports {}): see {} comment.",
                                  n, n == 1 ? "y is" : "ies are", n == 1 ? "it" : "them",
                                  n == 1 ? "its" : "their");
}

}  // namespace

int run_policy(std::vector<std::string> args) {
  ArgReader in("cuxfer policy", std::move(args));
  SymbolOptions symbols;
  std::string output = "cuxfer-policy.json", profile_path;
  bool no_profile = false, quiet = false, speculative = false;
  std::vector<std::string> paths;
  OptionTable options(kPolicyHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .value("output", 'o',
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--output needs a file name");
               output = v;
             })
      .flag("force", 0, [] {})  // files are always replaced
      .value("profile", 0, [&](const std::string& v, ArgReader&) { profile_path = v; })
      .flag("no-profile", 0, [&] { no_profile = true; })
      .flag("speculative", 0, [&] { speculative = true; })
      .flag("quiet", 'q', [&] { quiet = true; });
  if (auto status = options.read(in, &paths)) return *status;
  if (paths.empty()) {
    std::fprintf(stderr, "cuxfer policy: no trace given (usage: cuxfer policy [-o FILE] TRACE...)\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  auto traces = load_traces(paths, "cuxfer policy", errors);
  if (traces.empty()) return 1;
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_sites);
  if (refuse_mixed_runs(job, "cuxfer policy")) return kExitUsage;
  std::optional<model::MachineProfile> profile;
  std::string profile_note;
  if (!choose_profile(job, profile_path, no_profile, "cuxfer policy", profile, profile_note)) return 1;
  analyses::Thresholds thresholds;
  if (profile) thresholds.profile = &*profile;
  const analyses::Report report = analyses::analyze(job, thresholds);
  const auto speculation = speculative ? analyses::Speculation::Propose : analyses::Speculation::HoldBack;
  analyses::PolicyCandidates candidates = analyses::derive_policy(job, report, thresholds, speculation);
  candidates.policy.generator = std::string("cuxfer ") + CUXFER_VERSION + " policy";
  candidates.policy.comment = "Candidates from the findings of " + std::to_string(job.processes.size()) +
                              " process trace(s)" + (report.simulated ? " recorded on SIMULATED CUDA" : "") +
                              ". Gains are estimates (" + profile_note.substr(profile_note.rfind("estimates: ", 0) == 0 ? 11 : 0) + "). Review before use: docs/policy.md.";
  mark_speculative(candidates);
  const std::string text = policy::write_policy(candidates.policy);
  if (!write_output(output, text, "cuxfer policy")) return 1;
  if (!quiet) {
    std::string s = summary(candidates, output == "-" ? "standard output" : output);
    std::fputs(s.c_str(), output == "-" ? stderr : stdout);
  }
  return 0;
}

}  // namespace cuxfer::cli
