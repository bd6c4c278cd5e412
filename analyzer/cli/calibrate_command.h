// `cuxfer calibrate [-o FILE] [--device N] [--max-size BYTES] [--quick]`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 profile written, 1 measurement or output failed, 2 usage
// error, 77 no GPU.
int run_calibrate(std::vector<std::string> args);
extern const char* const kCalibrateHelp;

}  // namespace cuxfer::cli
