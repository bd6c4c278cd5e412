// The clock that stamps the events a hook records.
//
// A trace's times are CLOCK_MONOTONIC nanoseconds, the clock CUPTI is told to
// use for the GPU records. Reading it through the vDSO costs ~36 ns warm, but
// a copy made after a training step's framework code finds the vDSO's data
// page cold: the phase probe charged the clock read after the real call
// 128-165 ns on the H200's training loop, and a recorded copy reads it two to
// four times (docs/benchmarks.md, "Twenty-fourth session"). The time-stamp
// counter is what that clock is computed from on such a machine, and reading
// it touches no memory. So where the kernel itself keeps CLOCK_MONOTONIC on
// the TSC (clocksource "tsc": it found the counter invariant and in step
// across CPUs), the hooks stamp events with raw ticks, and the writer thread
// converts them to CLOCK_MONOTONIC nanoseconds before they reach the trace,
// between (tick, nanosecond) pairs it reads around each drain (StampConverter
// below). Elsewhere (another clocksource, another architecture, CUXFER_TSC=0)
// the stamps are nanoseconds and the conversion is the identity.
//
// Only event stamps change: every duration the shim acts on (the timed calls'
// sums, the governor's windows, the rewrite's deadlines) still reads now_ns().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "core/clock.h"
#include "core/export.h"
#include "core/hot_line.h"

namespace cuxfer::shim::event_clock {

// A stamp for an event's t_enter_ns / t_exit_ns: ticks or nanoseconds, as the
// hot line says. The lfence keeps the read after the instructions before it,
// as the vDSO's own read of the counter does.
CUXFER_INLINE uint64_t stamp() {
#if defined(__x86_64__)
  if (g_hot_line.tsc_stamps) {
    _mm_lfence();
    return __rdtsc();
  }
#endif
  return now_ns();
}

// The span between two stamps in nanoseconds, at the rate init() measured
// (to a part in a few thousand: enough for the shim's account of its own
// time, record/hook_time.h; events are converted by StampConverter instead).
CUXFER_INLINE uint64_t span_ns(uint64_t from, uint64_t to) {
  const uint64_t d = to > from ? to - from : 0;
  if (!g_hot_line.tsc_stamps) return d;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(d) * g_hot_line.ns_per_tick_q32) >> 32);
}

// What decides whether the TSC may stamp events.
struct TscFacts {
  bool x86_64 = false;
  bool invariant = false;    // CPUID 0x80000007 EDX bit 8: constant rate, runs in every C-state
  std::string clocksource;   // /sys/devices/system/clocksource/clocksource0/current_clocksource
  bool allowed = true;       // CUXFER_TSC is not 0
};
// Pure: whether events may be stamped with ticks; else `why` says why not (one phrase).
bool tsc_usable(const TscFacts& f, std::string& why);
// This machine's facts.
TscFacts probe(bool allowed);

// Chooses the stamps (sets the hot line's tsc_stamps, after measuring
// ns_per_tick_q32 over ~200 us) and returns a phrase for the log. Called by
// the recorder's start, before any hook records, and again in a fork child.
std::string init(bool allowed);

// One reading of both clocks at about the same instant.
struct Pair {
  uint64_t tsc = 0;
  uint64_t ns = 0;
};
// Reads the pair between two clock reads, the tightest of a few tries.
Pair read_pair();
// Nanoseconds a tick in 32.32 fixed point between two pairs (0 if they do not move forward).
uint64_t rate_q32(const Pair& a, const Pair& b);

// The writer's conversion of stamps to CLOCK_MONOTONIC nanoseconds. Pairs are
// added in time order (one per write cycle); a stamp between two pairs is
// interpolated between them, one outside them extrapolated at the rate over
// all the pairs kept. Keeps the last kKept pairs (a few seconds of cycles):
// only a call blocked longer than that is stamped by extrapolation, at a rate
// known to better than a part in a million. A stamp costs a multiply and a
// shift: each pair keeps the rate to the next in 32.32 fixed point (under
// 0.1 ns off across a 50 ms write cycle), and the last interval, where a
// drain's stamps fall, is tried before the search (a division a stamp cost
// the writer more instructions than the counter saved the hooks).
class StampConverter {
 public:
  static constexpr size_t kKept = 64;
  // Ticks (true) or nanoseconds, which pass through.
  explicit StampConverter(bool ticks = false) : ticks_(ticks) {}
  void set_ticks(bool ticks) { ticks_ = ticks; }
  bool ticks() const { return ticks_; }
  // A pair whose tick or nanosecond is not after the last one's is ignored.
  void add(const Pair& p);
  uint64_t to_ns(uint64_t stamp) const;
  size_t pairs() const { return pairs_.size(); }

 private:
  struct Kept {
    Pair at;
    uint64_t rate_q32 = 0;  // ns a tick to the next pair (the last: over all the pairs kept)
  };
  bool ticks_;
  std::vector<Kept> pairs_;
};

}  // namespace cuxfer::shim::event_clock
