// `cuxfer export --perfetto FILE [--no-symbols] [--sysroot DIR] TRACE...`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 written, 1 no trace usable (or output not writable), 2 usage error.
int run_export(std::vector<std::string> args);
extern const char* const kExportHelp;

}  // namespace cuxfer::cli
