// The pinned rewrite as the hooks see it: try_rewrite() is the executor of
// one decision per 1D host<->device copy (rewrite/copy_decision.h says which
// path each case takes and why: passthrough, staging, a bounce through the
// staging pool, or the app's call on a range registered in place), and the
// guards that keep every other call exact while the shim holds
// registrations. The staging pool is rewrite/staging.h, the registrations
// rewrite/registration_cache.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/hot_line.h"
#include "record/call_desc.h"
#include "symbols/cuda_headers.h"
#include "rewrite/registration_cache.h"
#include "rewrite/staging.h"

namespace cuxfer::shim::rewrite {

namespace detail {
// On the hot line (core/hot_line.h): every guarded hook reads it.
inline constexpr std::atomic<uint32_t>& g_registrations = g_hot_line.registrations;
}

enum class Action : uint8_t {
  Done,              // the rewrite made the call; `result` is what the app gets
  Original,          // make the original call
  OriginalThenWait,  // make it, then wait_for(d) before returning (pageable semantics on pinned memory)
};

// A registration the copy being made reserved, handed to the background
// registrar (background_registrar.h) when the copy hook's call is done, so
// that the driver pinning its pages does not slow the copy's own DMA. Until
// then the range is Reserved: any thread that invalidates it (a free(), a
// copy that needs it pageable, this copy's own path) withdraws it without
// waiting for anyone (registration_cache.h), so holding it makes no thread
// wait for this copy. One on each copy hook's stack; its destructor hands
// the reservation over (or completes it there when the registrar cannot
// take it). Never copied.
class DeferredRegistration {
 public:
  DeferredRegistration() = default;
  ~DeferredRegistration() {
    if (res_.ok) hand_over();
  }
  DeferredRegistration(const DeferredRegistration&) = delete;
  DeferredRegistration& operator=(const DeferredRegistration&) = delete;

  // One reservation per copy: try_rewrite reserves at most once.
  void hold(const RegistrationCache::Reservation& res, CUcontext ctx) {
    res_ = res;
    ctx_ = ctx;
  }
  bool holding() const { return res_.ok; }
  // Completes the reservation here, on this thread, now (the copy needs the
  // registration before its own call). True when the range is registered.
  bool complete_here();

 private:
  void hand_over();
  RegistrationCache::Reservation res_;
  CUcontext ctx_ = nullptr;
};

// For the 1D copy hooks. A copy it leaves as made gets the reason in the
// event being recorded (trace::PassthroughReason, one store). A registration
// it reserves for the copies after this one is left in `later`.
Action try_rewrite(const CallDesc& d, int& result, DeferredRegistration& later);
namespace detail {
void record_passthrough(trace::PassthroughReason why);  // into the event being recorded
void record_passthrough_off();                          // why the rewrite is off (staging.h: off_reason)
}  // namespace detail
// For the 1D copy hooks while the rewrite is configured but has turned itself
// off (enabled() false): the event records why. One load when it was never on.
inline void passthrough_while_off() {
  if (g_hot_line.rewrite_any) [[unlikely]] detail::record_passthrough_off();
}
// For the copy hooks the rewrite never takes (2D/3D, arrays, batches): the
// event records that, while the rewrite is on. One load when it is not.
inline void passthrough_not_one_dimensional() {
  if (g_hot_line.rewrite_any) detail::record_passthrough(trace::PassthroughReason::NotOneDimensional);
}
// Waits until the copy `d` (just issued on its stream) has completed.
int wait_for(const CallDesc& d);

// Before any other copy call is passed through (2D, 3D, batches, arrays):
// an asynchronous one that touches memory the shim registered would lose its
// pageable semantics, so the registrations under [p, p+n) are dropped first,
// and those ranges are never registered again.
void before_passthrough(const CallDesc& d);
void release_range(uint64_t p, uint64_t n);
// Cheap: one relaxed load. False while the shim holds no registration.
inline bool registrations_exist() { return detail::g_registrations.load(std::memory_order_relaxed) != 0; }

// libc hooks: [begin, end) is about to be freed, unmapped or discarded.
void host_memory_going(uint64_t begin, uint64_t end);

// Whether `p` lies in a registration the shim made (not the app): pointer
// and host-memory queries must then answer as for pageable memory.
bool shim_registered(uint64_t p);
// An address the driver knows nothing of (never registered, never CUDA
// memory): asked in place of a shim-registered one, the driver answers
// exactly as it would for the app's pageable memory.
void* pageable_probe();

// libcuxfer_memhooks.so is loaded and reports host memory (memhooks_api.cpp).
bool memhooks_attached();
void set_memhooks_attached();

// Lifecycle.
// The app made device memory as large as a staged copy (the staging pool's
// first buffers are on their way): the rewrite's threads start now, not in
// the app's first copies.
void device_memory_made();
// A context is about to be destroyed, or (`reset_device` >= 0) the primary
// context of that device reset (`ctx`: its handle, null when the shim never
// saw it): registrations are dropped while it still exists, its zero-copy
// buffers are left to the driver (freed with the context), and staging stops
// if its pool lived there (after a reset, every pool: they are made again as
// copies need them). A destroy that names no context destroys nothing:
// nothing is done. True: the teardown is under way until
// after_context_teardown(), which the caller owes whatever the driver answered.
bool before_context_teardown(CUcontext ctx, int reset_device = -1);
void after_context_teardown(CUcontext ctx);
// A primary context's reference is about to be released, perhaps its last
// (which destroys it: known only afterwards): the background registrations
// asked for (which bind the context of their copy) are done while it exists,
// and nothing of it is bound until after_primary_release() (owed when this
// returns true), by which time a last release has been followed by
// after_context_gone().
bool before_primary_release(CUcontext primary);
void after_primary_release(CUcontext primary);
// The context `gone` was destroyed without a teardown before (a primary
// context's last release): what the shim had in it (registrations, queued
// registrations, zero-copy buffers, staging pool) is let go without ever
// binding its handle again (the driver freed it); other contexts keep theirs.
void after_context_gone(CUcontext gone);
// `ctx` was destroyed or reset (before_context_teardown ran while it
// existed): its handle is never bound again.
void after_context_destroyed(CUcontext ctx);
// The context a green context was converted to is about to go with it
// (cuGreenCtxDestroy). Such a context is the device's primary context with
// the green context's SMs: the memory made in it is the primary context's and
// stays, so only what is bound to the handle goes while it exists -- queued
// registrations are done, registrations dropped (made again as buffers are
// reused), its staging pool given back and threads' events of it dropped.
// Zero-copy buffers made in it are not freed (the app may still use them):
// after the destroy they are their device's primary context's, which the
// caller holds across the destroy (zero_copy.h). True: the
// destroy is under way until after_green_context_destroy(), which the caller
// owes whatever the driver answered (`primaries` non-null: it succeeded; then
// the handle is forgotten and the buffers are handed over).
bool before_green_context_destroy(CUcontext ctx);
// `primaries`: as for zero_copy_green_destroy_done() (zero_copy.h).
void after_green_context_destroy(CUcontext ctx, const CUcontext* primaries);
// In the parent, first in the fork handler (before any lock): everything
// after_fork_child() and the staging's fork child use is made, so that the
// child never waits for a function-local static another thread of the
// parent was constructing when it forked (it would wait for ever).
void before_fork();
void after_fork_child();
void on_shutdown();  // summary note; registrations stay until the process ends


}  // namespace cuxfer::shim::rewrite
