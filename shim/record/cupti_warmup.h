// CUPTI's first record in a context, taken out of the app's first copy.
//
// With memcpy records enabled, the first copy a context makes costs 4-5 ms
// more than the next (CUPTI sets up its record buffers for the context
// then): on an H100, a 4 MiB pinned H2D 4,099-4,664 us against 85-137 us,
// whether CUPTI was enabled before or after the context was made, and a
// flush does not help; one 4-byte device-to-device copy made after the
// enable takes all of it (first copy 107-134 us). Measured without cuxfer,
// devtools/probe_cupti_first.cpp, docs/benchmarks.md. A program that times
// its first copies (NVIDIA's bandwidthTest at 4 MiB) saw that as a third of
// its figure.
//
// So at a context's first synchronous device allocation, while CUPTI's
// records are on, the shim makes that copy itself: in a 256-byte device
// buffer of its own (kept for the context's life: freeing it could wait for
// the whole device; the driver may map a page for it, which
// cudaMemGetInfo then shows), on a non-blocking stream of its own, in
// relaxed capture mode, never while a graph is captured in global mode
// anywhere, and waited for at most 50 ms (a kernel that holds every SM must
// not hold the app's allocation). Its record is dropped by the collector
// (by CUPTI's ids of that stream, once). Once per context, at most 16
// contexts; nothing is recorded. The cost moves to that allocation: an app
// that never copies pays it once per context too.
#pragma once

#include "symbols/cuda_headers.h"

namespace cuxfer::shim {

// Called by the allocation hooks after a successful synchronous device
// allocation on the calling thread's current context. `capture_open`:
// whether a global-mode capture is open (rewrite/capture_watch.h).
void warm_cupti_records(bool capture_open);

// The context `ctx` was destroyed: a context made later at the same address
// is warmed as a new one (its slot is not given back: at most 16 in all).
void cupti_warmup_forget(CUcontext ctx);

// Contexts warmed so far (for the tests and the shutdown note).
unsigned cupti_warmups();

}  // namespace cuxfer::shim
