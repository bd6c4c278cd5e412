// `cuxfer tune [options] -- COMMAND [ARGS...]`: runs COMMAND under observe,
// derives policy candidates, measures them in repeated runs and keeps those
// that made their call sites and the whole run faster (docs/tune.md).
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 policy and report written (also with nothing kept); 1 a run
// failed or a file could not be written; 2 usage error; 126/127 as record.
int run_tune(std::vector<std::string> args);

extern const char* const kTuneHelp;

}  // namespace cuxfer::cli
