// Where a hook's time goes, phase by phase: a development build's account
// (cmake -DCUXFER_PHASE_PROBE=ON; `devtools/gpu.sh phase-probe` runs it on the
// copy storm). Each CUXFER_PHASE(p) reads the time-stamp counter and charges
// the cycles since the previous mark to phase p; at exit the library prints
// every phase's count and mean to stderr ("phase_probe ..." lines). With
// -DCUXFER_PHASE_PROBE_LFENCE=ON an lfence precedes each read, so that a phase
// is charged its own latency rather than what the out-of-order core left of
// the phases before it (docs/benchmarks.md, "Sixteenth session").
//
// One process-wide tally, not per thread: meant for one thread's calls (a
// storm); calls from several threads would mix their phases. A read costs
// ~40 cycles, the floor of every phase. In a normal build the marks are empty.
#pragma once

#include <cstdint>

namespace cuxfer::shim::phase_probe {

enum Phase : uint32_t {
  kEntry,        // the hook's first line (starts the count; charged nothing)
  kGate,         // thread state, freed registrations, recorder started, capture range
  kSetup,        // the thread's ring, the hook-time count
  kDriverCheck,  // the driver setup done?
  kEvent,        // the event's fields, its correlation id
  kCallSite,     // the call stack, interned
  kBeforeCall,   // GPU-record flag, sample prefetch, the clock before the call
  kRealCall,     // the real function (and the rewrite's choice of path)
  kAfterCall,    // the clock after it
  kDescribe,     // the pointers' classification, the event's transfer fields
  kEmit,         // result flags, the ring push
  kTail,         // fingerprint, the timed call's sums
  kPassGate,     // unrecorded (outside the capture range): entry to the call
  kPassCall,     // unrecorded: the real function
  kPhases
};

#ifdef CUXFER_PHASE_PROBE
void mark(Phase p);
// Remembers the first address given under `what` (a literal); the report
// prints it with its offset in its page and the size given.
void note_address(const char* what, const void* p, unsigned size);
#define CUXFER_PHASE(p) ::cuxfer::shim::phase_probe::mark(::cuxfer::shim::phase_probe::p)
#define CUXFER_PHASE_ADDRESS(what, p) ::cuxfer::shim::phase_probe::note_address(what, p, sizeof *(p))
#else
#define CUXFER_PHASE(p) ((void)0)
#define CUXFER_PHASE_ADDRESS(what, p) ((void)0)
#endif

}  // namespace cuxfer::shim::phase_probe
