// cuxfer: record a program's CUDA host<->device transfers, and report on them.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <cuxfer/build_info.h>

#include "analyzer/cli/calibrate_command.h"
#include "analyzer/cli/check_command.h"
#include "analyzer/cli/diff_command.h"
#include "analyzer/cli/export_command.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/policy_command.h"
#include "analyzer/cli/report_command.h"
#include "analyzer/cli/summarize_command.h"
#include "analyzer/cli/tune_command.h"
#include "analyzer/cli/record_command.h"

namespace {

// One subcommand: how `cuxfer NAME` is run, its own --help, and its entry in
// `cuxfer help`. The overview is made from this table, so a command cannot be
// dispatched without being listed there (tests/unit/analyzer/cli_test.sh,
// help-lists-commands, checks the two against each other).
struct Subcommand {
  const char* name;
  int (*run)(std::vector<std::string>);
  const char* const* help;  // the command's --help text
  const char* synopsis;     // every option but the symbol options; continuation lines start with spaces
  const char* summary;      // what it does, a few indented lines
};

const Subcommand kSubcommands[] = {
    {"record", cuxfer::cli::run_record, &cuxfer::cli::kRecordHelp,
     "record [-o DIR] [--name NAME] [--stack-depth N | --no-stacks]\n"
     "      [--cupti=auto|on|off] [--kernels] [--capture-range=cudaProfilerApi|none]\n"
     "      [--rewrite=pin|off] [--policy FILE] [--check FILE [--any-program]]\n"
     "      [--summary] [--shim PATH] [-q]\n"
     "      -- COMMAND [ARGS...]",
     "run COMMAND with the cuxfer shim preloaded; writes one trace per process\n"
     "that uses CUDA"},
    {"report", cuxfer::cli::run_report, &cuxfer::cli::kReportHelp,
     "report [--json | --csv | --ranges-csv] [--html FILE] [--top N] [-o FILE]\n"
     "      [--stack] [--range NAME] [--profile FILE | --no-profile] [-j N] [--no-stream]\n"
     "      [symbol options] TRACE|SUMMARY...",
     "read traces (or job summaries) and report totals, call sites and\n"
     "findings; --html also writes a self-contained HTML report with plots"},
    {"summarize", cuxfer::cli::run_summarize, &cuxfer::cli::kSummarizeHelp,
     "summarize -o FILE [-j N] [-q] [symbol options] TRACE|SUMMARY...",
     "reduce traces to a small job summary that report merges exactly (run it\n"
     "next to the traces: per node, per rank, per array task)"},
    {"diff", cuxfer::cli::run_diff, &cuxfer::cli::kDiffHelp,
     "diff [--json] [--top N] [-o FILE] [--range NAME] [symbol options]\n"
     "      BASE NEW | --base RUN [--base RUN...] --new RUN [--new RUN...]",
     "compare runs of the same workload (e.g. without and with --rewrite=pin)\n"
     "call site by call site; time recovered, with how far it stands from\n"
     "run-to-run noise when each side has several runs (BASE, NEW: a run, or a\n"
     "folder of run folders)"},
    {"export", cuxfer::cli::run_export, &cuxfer::cli::kExportHelp,
     "export [--perfetto FILE] [--sqlite FILE] [symbol options] TRACE...",
     "write the calls and GPU activity as Chrome/Perfetto trace-event JSON\n"
     "(ui.perfetto.dev) or as an SQLite database for your own SQL"},
    {"policy", cuxfer::cli::run_policy, &cuxfer::cli::kPolicyHelp,
     "policy [-o FILE] [--speculative] [--profile FILE | --no-profile] [-q]\n"
     "      [symbol options] TRACE...",
     "write a policy file (docs/policy.md) with the rewrite paths the findings\n"
     "support per call or allocation site (stage, register, zero_copy), each\n"
     "with its estimated gain; apply it with record --policy FILE"},
    {"tune", cuxfer::cli::run_tune, &cuxfer::cli::kTuneHelp,
     "tune [--reps N] [--max-runs M] [-o FILE] [--report FILE]\n"
     "      [--keep-traces DIR] [--shim PATH] [--profile FILE | --no-profile]\n"
     "      [-q] [symbol options] -- COMMAND [ARGS...]",
     "run COMMAND under observe, derive policy candidates, measure them in\n"
     "repeated runs and write the policy of those that made it faster, with a\n"
     "measured report (docs/tune.md)"},
    {"check", cuxfer::cli::run_check, &cuxfer::cli::kCheckHelp,
     "check --budget FILE [--junit FILE] [--any-program] [symbol options] TRACE...\n"
     "check --write-budget FILE [--margin PCT] [--time-tolerance PCT]\n"
     "      [symbol options] TRACE...",
     "check the traces' memory movement against a budget file (docs/check.md):\n"
     "exit 0 kept, 1 not, one line per violation; --write-budget writes one\n"
     "from a known-good run"},
    {"calibrate", cuxfer::cli::run_calibrate, &cuxfer::cli::kCalibrateHelp,
     "calibrate [-o FILE] [--device N] [--max-size BYTES] [--quick]",
     "measure this machine's transfer curves (pinned, pageable, registration,\n"
     "host memcpy) into a machine profile that report and record --rewrite=pin\n"
     "use"},
};

const char* const kIntroduction =
    R"(Usage: cuxfer <command> [options] [args]

Finds slow host<->device transfers in CUDA programs (pageable memory, async
copies that are not, storms of tiny copies) and shows where they come from.

Commands:
)";

const char* const kClosing =
    R"(  help [COMMAND]
      this overview, or COMMAND's help with every option (also: cuxfer COMMAND --help)

Symbol options (report, summarize, diff, export, policy, tune, check):
  --no-symbols  --sysroot DIR  --python-frames user|all  --python-user PKG,...

Every file a command writes (-o, --html, --sqlite, --write-budget, ...)
replaces one already there, atomically, as cc -o does (docs/cli.md).

Options:
  -h, --help     show this help
  --version      print the version

Examples:
  cuxfer record -o run -- python train.py
  cuxfer report run/
  cuxfer record -o pinned --rewrite=pin -- python train.py
  cuxfer diff run/ pinned/

Documentation: docs/cli.md, docs/report.md, docs/check.md, docs/policy.md, docs/tune.md, docs/trace-format.md.
)";

// Indents every line of `text` by `indent` spaces.
std::string indented(const char* text, const char* indent) {
  std::string out = indent;
  for (const char* p = text; *p; ++p) {
    out += *p;
    if (*p == '\n' && p[1]) out += indent;
  }
  return out + '\n';
}

std::string overview() {
  std::string out = kIntroduction;
  for (const Subcommand& c : kSubcommands) {
    out += indented(c.synopsis, "  ");
    out += indented(c.summary, "      ");
  }
  return out + kClosing;
}

std::string command_names() {
  std::string names;
  for (const Subcommand& c : kSubcommands) names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

const Subcommand* find_subcommand(const std::string& name) {
  for (const Subcommand& c : kSubcommands)
    if (name == c.name) return &c;
  return nullptr;
}

int help_for(const std::string& command) {
  const Subcommand* c = find_subcommand(command);
  if (!c) {
    std::fprintf(stderr, "cuxfer: no command '%s' (commands: %s)\n", command.c_str(), command_names().c_str());
    return cuxfer::cli::kExitUsage;
  }
  std::fputs(*c->help, stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(overview().c_str(), stderr);
    return cuxfer::cli::kExitUsage;
  }
  const std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help") {
    std::fputs(overview().c_str(), stdout);
    return 0;
  }
  if (command == "--version" || command == "-V") {
    std::printf("cuxfer %s (commit %s, built %s)\n", CUXFER_BUILD_VERSION, CUXFER_BUILD_COMMIT, CUXFER_BUILD_DATE);
    return 0;
  }
  if (command == "help") {
    if (rest.empty()) {
      std::fputs(overview().c_str(), stdout);
      return 0;
    }
    return help_for(rest[0]);
  }
  if (const Subcommand* c = find_subcommand(command)) return c->run(std::move(rest));
  if (command.size() > 1 && command[0] == '-') {
    std::fprintf(stderr, "cuxfer: unknown option '%s' (try 'cuxfer --help')\n", command.c_str());
    return cuxfer::cli::kExitUsage;
  }
  std::fprintf(stderr, "cuxfer: unknown command '%s' (commands: %s; try 'cuxfer --help')\n", command.c_str(),
               command_names().c_str());
  return cuxfer::cli::kExitUsage;
}
