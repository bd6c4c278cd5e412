// `cuxfer check --budget FILE TRACE...` and `cuxfer check --write-budget FILE
// TRACE...`: memory movement as a tested property (docs/check.md). The
// decision is check/verdicts' pure function; this is reading the files,
// printing the verdicts and the exit status. `cuxfer record --check FILE`
// runs the same check on the traces it just wrote.
#pragma once

#include <string>
#include <vector>

#include "analyzer/check/budget.h"
#include "analyzer/cli/trace_inputs.h"

namespace cuxfer::cli {

// Exit status: 0 the run keeps the budget (or the budget was written), 1 it
// does not, 2 usage error, unreadable or malformed budget, unreadable traces,
// or a budget for another program.
int run_check(std::vector<std::string> args);

extern const char* const kCheckHelp;

// Reads a budget for `command` ("cuxfer record"): false after printing one
// line "<command>: --check FILE: field: what is wrong".
bool load_budget(const std::string& path, const char* command, const char* option, check::Budget& out);

struct CheckSettings {
  SymbolOptions symbols;     // how call sites are named
  std::string junit;         // "": none
  bool any_program = false;  // apply a budget for another program anyway
};

// Checks the traces against a loaded budget, prints the verdicts; returns the
// exit status (0, 1, or 2 as run_check).
int check_traces(const check::Budget& budget, const std::string& budget_path, const std::vector<std::string>& traces,
                 const CheckSettings& settings, const char* command);

}  // namespace cuxfer::cli
