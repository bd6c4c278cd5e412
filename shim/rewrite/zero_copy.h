// The zero-copy path (policy path "zero_copy", docs/policy.md): a device
// allocation whose site the policy names is backed by pinned host memory
// mapped into the device's address space (cuMemHostAlloc DEVICEMAP|PORTABLE);
// kernels use the pointer they were given and read and write it over the link.
//
// Copies into and out of such a buffer become a host memcpy placed in stream
// order:
//   - synchronous copies wait for the work ahead of them in the legacy (or
//     per-thread) default stream, as the driver's pageable path does before
//     it copies (an event recorded there also waits for the blocking
//     streams), then memcpy. When nothing is pending there — the legacy
//     stream and every blocking stream the app created are idle, and no
//     per-thread default stream was ever used — the memcpy runs at once,
//     without the event's round trip to the GPU;
//   - asynchronous copies on a stream with nothing pending memcpy at once;
//     otherwise (pending work, the default streams, capture) the original
//     call runs: the driver copies to mapped memory in stream order itself.
// Memsets, 2D/3D, peer and device-to-device copies pass through unchanged:
// the driver handles mapped memory in all of them. Pointer queries answer as
// for the device allocation the app asked for.
//
// Not supported on such a buffer (the driver's answer reaches the app; a
// policy must not name allocations used so): IPC handles, and memory-pool or
// VMM calls on the pointer.
#pragma once

#include <cstdint>

#include "record/call_desc.h"
#include "symbols/cuda_headers.h"
#include "rewrite/pinned_rewrite.h"

namespace cuxfer::shim::rewrite {

namespace detail {
extern std::atomic<uint32_t> g_zero_copy_buffers;
}
// Cheap: one relaxed load. False while no zero-copy buffer is live.
inline bool zero_copy_exists() { return detail::g_zero_copy_buffers.load(std::memory_order_relaxed) != 0; }

// The current user call is a device allocation of `bytes` whose site the
// policy sends to zero copy: allocates the mapped buffer, returns true and
// its device pointer in `*out`. False: allocate as the app asked.
bool zero_copy_alloc(uint64_t bytes, uint64_t* out);
// `p` is a zero-copy buffer: waits for its context's work, frees it, returns
// true. A buffer whose context is going or went is left to the driver.
bool zero_copy_free(uint64_t p);
// A 1D copy touching a zero-copy buffer (see above). Done: `result` is the
// call's result.
Action try_zero_copy(const CallDesc& d, int& result);
// Stream bookkeeping for the shortcut above (interpose/stream_hooks.cpp).
void blocking_stream_created(CUstream s);
void stream_destroyed(CUstream s);
void per_thread_stream_used();
// The context `going` is about to be destroyed or reset. Its zero-copy
// buffers are left to the driver, which frees them with the context after
// its work (the app's pointers to them are invalid after, like its device
// memory), and stay the app's if the driver refuses; other contexts' buffers
// stay. Threads' events of it are dropped untouched from now on; threads
// whose context lives keep theirs. Nothing of it is bound until
// zero_copy_teardown_done(going), which the caller owes whatever the driver
// answered. Null (a primary context whose handle the shim never saw): every
// thread drops its event, and no context is bound meanwhile.
void zero_copy_teardown(CUcontext going);
void zero_copy_teardown_done(CUcontext going);
// The context `converted` goes with its green context (cuGreenCtxDestroy):
// threads' events of it are dropped untouched from now on, and nothing of it
// is bound (a zero-copy free's push of it waits) until
// zero_copy_green_destroy_done(), which the caller owes whatever the driver
// answered. Its buffers are not freed: the memory made in a green context is
// its device's primary context's, and stays the app's.
void zero_copy_green_destroy_begins(CUcontext converted);
// The devices of the buffers made in `ctx` (bit d: device d; bit 63: one of
// device 63 or more, or of unknown device).
uint64_t zero_copy_devices_of(CUcontext ctx);
// After the destroy. `primaries` (null: the driver refused the destroy):
// each device's primary context, held by the caller across this call (null
// where none could be held). The buffers made in `converted` are that
// context's from now on, or, where none was held, of no known context (freed
// with whichever is current). Owed whatever the driver answered.
void zero_copy_green_destroy_done(CUcontext converted, const CUcontext* primaries);
// A primary context's reference is about to be released, perhaps its last:
// nothing of it is bound until zero_copy_teardown_done(primary); a last
// release is followed by zero_copy_context_gone() before that.
void zero_copy_release_begins(CUcontext primary);
// The context `gone` was destroyed: the buffers made in it went with it and
// are forgotten, with no driver call; threads' events of it are dropped.
void zero_copy_context_gone(CUcontext gone);
// Fork: the zero-copy state is made before the fork (its first construction
// in a child could wait on a guard a parent thread held), and in the child
// its locks made anew and its buffers, streams and teardowns forgotten (the
// parent's CUDA does not survive fork) (rewrite::before_fork,
// rewrite::after_fork_child).
void zero_copy_before_fork();
void zero_copy_after_fork_child();
// Pointer attribute queries on a zero-copy buffer: true when answered here.
bool zero_copy_attribute(CUpointer_attribute attribute, void* data, CUdeviceptr p, CUresult& result);

}  // namespace cuxfer::shim::rewrite
