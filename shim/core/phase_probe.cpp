#include "core/phase_probe.h"

#ifdef CUXFER_PHASE_PROBE
#include <time.h>
#include <x86intrin.h>

#include <cstdio>

namespace cuxfer::shim::phase_probe {
namespace {

constexpr const char* kNames[kPhases] = {"entry",     "gate",      "setup",     "driver_check", "event",
                                         "call_site", "before",    "real_call", "after",        "describe",
                                         "emit",      "tail",      "pass_gate", "pass_call"};
uint64_t g_last = 0;
uint64_t g_cycles[kPhases] = {};
uint64_t g_count[kPhases] = {};
uint64_t g_start_tsc = 0, g_start_ns = 0;

uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

__attribute__((constructor)) void start() {
  g_start_tsc = __rdtsc();
  g_start_ns = monotonic_ns();
}

__attribute__((destructor)) void report() {
  const double ghz = static_cast<double>(__rdtsc() - g_start_tsc) / static_cast<double>(monotonic_ns() - g_start_ns);
  std::fprintf(stderr, "phase_probe tsc_ghz=%.3f lfence=%d\n", ghz,
#ifdef CUXFER_PHASE_PROBE_LFENCE
               1
#else
               0
#endif
  );
  for (uint32_t p = 1; p < kPhases; ++p)
    if (g_count[p])
      std::fprintf(stderr, "phase_probe %-12s n=%llu mean_cycles=%.1f mean_ns=%.1f\n", kNames[p],
                   static_cast<unsigned long long>(g_count[p]),
                   static_cast<double>(g_cycles[p]) / static_cast<double>(g_count[p]),
                   static_cast<double>(g_cycles[p]) / static_cast<double>(g_count[p]) / ghz);
}

}  // namespace

void mark(Phase p) {
#ifdef CUXFER_PHASE_PROBE_LFENCE
  _mm_lfence();
#endif
  const uint64_t t = __rdtsc();
  if (p != kEntry) {
    g_cycles[p] += t - g_last;
    ++g_count[p];
  }
  g_last = t;
}

}  // namespace cuxfer::shim::phase_probe
#endif
