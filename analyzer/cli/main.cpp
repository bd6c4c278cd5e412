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
#include "analyzer/cli/tune_command.h"
#include "analyzer/cli/record_command.h"

namespace {

const char* const kUsage =
    R"(Usage: cuxfer <command> [options] [args]

Finds slow host<->device transfers in CUDA programs (pageable memory, async
copies that are not, storms of tiny copies) and shows where they come from.

Commands:
  record [options] -- COMMAND [ARGS...]
                 run COMMAND with the cuxfer shim preloaded; writes one trace
                 per process that uses CUDA
  report [--json|--csv] [--top N] [-o FILE] TRACE...
                 read traces and report totals, call sites and findings
  export --perfetto FILE TRACE...
                 write the calls and GPU activity as Chrome/Perfetto
                 trace-event JSON (ui.perfetto.dev, chrome://tracing)
  diff [--json] [-o FILE] BASE NEW
                 compare two runs of the same workload (e.g. without and with
                 --rewrite=pin) call site by call site; time recovered
  policy [-o FILE] [--force] TRACE...
                 write a policy file (docs/policy.md) with the rewrite paths
                 the findings support per call or allocation site (stage,
                 register, zero_copy), each with its estimated gain; apply it
                 with record --policy FILE
  tune [--reps N] [--max-runs M] [-o FILE] [--report FILE] -- COMMAND [ARGS...]
                 run COMMAND under observe, derive policy candidates, measure
                 them in repeated runs and write the policy of those that made
                 it faster, with a measured report (docs/tune.md)
  check --budget FILE [--junit FILE] TRACE...
                 check the traces' memory movement against a budget file
                 (docs/check.md): exit 0 kept, 1 not, one line per violation;
                 --write-budget FILE writes one from a known-good run
  calibrate [-o FILE] [--device N]
                 measure this machine's transfer curves (pinned, pageable,
                 registration, host memcpy) into a machine profile that
                 report and record --rewrite=pin use
  help [COMMAND] show help for a command

Options:
  -h, --help     show this help
  --version      print the version

Example:
  cuxfer record -- python train.py
  cuxfer report cuxfer-python-*.trace

Documentation: docs/cli.md, docs/report.md, docs/check.md, docs/policy.md, docs/tune.md, docs/trace-format.md.
)";

int help_for(const std::string& command) {
  if (command == "record") {
    std::fputs(cuxfer::cli::kRecordHelp, stdout);
  } else if (command == "report") {
    std::fputs(cuxfer::cli::kReportHelp, stdout);
  } else if (command == "export") {
    std::fputs(cuxfer::cli::kExportHelp, stdout);
  } else if (command == "diff") {
    std::fputs(cuxfer::cli::kDiffHelp, stdout);
  } else if (command == "calibrate") {
    std::fputs(cuxfer::cli::kCalibrateHelp, stdout);
  } else if (command == "policy") {
    std::fputs(cuxfer::cli::kPolicyHelp, stdout);
  } else if (command == "check") {
    std::fputs(cuxfer::cli::kCheckHelp, stdout);
  } else if (command == "tune") {
    std::fputs(cuxfer::cli::kTuneHelp, stdout);
  } else {
    std::fprintf(stderr, "cuxfer: no command '%s' (commands: record, report, diff, export, check, calibrate, policy, tune)\n", command.c_str());
    return cuxfer::cli::kExitUsage;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return cuxfer::cli::kExitUsage;
  }
  const std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version" || command == "-V") {
    std::printf("cuxfer %s (commit %s, built %s)\n", CUXFER_BUILD_VERSION, CUXFER_BUILD_COMMIT, CUXFER_BUILD_DATE);
    return 0;
  }
  if (command == "help") {
    if (rest.empty()) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return help_for(rest[0]);
  }
  if (command == "record") return cuxfer::cli::run_record(std::move(rest));
  if (command == "report") return cuxfer::cli::run_report(std::move(rest));
  if (command == "export") return cuxfer::cli::run_export(std::move(rest));
  if (command == "diff") return cuxfer::cli::run_diff(std::move(rest));
  if (command == "calibrate") return cuxfer::cli::run_calibrate(std::move(rest));
  if (command == "policy") return cuxfer::cli::run_policy(std::move(rest));
  if (command == "tune") return cuxfer::cli::run_tune(std::move(rest));
  if (command == "check") return cuxfer::cli::run_check(std::move(rest));
  if (command.size() > 1 && command[0] == '-') {
    std::fprintf(stderr, "cuxfer: unknown option '%s' (try 'cuxfer --help')\n", command.c_str());
    return cuxfer::cli::kExitUsage;
  }
  std::fprintf(stderr, "cuxfer: unknown command '%s' (commands: record, report, diff, export, check, calibrate, policy, tune; try 'cuxfer --help')\n",
               command.c_str());
  return cuxfer::cli::kExitUsage;
}
