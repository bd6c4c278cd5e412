// parse_config: defaults, every CUXFER_* variable with valid and invalid
// values (a bad value is reported and the default kept), unknown names,
// secure execution.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/config.h"

namespace cuxfer::shim {
namespace {

// An environ-style, null-terminated array over owned strings.
struct Env {
  std::vector<std::string> strings;
  std::vector<char*> ptrs;
  Env(std::initializer_list<std::string> vars) : strings(vars) {
    for (auto& s : strings) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  char** get() { return ptrs.data(); }
};

Config parse(std::initializer_list<std::string> vars, bool secure = false) {
  Env env(vars);
  return parse_config(env.get(), secure);
}

void expect_defaults(const Config& c) {
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.output_dir, ".");
  EXPECT_EQ(c.trace_name, "");
  EXPECT_EQ(c.stack_depth, 16u);
  EXPECT_EQ(c.cupti, CuptiMode::Auto);
  EXPECT_EQ(c.unwinder, Unwinder::Fast);
  EXPECT_EQ(c.cupti_library, "");
  EXPECT_EQ(c.manifest, "");
  EXPECT_EQ(c.buffer_events, 65536u);
  EXPECT_EQ(c.flush_ms, 50u);
  EXPECT_FALSE(c.launched);
  EXPECT_EQ(c.log_level, "warn");
}

// One bad assignment: exactly one problem line naming it, and every field at
// its default.
void expect_rejected(const std::string& assignment) {
  SCOPED_TRACE(assignment);
  Config c = parse({assignment});
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find(assignment + " is invalid"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find("using the default"), std::string::npos) << c.problems[0];
  expect_defaults(c);
}

TEST(ParseConfig, EmptyEnvironmentGivesDefaults) {
  Config c = parse({});
  expect_defaults(c);
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, NullEnvironmentGivesDefaults) {
  Config c = parse_config(nullptr, false);
  expect_defaults(c);
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, OtherVariablesAreIgnored) {
  Config c = parse(
      {"PATH=/usr/bin", "HOME=/root", "cuxfer_disable=1", "XCUXFER_DISABLE=1", "CUXFER_NO_EQUALS_SIGN"});
  expect_defaults(c);
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, Disable) {
  for (const char* v : {"1", "true", "yes", "on"}) {
    Config c = parse({std::string("CUXFER_DISABLE=") + v});
    EXPECT_FALSE(c.enabled) << v;
    EXPECT_TRUE(c.problems.empty()) << v;
  }
  for (const char* v : {"0", "false", "no", "off", ""}) {
    Config c = parse({std::string("CUXFER_DISABLE=") + v});
    EXPECT_TRUE(c.enabled) << v;
    EXPECT_TRUE(c.problems.empty()) << v;
  }
  expect_rejected("CUXFER_DISABLE=2");
  expect_rejected("CUXFER_DISABLE=maybe");
  expect_rejected("CUXFER_DISABLE=TRUE");
}

TEST(ParseConfig, OutputDir) {
  EXPECT_EQ(parse({"CUXFER_OUTPUT_DIR=/tmp/traces"}).output_dir, "/tmp/traces");
  Config c = parse({"CUXFER_OUTPUT_DIR="});  // empty: keep the default, not a problem
  EXPECT_EQ(c.output_dir, ".");
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, TraceName) {
  Config c = parse({"CUXFER_TRACE_NAME=run-1"});
  EXPECT_EQ(c.trace_name, "run-1");
  EXPECT_TRUE(c.problems.empty());
  expect_rejected("CUXFER_TRACE_NAME=a/b");
  expect_rejected("CUXFER_TRACE_NAME=../x");
  expect_rejected("CUXFER_TRACE_NAME=");
}

TEST(ParseConfig, StackDepth) {
  EXPECT_EQ(parse({"CUXFER_STACK_DEPTH=0"}).stack_depth, 0u);
  EXPECT_EQ(parse({"CUXFER_STACK_DEPTH=7"}).stack_depth, 7u);
  EXPECT_EQ(parse({"CUXFER_STACK_DEPTH=32"}).stack_depth, kMaxStackDepth);
  EXPECT_TRUE(parse({"CUXFER_STACK_DEPTH=32"}).problems.empty());
  for (const char* bad : {"33", "-1", "abc", "8x", " 8", "", "99999999999999999999999"})
    expect_rejected(std::string("CUXFER_STACK_DEPTH=") + bad);
}

TEST(ParseConfig, PythonNativeDepth) {
  EXPECT_EQ(Config{}.python_native_depth, 8u);
  EXPECT_EQ(parse({"CUXFER_PYTHON_NATIVE_DEPTH=1"}).python_native_depth, 1u);
  EXPECT_EQ(parse({"CUXFER_PYTHON_NATIVE_DEPTH=32"}).python_native_depth, 32u);
  EXPECT_TRUE(parse({"CUXFER_PYTHON_NATIVE_DEPTH=16"}).problems.empty());
  // 0 would drop the copy's own native frame: the immediate call site is always kept.
  for (const char* bad : {"0", "33", "-1", "x", ""})
    expect_rejected(std::string("CUXFER_PYTHON_NATIVE_DEPTH=") + bad);
}

TEST(ParseConfig, PrefetchTrail) {
  EXPECT_FALSE(Config{}.prefetch_trail);
  EXPECT_FALSE(parse({"CUXFER_PREFETCH_TRAIL=0"}).prefetch_trail);
  EXPECT_TRUE(parse({"CUXFER_PREFETCH_TRAIL=1"}).prefetch_trail);
  for (const char* bad : {"2", "yes please"}) expect_rejected(std::string("CUXFER_PREFETCH_TRAIL=") + bad);
}

TEST(ParseConfig, MemsetStacks) {
  EXPECT_FALSE(Config{}.memset_stacks);
  EXPECT_FALSE(parse({"CUXFER_MEMSET_STACKS=0"}).memset_stacks);
  EXPECT_TRUE(parse({"CUXFER_MEMSET_STACKS=1"}).memset_stacks);
  EXPECT_TRUE(parse({"CUXFER_MEMSET_STACKS=on"}).memset_stacks);
  EXPECT_TRUE(parse({"CUXFER_MEMSET_STACKS=1"}).problems.empty());
  for (const char* bad : {"2", "all"}) expect_rejected(std::string("CUXFER_MEMSET_STACKS=") + bad);
}

TEST(ParseConfig, Cupti) {
  EXPECT_EQ(parse({"CUXFER_CUPTI=off"}).cupti, CuptiMode::Off);
  EXPECT_EQ(parse({"CUXFER_CUPTI=auto"}).cupti, CuptiMode::Auto);
  EXPECT_EQ(parse({"CUXFER_CUPTI=on"}).cupti, CuptiMode::On);
  EXPECT_TRUE(parse({"CUXFER_CUPTI=off"}).problems.empty());
  for (const char* bad : {"always", "OFF", "0", ""}) expect_rejected(std::string("CUXFER_CUPTI=") + bad);
}

TEST(ParseConfig, Unwinder) {
  EXPECT_EQ(parse({"CUXFER_UNWINDER=fast"}).unwinder, Unwinder::Fast);
  EXPECT_EQ(parse({"CUXFER_UNWINDER=libunwind"}).unwinder, Unwinder::Libunwind);
  EXPECT_EQ(parse({"CUXFER_UNWINDER=verify"}).unwinder, Unwinder::Verify);
  Config bad = parse({"CUXFER_UNWINDER=orc"});
  EXPECT_EQ(bad.unwinder, Unwinder::Fast);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_EQ(bad.problems[0], "CUXFER_UNWINDER=orc is invalid (expected fast, libunwind or verify); using the default");
}

TEST(ParseConfig, CuptiLibAndManifestTakeAnyValue) {
  Config c = parse({"CUXFER_CUPTI_LIB=/opt/cuda/lib64/libcupti.so.13", "CUXFER_MANIFEST=/tmp/m.txt"});
  EXPECT_EQ(c.cupti_library, "/opt/cuda/lib64/libcupti.so.13");
  EXPECT_EQ(c.manifest, "/tmp/m.txt");
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, CuptiSearchPathAndToolkitRoots) {
  Config c = parse({"CUXFER_CUPTI_SEARCH_PATH=/v/nvidia/cu13/lib:/w/lib", "CUDA_HOME=/opt/cuda-13",
                    "CUDA_PATH=/opt/cuda"});
  EXPECT_EQ(c.cupti_search_path, "/v/nvidia/cu13/lib:/w/lib");
  EXPECT_EQ(c.cuda_home, "/opt/cuda-13");
  EXPECT_EQ(c.cuda_path, "/opt/cuda");
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, BufferEvents) {
  EXPECT_EQ(parse({"CUXFER_BUFFER_EVENTS=1024"}).buffer_events, 1024u);
  EXPECT_EQ(parse({"CUXFER_BUFFER_EVENTS=65536"}).buffer_events, 65536u);
  EXPECT_EQ(parse({"CUXFER_BUFFER_EVENTS=4194304"}).buffer_events, 4194304u);
  EXPECT_TRUE(parse({"CUXFER_BUFFER_EVENTS=4194304"}).problems.empty());
  // Below the range, above it, not a power of two, not a number.
  for (const char* bad : {"512", "0", "8388608", "3000", "1025", "lots", ""})
    expect_rejected(std::string("CUXFER_BUFFER_EVENTS=") + bad);
}

TEST(ParseConfig, FlushMs) {
  EXPECT_EQ(parse({"CUXFER_FLUSH_MS=5"}).flush_ms, 5u);
  EXPECT_EQ(parse({"CUXFER_FLUSH_MS=10000"}).flush_ms, 10000u);
  EXPECT_EQ(parse({"CUXFER_FLUSH_MS=250"}).flush_ms, 250u);
  for (const char* bad : {"4", "10001", "0", "1.5", ""})
    expect_rejected(std::string("CUXFER_FLUSH_MS=") + bad);
}

TEST(ParseConfig, CuptiFlushMs) {
  EXPECT_EQ(parse({}).cupti_flush_ms, 500u);
  EXPECT_EQ(parse({"CUXFER_CUPTI_FLUSH_MS=0"}).cupti_flush_ms, 0u);
  EXPECT_EQ(parse({"CUXFER_CUPTI_FLUSH_MS=3600000"}).cupti_flush_ms, 3600000u);
  for (const char* bad : {"3600001", "-1", "1.5", "soon", ""})
    expect_rejected(std::string("CUXFER_CUPTI_FLUSH_MS=") + bad);
}

TEST(ParseConfig, PoolGrow) {
  EXPECT_FALSE(parse({}).pool_grow_early);
  EXPECT_TRUE(parse({"CUXFER_POOL_GROW=early"}).pool_grow_early);
  EXPECT_FALSE(parse({"CUXFER_POOL_GROW=staged"}).pool_grow_early);
  for (const char* bad : {"Early", "1", "late", ""}) expect_rejected(std::string("CUXFER_POOL_GROW=") + bad);
}

TEST(ParseConfig, Launcher) {
  EXPECT_TRUE(parse({"CUXFER_LAUNCHER=1"}).launched);
  EXPECT_FALSE(parse({"CUXFER_LAUNCHER=0"}).launched);
  EXPECT_TRUE(parse({"CUXFER_LAUNCHER=1"}).problems.empty());
  expect_rejected("CUXFER_LAUNCHER=2");
  expect_rejected("CUXFER_LAUNCHER=launcher");
}

TEST(ParseConfig, LogLevel) {
  for (const char* v : {"off", "error", "warn", "info", "debug"}) {
    Config c = parse({std::string("CUXFER_LOG_LEVEL=") + v});
    EXPECT_EQ(c.log_level, v);
    EXPECT_TRUE(c.problems.empty()) << v;
  }
  for (const char* bad : {"verbose", "WARN", "trace", ""})
    expect_rejected(std::string("CUXFER_LOG_LEVEL=") + bad);
}

TEST(ParseConfig, LauncherNameIsNotAProblem) {
  Config c = parse({"CUXFER_SHIM=/usr/lib/libcuxfer.so"});
  expect_defaults(c);
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, RewriteSettings) {
  Config c = parse({"CUXFER_REWRITE=pin", "CUXFER_PINNED_BUDGET=67108864", "CUXFER_STAGE_MIN=0",
                    "CUXFER_STAGE_THREADS=4"});
  EXPECT_TRUE(c.rewrite_pin);
  EXPECT_EQ(c.pinned_budget, 64ull << 20);
  EXPECT_EQ(c.stage_min_h2d, 0u);
  EXPECT_EQ(c.stage_min_d2h, 0u);
  EXPECT_EQ(c.stage_threads, 4u);
  EXPECT_TRUE(c.problems.empty());
  EXPECT_FALSE(parse({"CUXFER_REWRITE=off"}).rewrite_pin);
  for (const char* bad : {"CUXFER_REWRITE=1", "CUXFER_REWRITE=zero-copy", "CUXFER_PINNED_BUDGET=1024",
                          "CUXFER_STAGE_MIN=big", "CUXFER_STAGE_THREADS=0", "CUXFER_STAGE_THREADS=65"}) {
    Config b = parse({bad});
    EXPECT_FALSE(b.rewrite_pin) << bad;
    EXPECT_EQ(b.pinned_budget, 0u) << bad;  // automatic
    EXPECT_EQ(b.problems.size(), 1u) << bad;
  }
}

TEST(ParseConfig, RegistrationSettings) {
  Config d = parse({});
  EXPECT_TRUE(d.register_in_place);
  EXPECT_EQ(d.register_min, 1u << 20);
  Config c = parse({"CUXFER_REGISTER=off", "CUXFER_REGISTER_MIN=8388608"});
  EXPECT_FALSE(c.register_in_place);
  EXPECT_EQ(c.register_min, 8u << 20);
  EXPECT_TRUE(c.problems.empty());
  for (const char* bad : {"CUXFER_REGISTER=on", "CUXFER_REGISTER_MIN=100", "CUXFER_REGISTER_MIN=1M"}) {
    Config b = parse({bad});
    EXPECT_TRUE(b.register_in_place) << bad;
    EXPECT_EQ(b.register_min, 1u << 20) << bad;
    EXPECT_EQ(b.problems.size(), 1u) << bad;
  }
}

TEST(ParseConfig, PerDirectionStageMinWinsWhateverTheOrder) {
  Config a = parse({"CUXFER_STAGE_MIN_H2D=1048576", "CUXFER_STAGE_MIN=4096", "CUXFER_STAGE_MIN_D2H=65536"});
  EXPECT_EQ(a.stage_min_h2d, 1u << 20);
  EXPECT_EQ(a.stage_min_d2h, 64u << 10);
  EXPECT_TRUE(a.problems.empty());
  Config b = parse({"CUXFER_STAGE_MIN=4096", "CUXFER_STAGE_MIN_D2H=x"});
  EXPECT_EQ(b.stage_min_h2d, 4096u);
  EXPECT_EQ(b.stage_min_d2h, 4096u);
  EXPECT_EQ(b.problems.size(), 1u);
}

TEST(ParseConfig, FingerprintSettings) {
  Config d = parse({});
  EXPECT_TRUE(d.fingerprint);
  EXPECT_EQ(d.fingerprint_min, 1u << 20);
  EXPECT_FALSE(d.cupti_kernels);
  Config c = parse({"CUXFER_FINGERPRINT=0", "CUXFER_FINGERPRINT_MIN=65536", "CUXFER_CUPTI_KERNELS=1"});
  EXPECT_FALSE(c.fingerprint);
  EXPECT_EQ(c.fingerprint_min, 64u << 10);
  EXPECT_TRUE(c.cupti_kernels);
  EXPECT_TRUE(c.problems.empty());
  // From 1 byte: `cuxfer tune` records tiny copies' device pointers that way.
  EXPECT_EQ(parse({"CUXFER_FINGERPRINT_MIN=1"}).fingerprint_min, 1u);
  EXPECT_EQ(parse({"CUXFER_FINGERPRINT_MIN=0"}).problems.size(), 1u);
  EXPECT_TRUE(d.cupti_unified_memory);
  EXPECT_FALSE(parse({"CUXFER_CUPTI_UM=0"}).cupti_unified_memory);
  EXPECT_EQ(parse({"CUXFER_CUPTI_UM=maybe"}).problems.size(), 1u);
  EXPECT_TRUE(d.nvtx);
  EXPECT_EQ(parse({"CUXFER_NVTX_NEXT=/opt/tool/libinject.so"}).nvtx_next, "/opt/tool/libinject.so");
  EXPECT_FALSE(parse({"CUXFER_NVTX=0"}).nvtx);
  EXPECT_EQ(parse({"CUXFER_NVTX=yes please"}).problems.size(), 1u);
  EXPECT_TRUE(d.cupti_detach);
  EXPECT_FALSE(parse({"CUXFER_CUPTI_DETACH=0"}).cupti_detach);
  EXPECT_EQ(parse({"CUXFER_CUPTI_DETACH=later"}).problems.size(), 1u);
  EXPECT_TRUE(d.tsc_stamps);  // the counter stamps events where it may (core/event_clock.h)
  EXPECT_FALSE(parse({"CUXFER_TSC=0"}).tsc_stamps);
  EXPECT_TRUE(parse({"CUXFER_TSC=1"}).tsc_stamps);
  EXPECT_EQ(parse({"CUXFER_TSC=rdtsc"}).problems.size(), 1u);
  EXPECT_TRUE(parse({}).finish_on_signal);
  EXPECT_FALSE(parse({"CUXFER_FINISH_ON_SIGNAL=0"}).finish_on_signal);
  EXPECT_EQ(parse({"CUXFER_FINISH_ON_SIGNAL=maybe"}).problems.size(), 1u);
}

TEST(ParseConfig, CaptureRangeIsNoneOrTheProfilerApiAsNsightSpellsIt) {
  EXPECT_EQ(parse({}).capture_range, CaptureRange::None);
  EXPECT_EQ(parse({"CUXFER_CAPTURE_RANGE=cudaProfilerApi"}).capture_range, CaptureRange::ProfilerApi);
  EXPECT_EQ(parse({"CUXFER_CAPTURE_RANGE=none"}).capture_range, CaptureRange::None);
  for (const char* bad : {"cudaprofilerapi", "nvtx", "1"}) {
    Config c = parse({std::string("CUXFER_CAPTURE_RANGE=") + bad});
    EXPECT_EQ(c.capture_range, CaptureRange::None) << bad;  // the whole run, as without it
    ASSERT_EQ(c.problems.size(), 1u) << bad;
    EXPECT_NE(c.problems[0].find("none or cudaProfilerApi"), std::string::npos) << c.problems[0];
  }
}

TEST(ParseConfig, PolicyTurnsTheRewriteMachineryOn) {
  Config d = parse({});
  EXPECT_FALSE(d.rewrite_any());
  Config c = parse({"CUXFER_POLICY=/tmp/p.json"});
  EXPECT_EQ(c.policy_path, "/tmp/p.json");
  EXPECT_FALSE(c.rewrite_pin);  // only the sites the policy names
  EXPECT_TRUE(c.rewrite_any());
  EXPECT_TRUE(c.problems.empty());
}

TEST(ParseConfig, AutomaticPinnedBudgetIsBounded) {
  Config c = parse({});
  const uint64_t b = pinned_budget_bytes(c);
  EXPECT_GE(b, 128ull << 20);
  EXPECT_LE(b, 4ull << 30);
  c.pinned_budget = 64ull << 20;
  EXPECT_EQ(pinned_budget_bytes(c), 64ull << 20);
}

TEST(ParseConfig, UnknownVariableIsAProblemLine) {
  Config c = parse({"CUXFER_STACKDEPTH=4", "CUXFER_FOO="});
  expect_defaults(c);  // the misspelt name does not set stack_depth
  ASSERT_EQ(c.problems.size(), 2u);
  EXPECT_EQ(c.problems[0], "unknown variable CUXFER_STACKDEPTH ignored");
  EXPECT_EQ(c.problems[1], "unknown variable CUXFER_FOO ignored");
}

TEST(ParseConfig, AllVariablesTogether) {
  Config c = parse({"CUXFER_DISABLE=0", "CUXFER_OUTPUT_DIR=/out", "CUXFER_TRACE_NAME=job",
                    "CUXFER_STACK_DEPTH=4", "CUXFER_CUPTI=off", "CUXFER_CUPTI_LIB=/l/libcupti.so",
                    "CUXFER_MANIFEST=/m", "CUXFER_BUFFER_EVENTS=2048", "CUXFER_FLUSH_MS=20",
                    "CUXFER_LAUNCHER=1", "CUXFER_LOG_LEVEL=debug", "UNRELATED=1"});
  EXPECT_TRUE(c.problems.empty());
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.output_dir, "/out");
  EXPECT_EQ(c.trace_name, "job");
  EXPECT_EQ(c.stack_depth, 4u);
  EXPECT_EQ(c.cupti, CuptiMode::Off);
  EXPECT_EQ(c.cupti_library, "/l/libcupti.so");
  EXPECT_EQ(c.manifest, "/m");
  EXPECT_EQ(c.buffer_events, 2048u);
  EXPECT_EQ(c.flush_ms, 20u);
  EXPECT_TRUE(c.launched);
  EXPECT_EQ(c.log_level, "debug");
}

TEST(ParseConfig, BadValuesDoNotDisturbGoodOnes) {
  Config c =
      parse({"CUXFER_STACK_DEPTH=100", "CUXFER_FLUSH_MS=20", "CUXFER_BUFFER_EVENTS=1000", "CUXFER_WHAT=1"});
  EXPECT_EQ(c.stack_depth, 16u);
  EXPECT_EQ(c.flush_ms, 20u);
  EXPECT_EQ(c.buffer_events, 65536u);
  ASSERT_EQ(c.problems.size(), 3u);
  EXPECT_EQ(c.problems[0], "CUXFER_STACK_DEPTH=100 is invalid (expected 0..32); using the default");
  EXPECT_EQ(
      c.problems[1],
      "CUXFER_BUFFER_EVENTS=1000 is invalid (expected a power of two in 1024..4194304); using the default");
  EXPECT_EQ(c.problems[2], "unknown variable CUXFER_WHAT ignored");
}

TEST(ParseConfig, SecureExecutionDisablesAndIgnoresTheEnvironment) {
  Config c = parse({"CUXFER_DISABLE=0", "CUXFER_OUTPUT_DIR=/etc", "CUXFER_CUPTI_LIB=/tmp/evil.so",
                    "CUXFER_STACK_DEPTH=1", "CUXFER_BOGUS=1"},
                   /*secure=*/true);
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(c.output_dir, ".");
  EXPECT_EQ(c.cupti_library, "");
  EXPECT_EQ(c.stack_depth, 16u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("secure execution"), std::string::npos);
}

TEST(ParseConfig, SecureExecutionWithEmptyEnvironment) {
  Config c = parse_config(nullptr, true);
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(c.problems.size(), 1u);
}

}  // namespace

namespace {

// The process's configuration is never destroyed: hooks on the app's other
// threads read it while static destructors run at exit. An exit handler
// registered before config() is first made runs after the configuration's
// destructor would have: the string it reads must still be the value (a freed
// heap string's first bytes are malloc's free-list links).
constexpr char kLongOutputDir[] = "/an/output/directory/long/enough/to/be/on/the/heap";
const Config* g_config_at_exit = nullptr;

void check_config_after_static_destruction() {
  _exit(g_config_at_exit && std::strcmp(g_config_at_exit->output_dir.c_str(), kLongOutputDir) == 0 ? 0 : 3);
}

TEST(ConfigLifetime, OutlivesStaticDestruction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: config() not made yet
  EXPECT_EXIT(
      {
        setenv("CUXFER_OUTPUT_DIR", kLongOutputDir, 1);
        std::atexit(check_config_after_static_destruction);
        g_config_at_exit = &config();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cuxfer::shim
