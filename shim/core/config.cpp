#include "core/config.h"
#include "core/export.h"

#include <sys/auxv.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <new>
#include <optional>
#include <cstring>
#include <string_view>

extern char** environ;

namespace cuxfer::shim {
namespace {

bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t& out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_bool(std::string_view s, bool& out) {
  if (s == "1" || s == "true" || s == "yes" || s == "on") return out = true, true;
  if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) return out = false, true;
  return false;
}

}  // namespace

Config parse_config(char** env, bool secure_execution) {
  Config c;
  if (secure_execution) {
    // setuid/setgid/capabilities: never act on environment-controlled paths.
    c.enabled = false;
    c.problems.push_back("secure execution (setuid/setgid): cuxfer stays inert");
    return c;
  }
  std::optional<uint64_t> h2d_min, d2h_min;
  for (char** e = env; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("CUDA_HOME=", 0) == 0) {
      c.cuda_home = kv.substr(10);
      continue;
    }
    if (kv.rfind("CUDA_PATH=", 0) == 0) {
      c.cuda_path = kv.substr(10);
      continue;
    }
    if (kv.rfind("CUXFER_", 0) != 0) continue;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = kv.substr(0, eq), val = kv.substr(eq + 1);
    auto bad = [&](const char* expected) {
      c.problems.push_back(std::string(key) + "=" + std::string(val) + " is invalid (expected " +
                           expected + "); using the default");
    };
    uint64_t n = 0;
    if (key == "CUXFER_DISABLE") {
      bool b = false;
      if (parse_bool(val, b)) c.enabled = !b;
      else bad("0 or 1");
    } else if (key == "CUXFER_OUTPUT_DIR") {
      if (!val.empty()) c.output_dir = val;
    } else if (key == "CUXFER_TRACE_NAME") {
      if (val.find('/') != std::string_view::npos || val.empty()) bad("a name without '/'");
      else c.trace_name = val;
    } else if (key == "CUXFER_STACK_DEPTH") {
      if (parse_uint(val, 0, kMaxStackDepth, n)) c.stack_depth = static_cast<uint32_t>(n);
      else bad("0..32");
    } else if (key == "CUXFER_PYTHON_NATIVE_DEPTH") {
      if (parse_uint(val, 1, kMaxStackDepth, n)) c.python_native_depth = static_cast<uint32_t>(n);
      else bad("1..32");
    } else if (key == "CUXFER_PYTHON_STACKS") {
      bool b = true;
      if (parse_bool(val, b)) c.python_stacks = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_MEMSET_STACKS") {
      bool b = false;
      if (parse_bool(val, b)) c.memset_stacks = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_UNWINDER") {
      if (val == "fast") c.unwinder = Unwinder::Fast;
      else if (val == "libunwind") c.unwinder = Unwinder::Libunwind;
      else if (val == "verify") c.unwinder = Unwinder::Verify;
      else bad("fast, libunwind or verify");
    } else if (key == "CUXFER_CUPTI") {
      if (val == "auto") c.cupti = CuptiMode::Auto;
      else if (val == "on") c.cupti = CuptiMode::On;
      else if (val == "off") c.cupti = CuptiMode::Off;
      else bad("auto, on or off");
    } else if (key == "CUXFER_CAPTURE_RANGE") {
      if (val == "none" || val.empty()) c.capture_range = CaptureRange::None;
      else if (val == "cudaProfilerApi") c.capture_range = CaptureRange::ProfilerApi;
      else bad("none or cudaProfilerApi");
    } else if (key == "CUXFER_CUPTI_KERNELS") {
      bool b = false;
      if (parse_bool(val, b)) c.cupti_kernels = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_CUPTI_UM") {
      bool b = true;
      if (parse_bool(val, b)) c.cupti_unified_memory = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_NVTX") {
      bool b = true;
      if (parse_bool(val, b)) c.nvtx = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_NVTX_NEXT") {
      c.nvtx_next = val;
    } else if (key == "CUXFER_CUPTI_DETACH") {
      bool b = true;
      if (parse_bool(val, b)) c.cupti_detach = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_PREFETCH_TRAIL") {
      bool b = true;
      if (parse_bool(val, b)) c.prefetch_trail = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_TSC") {
      bool b = true;
      if (parse_bool(val, b)) c.tsc_stamps = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_FINISH_ON_SIGNAL") {
      bool b = true;
      if (parse_bool(val, b)) c.finish_on_signal = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_FINGERPRINT") {
      bool b = true;
      if (parse_bool(val, b)) c.fingerprint = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_FINGERPRINT_MIN") {
      if (parse_uint(val, 1, 1ull << 40, n)) c.fingerprint_min = n;
      else bad("a byte count from 1 up");
    } else if (key == "CUXFER_CUPTI_LIB") {
      c.cupti_library = val;
    } else if (key == "CUXFER_CUPTI_SEARCH_PATH") {
      c.cupti_search_path = val;
    } else if (key == "CUXFER_MANIFEST") {
      c.manifest = val;
    } else if (key == "CUXFER_RUN_ID") {
      // One word of a note (docs/trace-format.md, "Run note").
      if (!val.empty() && val.size() <= 128 &&
          val.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == std::string::npos)
        c.run_id = std::string(val);
      else bad("letters, digits and ._:- (at most 128)");
    } else if (key == "CUXFER_BUFFER_EVENTS") {
      if (parse_uint(val, 1024, 1u << 22, n) && (n & (n - 1)) == 0)
        c.buffer_events = static_cast<uint32_t>(n);
      else bad("a power of two in 1024..4194304");
    } else if (key == "CUXFER_FLUSH_MS") {
      if (parse_uint(val, 5, 10000, n)) c.flush_ms = static_cast<uint32_t>(n);
      else bad("5..10000");
    } else if (key == "CUXFER_CUPTI_FLUSH_MS") {
      if (parse_uint(val, 0, 3600000, n)) c.cupti_flush_ms = static_cast<uint32_t>(n);
      else bad("0 (only full buffers and at the end) or 1..3600000");
    } else if (key == "CUXFER_POOL_GROW") {
      if (val == "early") c.pool_grow_early = true;
      else if (val == "staged") c.pool_grow_early = false;
      else bad("early or staged");
    } else if (key == "CUXFER_LAUNCHER") {
      bool b = false;
      if (parse_bool(val, b)) c.launched = b;
      else bad("0 or 1");
    } else if (key == "CUXFER_LOG_LEVEL") {
      if (val == "off" || val == "error" || val == "warn" || val == "info" || val == "debug")
        c.log_level = val;
      else bad("off, error, warn, info or debug");
    } else if (key == "CUXFER_REWRITE") {
      if (val == "pin") c.rewrite_pin = true;
      else if (val == "off" || val.empty()) c.rewrite_pin = false;
      else bad("off or pin");
    } else if (key == "CUXFER_POLICY") {
      if (!val.empty()) c.policy_path = val;
    } else if (key == "CUXFER_PINNED_BUDGET") {
      if (parse_uint(val, 16ull << 20, 1ull << 40, n)) c.pinned_budget = n;
      else bad("a byte count from 16777216 (16 MiB) up");
    } else if (key == "CUXFER_REGISTER") {
      if (val == "auto") c.register_in_place = true, c.register_inline = false;
      else if (val == "inline") c.register_in_place = true, c.register_inline = true;
      else if (val == "off") c.register_in_place = false;
      else bad("auto, inline or off");
    } else if (key == "CUXFER_REGISTER_MIN") {
      if (parse_uint(val, 4096, 1ull << 40, n)) c.register_min = n;
      else bad("a byte count from 4096 up");
    } else if (key == "CUXFER_STAGE_MIN") {
      if (parse_uint(val, 0, 1ull << 62, n)) c.stage_min_h2d = c.stage_min_d2h = n;
      else bad("a byte count");
    } else if (key == "CUXFER_STAGE_MIN_H2D" || key == "CUXFER_STAGE_MIN_D2H") {
      // Per direction; `cuxfer record` sets them from the machine profile.
      // They win over CUXFER_STAGE_MIN whatever the order (applied below).
      if (parse_uint(val, 0, 1ull << 62, n)) (key.back() == 'D' ? h2d_min : d2h_min) = n;
      else bad("a byte count");
    } else if (key == "CUXFER_STAGE_THREADS") {
      if (parse_uint(val, 1, 64, n)) c.stage_threads = static_cast<uint32_t>(n);
      else bad("1..64");
    } else if (key == "CUXFER_SHIM" || key == "CUXFER_PROFILE_DIR" || key == "CUXFER_CALIBRATE_PROGRAM") {
      // Read by the cuxfer command, not the shim; not an error.
    } else {
      c.problems.push_back("unknown variable " + std::string(key) + " ignored");
    }
  }
  if (h2d_min) c.stage_min_h2d = *h2d_min;
  if (d2h_min) c.stage_min_d2h = *d2h_min;
  return c;
}

uint64_t pinned_budget_bytes(const Config& c) {
  if (c.pinned_budget) return c.pinned_budget;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t physical = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  return std::clamp<uint64_t>(physical / 8, 128ull << 20, 4ull << 30);
}

CUXFER_HOT const Config& config() {
  // Made in static storage and never destroyed, like the shim's other
  // singletons: hooks on the app's other threads (and its exit handlers)
  // read it while the process's static destructors run.
  alignas(Config) static unsigned char storage[sizeof(Config)];
  static const bool made = (new (storage) Config(parse_config(environ, getauxval(AT_SECURE) != 0)), true);
  (void)made;
  return *std::launder(reinterpret_cast<const Config*>(storage));
}

}  // namespace cuxfer::shim
