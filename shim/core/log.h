// The shim's only voice: one line per problem on stderr, prefixed "cuxfer:".
// Never on a hot path; warn_once keeps a repeated failure to a single line.
#pragma once

#include <atomic>
#include <string>

namespace cuxfer::shim::log {

void error(const std::string& msg);
void warn(const std::string& msg);
void info(const std::string& msg);
void debug(const std::string& msg);

// Logs `msg` the first time `flag` is seen unset.
inline void warn_once(std::atomic<bool>& flag, const std::string& msg) {
  if (!flag.exchange(true, std::memory_order_relaxed)) warn(msg);
}

}  // namespace cuxfer::shim::log
