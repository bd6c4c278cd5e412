// Graph captures in global mode that are open anywhere in the process.
//
// While one thread captures a stream in CU_STREAM_CAPTURE_MODE_GLOBAL, any
// other thread in global mode (every thread, by default) that makes a
// "potentially unsafe" call -- among them a stream synchronization that has
// to wait -- is refused with cudaErrorStreamCaptureUnsupported, and the
// capture is invalidated. Without cuxfer the app's syncs after a pageable
// copy find nothing to wait for (the driver's pageable path returns when the
// work is done); after a copy the rewrite made asynchronous they would wait,
// and be refused (gpu.capture_while_copying). So while a global capture is
// open, the rewrite leaves each copy as the app made it (copy_decision.h:
// CopyFacts::global_capture). The capture hooks (interpose/capture_hooks.cpp)
// report beginnings and ends; lock-free, no allocation.
#pragma once

#include <atomic>
#include <cstdint>

namespace cuxfer::shim::rewrite {

namespace detail {
extern std::atomic<uint32_t> g_open_global_captures;
extern std::atomic<uint64_t> g_global_captures_seen;
}

// One load: whether a global-mode capture is open (or one could not be
// tracked: then the rewrite stays aside for the rest of the run, and a note
// says so).
inline bool global_capture_open() {
  return detail::g_open_global_captures.load(std::memory_order_acquire) != 0;
}

// Whether the process has begun a global-mode capture at all. Measured on an
// H100 (docs/gpu-validation.md, "Graph capture"): while one thread captures
// in global mode, another thread's cudaStreamSynchronize is refused whenever
// the stream's last work was a DMA the driver did not finish on the host --
// even when that work has completed, and even after a sync in relaxed mode.
// After the driver's own pageable copies it is (almost always) allowed. A
// capture can begin between a rewritten async copy and the app's sync, so
// from the first global capture on, async copies are left as made.
inline bool global_capture_seen() {
  return detail::g_global_captures_seen.load(std::memory_order_acquire) != 0;
}

// A global-mode capture began on the stream with key `stream_key`
// (capture_key()).
void global_capture_began(uint64_t stream_key);
// The capture on `stream_key` is over (ended, or its stream destroyed); a key
// with no open capture is ignored.
void global_capture_ended(uint64_t stream_key);
// The key of stream handle `s` as the calling thread names it: the
// per-thread default stream (handle 0 with a _ptsz entry point, or
// CU_STREAM_PER_THREAD) is a different stream in every thread.
uint64_t capture_key(uint64_t s, bool per_thread);

// For the shutdown note: global-mode captures seen, and copies the rewrite
// left as made because one was open.
void copy_left_beside_capture();
uint64_t copies_left_beside_captures();

// Fork child: the parent's captures are not the child's.
void forget_captures_after_fork();

}  // namespace cuxfer::shim::rewrite
