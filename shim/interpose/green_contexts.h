// Green contexts (CUDA 12.4+) as far as the shim saw them: the CUcontext each
// was converted to (cuCtxFromGreenCtx), because cuGreenCtxDestroy destroys
// that context with it, through no call the shim otherwise sees as a
// destroy. The rewrite must let go of what it holds in the context (its
// staging pool, zero-copy buffers) before: a context made next at the same
// address would otherwise find them, with events of a dead context.
//
// A green context never converted was never current to any thread, so
// nothing of the shim's is bound to it. kSlots converted green contexts live
// at once are remembered; past that, `take` answers Unknown and the caller
// asks the driver (cuCtxFromGreenCtx of a converted context is a lookup).
//
// No lock: conversions and destroys are rare. Two threads converting the
// same green context at once may each claim a slot for it: a destroy clears
// every slot of its green context, so that none is left to answer for a
// later green context at the same address. A destroy racing a conversion of
// the same green context is the app's race to settle, as for the driver.
#pragma once

#include <atomic>
#include <cstddef>

#include "symbols/cuda_headers.h"

namespace cuxfer::shim {

class GreenContexts {
 public:
  static constexpr size_t kSlots = 64;

  // After a successful cuCtxFromGreenCtx(&ctx, green). Converting again
  // returns the same context: one slot per green context.
  void converted(CUgreenCtx green, CUcontext ctx) {
    if (!green || !ctx) return;
    for (Slot& s : slots_)
      if (s.green.load(std::memory_order_acquire) == green) {
        s.ctx.store(ctx, std::memory_order_release);
        return;
      }
    claim(green, ctx);
  }

  // A new slot for `green`, which the caller did not find: what each of two
  // threads converting it at once does (see the top).
  void claim(CUgreenCtx green, CUcontext ctx) {
    for (Slot& s : slots_) {
      CUgreenCtx empty = nullptr;
      if (s.green.compare_exchange_strong(empty, green, std::memory_order_acq_rel)) {
        s.ctx.store(ctx, std::memory_order_release);
        return;
      }
    }
    overflow_.store(true, std::memory_order_release);
  }

  struct Taken {
    CUcontext ctx = nullptr;  // the context the destroy takes with it; null: none known
    bool unknown = false;     // slots ran out: ask the driver
  };
  // Before cuGreenCtxDestroy(green): its converted context, forgotten here
  // (every slot of it: see the top).
  Taken take(CUgreenCtx green) {
    Taken t;
    if (!green) return t;
    bool found = false;
    for (Slot& s : slots_)
      if (s.green.load(std::memory_order_acquire) == green) {
        const CUcontext c = s.ctx.exchange(nullptr, std::memory_order_acq_rel);
        s.green.store(nullptr, std::memory_order_release);
        if (!t.ctx) t.ctx = c;
        found = true;
      }
    if (!found) t.unknown = overflow_.load(std::memory_order_acquire);
    return t;
  }

 private:
  struct Slot {
    std::atomic<CUgreenCtx> green{nullptr};
    std::atomic<CUcontext> ctx{nullptr};
  };
  Slot slots_[kSlots];
  std::atomic<bool> overflow_{false};
};

}  // namespace cuxfer::shim
