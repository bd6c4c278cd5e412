// `cuxfer export --perfetto FILE | --sqlite FILE [--force] [--no-symbols] [--sysroot DIR] TRACE...`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 written, 1 no trace usable (or output not writable), 2 usage
// error or an existing --sqlite FILE without --force.
int run_export(std::vector<std::string> args);
extern const char* const kExportHelp;

}  // namespace cuxfer::cli
