// What the shim's own work in the hooks cost the program: the sums the
// rings keep (EventRing::count_hook_call, add_hook_time) and the trace note
// made of them at shutdown. One call in EventRing::kHookTimeEvery is timed
// whole, minus the real call's own time, so the note is an estimate from a
// sample; its distribution (a power-of-two histogram) shows whether a few
// long calls or every call make the mean.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "record/event_ring.h"

namespace cuxfer::shim {

struct HookTime {
  uint64_t calls = 0;   // intercepted calls that owned their event
  uint64_t timed = 0;   // of them, timed whole
  uint64_t ns = 0;      // their own-work time, summed
  uint64_t max_ns = 0;  // the longest
  uint64_t stack_ns = 0;  // of ns, capturing call stacks
  uint64_t python_ns = 0, native_ns = 0;  // of stack_ns, the two walks
  std::array<uint64_t, EventRing::kHookHistBuckets> hist{};

  void add(const EventRing& r);
};

// The rings' running sums at one moment (the CUPTI governor's windows).
struct HookSums {
  uint64_t calls = 0, timed = 0, ns = 0;
  static HookSums of(const EventRing& r) { return {r.hook_calls(), r.hook_timed(), r.hook_ns()}; }
  HookSums& operator+=(const HookSums& o) {
    calls += o.calls;
    timed += o.timed;
    ns += o.ns;
    return *this;
  }
};

// The shim's own work in the calls made between `last` and `now`: the timed
// calls' mean times the calls; while fewer than a few were timed in between,
// the mean of all timed so far. 0 when nothing was timed yet; sums that went
// back (a fork child forgot its parent's) count from zero.
uint64_t estimate_hook_ns(const HookSums& now, const HookSums& last);

// "overhead: ..." (docs/trace-format.md, Notes), or "" when no call was timed.
// `elapsed_ns`: the time recorded, for the share; `in_ranges`: it is the time
// inside the capture ranges (CUXFER_CAPTURE_RANGE), the only calls counted.
std::string hook_time_note(const HookTime& t, uint64_t elapsed_ns, bool in_ranges = false);

}  // namespace cuxfer::shim
