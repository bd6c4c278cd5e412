#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/config.h"

namespace cuxfer::shim::log {
namespace {

// Built on first use, never destroyed: the shim may log from atexit handlers
// after static destructors have started.
spdlog::logger& logger() {
  static spdlog::logger* l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* lg = new spdlog::logger("cuxfer", sink);
    lg->set_pattern("cuxfer: %l: %v");
    const auto& level = config().log_level;
    lg->set_level(level == "off"     ? spdlog::level::off
                  : level == "error" ? spdlog::level::err
                  : level == "info"  ? spdlog::level::info
                  : level == "debug" ? spdlog::level::debug
                                     : spdlog::level::warn);
    return lg;
  }();
  return *l;
}

}  // namespace

void error(const std::string& msg) { logger().error(msg); }
void warn(const std::string& msg) { logger().warn(msg); }
void info(const std::string& msg) { logger().info(msg); }
void debug(const std::string& msg) { logger().debug(msg); }

}  // namespace cuxfer::shim::log
