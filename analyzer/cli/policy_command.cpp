#include "analyzer/cli/policy_command.h"

#include <unistd.h>

#include <cstdio>

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

std::string summary(const analyses::PolicyCandidates& c, const std::string& where) {
  std::string out;
  size_t calls = 0, allocations = 0;
  for (const auto& e : c.policy.entries) (e.site.kind == policy::SiteKind::Call ? calls : allocations)++;
  out += fmt::format("cuxfer policy: wrote {}: {} entr{} ({} call site{}, {} allocation site{})\n", where,
                     c.policy.entries.size(), c.policy.entries.size() == 1 ? "y" : "ies", calls, calls == 1 ? "" : "s",
                     allocations, allocations == 1 ? "" : "s");
  if (!c.policy.entries.empty()) {
    out += fmt::format("  {:<11} {:<10} {:>10}  {:<36} {}\n", "path", "site", "est. gain", "findings", "where");
    for (const auto& e : c.policy.entries) {
      std::string findings;
      for (const auto& f : e.findings) findings += (findings.empty() ? "" : ", ") + f;
      out += fmt::format("  {:<11} {:<10} {:>10}  {:<36} {}\n", policy::path_name(e.path),
                         policy::site_kind_name(e.site.kind), text::format_duration(e.estimated_gain_ns.value_or(0)),
                         findings, site_name(e.site));
    }
    out += "  (gains are estimates: docs/policy.md says how each is made)\n";
  } else {
    out += "  no candidates: no finding supports a policy entry in these traces\n";
  }
  if (!c.skipped.empty()) {
    out += fmt::format("  skipped {}:\n", c.skipped.size());
    for (const auto& s : c.skipped) out += "    " + s + "\n";
  }
  return out;
}

}  // namespace

int run_policy(std::vector<std::string> args) {
  ArgReader in("cuxfer policy", std::move(args));
  SymbolOptions symbols;
  std::string output = "cuxfer-policy.json", profile_path;
  bool no_profile = false, quiet = false;
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
  analyses::PolicyCandidates candidates = analyses::derive_policy(job, report, thresholds);
  candidates.policy.generator = std::string("cuxfer ") + CUXFER_VERSION + " policy";
  candidates.policy.comment = "Candidates from the findings of " + std::to_string(job.processes.size()) +
                              " process trace(s)" + (report.simulated ? " recorded on SIMULATED CUDA" : "") +
                              ". Gains are estimates (" + profile_note.substr(profile_note.rfind("estimates: ", 0) == 0 ? 11 : 0) + "). Review before use: docs/policy.md.";
  const std::string text = policy::write_policy(candidates.policy);
  if (!write_output(output, text, "cuxfer policy")) return 1;
  if (!quiet) {
    std::string s = summary(candidates, output == "-" ? "standard output" : output);
    std::fputs(s.c_str(), output == "-" ? stderr : stdout);
  }
  return 0;
}

}  // namespace cuxfer::cli
