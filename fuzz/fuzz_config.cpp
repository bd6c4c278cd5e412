// Fuzzes the shim's configuration parser (shim::parse_config, the pure
// function config() runs on `environ`) with a synthetic environment made from
// the input: one variable per line, KEY=VALUE as the process would see it. It
// runs inside every recorded app, so no value may crash it, and every bad one
// must leave its field at a value the shim can use.
//
// A line whose first byte is 0x80 or above names a known variable by that
// byte (kKnownKeys[byte % count]) and takes the rest of the line as its value,
// so that mutations explore values rather than spend their time spelling
// names (fuzz/config.dict helps with the same).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace {

using namespace cuxfer::shim;

constexpr const char* kKnownKeys[] = {
    "CUXFER_DISABLE",       "CUXFER_OUTPUT_DIR",     "CUXFER_TRACE_NAME",    "CUXFER_STACK_DEPTH",
    "CUXFER_CUPTI",         "CUXFER_CUPTI_LIB",      "CUXFER_CUPTI_KERNELS", "CUXFER_CUPTI_UM",
    "CUXFER_CUPTI_DETACH",  "CUXFER_FINGERPRINT",    "CUXFER_FINGERPRINT_MIN", "CUXFER_MANIFEST",
    "CUXFER_BUFFER_EVENTS", "CUXFER_NVTX",          "CUXFER_NVTX_NEXT",
    "CUXFER_FLUSH_MS",      "CUXFER_LAUNCHER",       "CUXFER_LOG_LEVEL",     "CUXFER_REWRITE",
    "CUXFER_POLICY",        "CUXFER_PINNED_BUDGET",  "CUXFER_REGISTER",      "CUXFER_REGISTER_MIN",
    "CUXFER_STAGE_MIN",     "CUXFER_STAGE_MIN_H2D",  "CUXFER_STAGE_MIN_D2H", "CUXFER_STAGE_THREADS",
    "CUXFER_SHIM",          "CUXFER_PROFILE_DIR",    "CUXFER_CALIBRATE_PROGRAM",
};
constexpr size_t kKnownKeyCount = sizeof kKnownKeys / sizeof kKnownKeys[0];

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_config: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Lines become NUL-terminated strings, as in environ (a NUL inside a line
  // ends that variable early, as it would there).
  std::vector<std::string> vars;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (!in.empty()) {
    const size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    if (!line.empty() && static_cast<unsigned char>(line[0]) >= 0x80)
      vars.push_back(std::string(kKnownKeys[static_cast<unsigned char>(line[0]) % kKnownKeyCount]) + "=" +
                     std::string(line.substr(1)));
    else
      vars.emplace_back(line);
  }
  std::vector<char*> env;
  for (std::string& v : vars) env.push_back(v.data());
  env.push_back(nullptr);

  const Config secure = parse_config(env.data(), true);
  check(!secure.enabled, "secure execution leaves the shim inert");

  const Config c = parse_config(env.data(), false);
  // Every field holds a value the shim can run with, whatever was asked.
  check(c.stack_depth <= kMaxStackDepth, "stack depth in range");
  check(c.buffer_events >= 1024 && c.buffer_events <= (1u << 22) && (c.buffer_events & (c.buffer_events - 1)) == 0,
        "ring capacity a power of two in range");
  check(c.flush_ms >= 5 && c.flush_ms <= 10000, "flush period in range");
  check(c.fingerprint_min >= 1, "fingerprint minimum at least 1");
  check(c.pinned_budget == 0 || c.pinned_budget >= (16ull << 20), "pinned budget 0 (auto) or >= 16 MiB");
  check(c.register_min >= 4096, "registration minimum at least a page");
  check(c.stage_threads <= 64, "staging threads in range");
  check(!c.output_dir.empty(), "an output directory");
  check(c.trace_name.find('/') == std::string::npos, "trace name without '/'");
  check(c.log_level == "off" || c.log_level == "error" || c.log_level == "warn" || c.log_level == "info" ||
            c.log_level == "debug",
        "a known log level");
  for (const std::string& p : c.problems) check(!p.empty(), "problem lines say something");
  (void)pinned_budget_bytes(c);

  // Pure: the same environment gives the same configuration.
  const Config c2 = parse_config(env.data(), false);
  check(c2.problems == c.problems && c2.output_dir == c.output_dir && c2.stage_min_h2d == c.stage_min_h2d &&
            c2.stage_min_d2h == c.stage_min_d2h,
        "deterministic");
  return 0;
}
