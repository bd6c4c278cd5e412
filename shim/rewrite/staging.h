// The staging path of the pinned rewrite: a pageable copy is cut into chunks
// that pass through a pool of pinned buffers, the CPU filling (or draining)
// one chunk while DMA moves another. Exact semantics:
//   - H2D: the call returns once the source has been consumed (async) or the
//     copy has completed (sync); the app may reuse its buffer at once.
//   - D2H: the call returns after completion (as the driver's pageable path).
//   - Chunks are issued on the caller's stream (legacy, per-thread or named)
//     with the same family of entry points, so stream order is the app's.
// The path never waits for a buffer another call holds: with none free it
// declines and the call goes to the driver untouched. That keeps it free of
// cross-thread waits that the original program could not have had.
#pragma once

#include <cstddef>
#include <cstdint>

#include "record/call_desc.h"
#include "trace/event.h"
#include "symbols/cuda_headers.h"

namespace cuxfer::shim::rewrite {

// True when CUXFER_REWRITE=pin is in effect for this process.
bool enabled();

// Why copies pass through while enabled() is false (the rewrite turned
// itself off: RewriteDisabled, or ForkChild in a fork child); None while it
// has not.
trace::PassthroughReason off_reason();

// Tries to run the copy `d` (a 1D copy as described by a driver hook) through
// staging. Returns None when it ran, and then `result` is what the call
// returns to the app. Anything else is why it declined (too small, not
// pageable, stream being captured, no pool in the calling context, no free
// buffer, ...): the caller then makes the original call.
trace::PassthroughReason try_stage(const CallDesc& d, int& result, bool any_size = false);

// Starts filling the staging pool in the background for the current context
// (once per context), so that the first copy that needs it finds one copy's
// buffers ready. Cheap once every pool has its whole budget: two atomic loads.
//   Whole:   all of the pool's budget (from the first copy staged; with
//            CUXFER_POOL_GROW=early, the first copy that may need staging).
//   OneCopy: the buffers one copy cycles through (the app's first device
//            allocation): pinned before its first copy, off its thread, and
//            no more until a copy asks for it (an app whose copies are all
//            small pins 32 MiB, not the whole budget).
enum class Prewarm { OneCopy, Whole };
void staging_prewarm(Prewarm how = Prewarm::Whole);

// Fork child: the parent's CUDA context and pinned pool are not usable here.
void disable_after_fork();
// The fork handler's first step, in the parent before any lock: the state
// disable_after_fork() uses exists, so that the child never waits for a first
// construction another thread of the parent was inside when it forked.
void make_state_before_fork();
// The context `ctx` (null: a primary context, which one not known: every
// pool) is about to go: its pool is given back while the context still
// exists; the context's next copy, if it stays, makes one again.
void staging_teardown(CUcontext ctx);
// The context `gone` has been destroyed already (a primary context's last
// release: known only afterwards): its pool is given back without binding its
// handle, which the driver has freed. Other contexts' pools stay.
void staging_context_gone(CUcontext gone);

}  // namespace cuxfer::shim::rewrite
