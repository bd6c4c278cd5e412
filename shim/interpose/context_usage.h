// Contexts' usage counts, as far as the shim saw them: cuCtxAttach adds a
// reference to the current context, cuCtxDetach drops one and destroys the
// context when none is left. Whether a detach destroys its context must be
// known before the call (the rewrite lets go of what it holds there while the
// context still exists) and cannot be asked afterwards (the handle is freed
// memory then). PyCUDA ends every context it makes with cuCtxDetach.
//
// A context made by cuCtxCreate has one reference, so a detach of a context
// never attached is its last. Only attached contexts take a slot, until their
// context is destroyed; kSlots of them at once. When an attach found no slot,
// a count of zero is no longer known to be zero: such a detach is Unknown, and
// the caller must act as if it might be the last without binding the context
// afterwards.
//
// No lock: attach and detach are rare, and two threads attaching the same
// context at once may take a slot each (the counts are summed). A detach
// racing an attach of the same context on another thread is the app's race
// to settle, as it is for the driver.
#pragma once

#include <atomic>
#include <cstddef>

#include "symbols/cuda_headers.h"

namespace cuxfer::shim {

class ContextUsage {
 public:
  static constexpr size_t kSlots = 64;
  enum class Detach { NotLast, Last, Unknown };

  // After a successful cuCtxAttach that returned `ctx`.
  void attached(CUcontext ctx) {
    if (!ctx) return;
    for (Slot& s : slots_)
      if (s.ctx.load(std::memory_order_acquire) == ctx) {
        s.extra.fetch_add(1, std::memory_order_acq_rel);
        return;
      }
    for (Slot& s : slots_) {
      CUcontext empty = nullptr;
      if (s.ctx.compare_exchange_strong(empty, ctx, std::memory_order_acq_rel)) {
        s.extra.fetch_add(1, std::memory_order_acq_rel);
        return;
      }
    }
    overflow_.store(true, std::memory_order_release);
  }

  // Before cuCtxDetach(ctx): what the call will do to the context. NotLast
  // takes one of the counted references in the same step (two threads'
  // detaches of a context with one attach left: one is NotLast, the other
  // Last); the caller gives it back (attached) if the driver refuses the call.
  Detach claim_detach(CUcontext ctx) {
    for (Slot& s : slots_) {
      if (s.ctx.load(std::memory_order_acquire) != ctx) continue;
      int n = s.extra.load(std::memory_order_acquire);
      while (n > 0 && !s.extra.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) {
      }
      if (n > 0) return Detach::NotLast;
    }
    return overflow_.load(std::memory_order_acquire) ? Detach::Unknown : Detach::Last;
  }

  // `ctx` is being destroyed (its last detach, cuCtxDestroy): its slots are
  // free. Called before the driver's call, so that an attach to a new context
  // made at its address at once is never counted and then wiped.
  void destroyed(CUcontext ctx) {
    if (!ctx) return;
    for (Slot& s : slots_)
      if (s.ctx.load(std::memory_order_acquire) == ctx) {
        s.extra.store(0, std::memory_order_release);
        s.ctx.store(nullptr, std::memory_order_release);
      }
  }

 private:
  struct Slot {
    std::atomic<CUcontext> ctx{nullptr};
    std::atomic<int> extra{0};  // references beyond cuCtxCreate's
  };
  Slot slots_[kSlots];
  std::atomic<bool> overflow_{false};
};

}  // namespace cuxfer::shim
