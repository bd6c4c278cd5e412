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
// Each phase's tally on its own line, and the last mark on another: a tally
// that shared a line with a variable another thread writes would charge its
// phase that line's transfer (the driver check's ~800 cycles was first
// measured with packed arrays, docs/benchmarks.md).
struct alignas(64) Tally {
  uint64_t cycles = 0, count = 0;
};
Tally g_tally[kPhases];
alignas(64) uint64_t g_last = 0;
uint64_t g_start_tsc = 0, g_start_ns = 0;
struct Noted {
  const char* what;
  uint64_t address;
  unsigned size;
};
constexpr unsigned kNotes = 8;
Noted g_notes[kNotes] = {};

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
  for (const Noted& n : g_notes)
    if (n.what)
      std::fprintf(stderr, "phase_probe address %s=0x%llx page_offset=%llu size=%u pages=%llu\n", n.what,
                   static_cast<unsigned long long>(n.address), static_cast<unsigned long long>(n.address & 4095),
                   n.size, static_cast<unsigned long long>(((n.address + n.size - 1) >> 12) - (n.address >> 12) + 1));
  for (uint32_t p = 1; p < kPhases; ++p)
    if (g_tally[p].count)
      std::fprintf(stderr, "phase_probe %-12s n=%llu mean_cycles=%.1f mean_ns=%.1f\n", kNames[p],
                   static_cast<unsigned long long>(g_tally[p].count),
                   static_cast<double>(g_tally[p].cycles) / static_cast<double>(g_tally[p].count),
                   static_cast<double>(g_tally[p].cycles) / static_cast<double>(g_tally[p].count) / ghz);
}

}  // namespace

void note_address(const char* what, const void* p, unsigned size) {
  for (Noted& n : g_notes) {
    if (n.what == what) return;
    if (!n.what) {
      n = Noted{what, reinterpret_cast<uint64_t>(p), size};
      return;
    }
  }
}

void mark(Phase p) {
#ifdef CUXFER_PHASE_PROBE_LFENCE
  _mm_lfence();
#endif
  const uint64_t t = __rdtsc();
  if (p != kEntry) {
    g_tally[p].cycles += t - g_last;
    ++g_tally[p].count;
  }
  g_last = t;
}

}  // namespace cuxfer::shim::phase_probe
#endif
