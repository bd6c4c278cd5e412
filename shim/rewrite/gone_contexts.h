// The contexts that went lately, for threads that keep something of their
// current context without a lock (zero copy's per-thread event): such a thing
// is freed memory in the driver once its context is destroyed, and must then
// be dropped untouched; while its context lives it stays the thread's.
//
// Every context that goes (destroyed, reset, or about to be) gets the next
// generation, 1, 2, ...; the last kSlots are kept in a ring. A thread notes
// the generation when it last looked and later asks whether its context is
// among those that went since. Generations, not addresses, decide: a new
// context may have a dead one's address, and a context that went before the
// thread looked is not asked about.
//
// Publishing (context teardown, rare) takes a ranked lock: writers go one at a
// time, so every generation up to generation() is in its slot. Asking (the
// copy path) takes no lock and allocates nothing; each slot is read as a
// sequence lock, so a slot overwritten by a later generation while a thread
// reads it is seen, never misread.
//
// Asking alone cannot decide a driver call on the thing kept: between "not
// gone" and the call, another thread may publish the context and destroy it,
// and the call lands on freed memory. destroy_unless_gone() makes the two one
// step: it asks and makes the call under the publishers' lock. Every teardown
// publishes its context before it calls the driver to destroy or reset it, so
// such a call either completes before the publication (hence before the
// context goes) or is not made (the publication is seen).
//
// Publishing before the driver call is not enough where the shim learns that
// a context went only afterwards (a primary context's release, which is the
// last only if no reference is left) or where it must not act on the context
// meanwhile at all (freeing a zero-copy buffer pushes the buffer's context).
// So a teardown also marks its context *going* for the length of the driver
// call (going() ... done_going()); destroy_unless_gone() treats a going
// context as gone, and a longer call on something of a context (a zero-copy
// buffer's push, synchronize, free and pop) *pins* the context instead of
// holding the lock: pin() refuses while the context is going, and going()
// waits, with the lock released, until the context's pins are gone. A
// teardown thus waits only for the calls on its own context, which its
// driver call would wait for anyway, and no lock is held across a
// synchronize (whose callbacks and host functions may run anything).
//
// The lock so is held across one driver call (cuEventDestroy). Why that keeps
// the written order (docs/architecture.md, "Locks"):
//   - it is taken with no other shim lock held: by the teardown hooks at
//     their entry and exit, by the copy path's thread_event() and by
//     zero_copy_free(), which hold none;
//   - inside the driver call the shim is entered only (a) through the libc
//     hooks (the driver's malloc and free: host ranges, rank 80), (b) through
//     CUPTI's buffer callbacks, which CUPTI may run on the calling thread
//     (CUPTI records, rank 25; their allocations: host ranges), both ranked
//     above this lock, and (c) through driver hooks reached from an app's own
//     CUPTI callback: the caller holds an InternalScope, and a zero-copy free
//     or copy made there only tries this lock (`nested`), leaving its buffer
//     or event to the driver when it is taken;
//   - the teardown side holds it for a few stores only, never across the
//     driver's destroy or reset (whose callbacks could reach a copy hook on
//     that thread outside any InternalScope and ask for it again).
// Hence rank 22: above the CUPTI handover (never held where this is taken),
// below the CUPTI records.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include <time.h>

#include "core/bounded_lock.h"
#include "core/ranked_lock.h"

namespace cuxfer::shim::rewrite {

class GoneContexts {
 public:
  // How many contexts that went are remembered. A thread that fell further
  // behind (more went between two of its looks) cannot tell whether its own
  // did: it hears TooFarBehind.
  static constexpr uint64_t kSlots = 64;

  enum class Since {
    Alive,         // not among those that went: what the thread holds of it is still good
    Gone,          // went (or a context of unknown handle went: maybe it)
    TooFarBehind,  // the ring no longer holds every generation asked about: maybe it went
  };

  // The generation of the last context that went; 0 while none has.
  uint64_t generation() const { return published_.load(std::memory_order_acquire); }

  // `ctx` goes (null: a context whose handle is not known, as a reset of a
  // primary context the shim never saw: it stands for every context).
  // Returns its generation.
  uint64_t publish(const void* ctx) {
    std::lock_guard<RankedMutex> lock(writers_);
    const uint64_t g = published_.load(std::memory_order_relaxed) + 1;
    Slot& s = slots_[g % kSlots];
    // 0 (no generation has it) while the slot changes: a reader that saw the
    // old generation before and after its read of ctx read the old ctx.
    s.generation.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.ctx.store(ctx, std::memory_order_relaxed);
    s.generation.store(g, std::memory_order_release);
    published_.store(g, std::memory_order_release);
    return g;
  }

  // Calls `destroy()` (a driver call on something of `ctx`) unless `ctx` went
  // since generation `since` (Gone or TooFarBehind: the thing is dropped
  // untouched, maybe leaked), with no context published meanwhile: see the
  // top. Returns the generation it decided at. Takes the publishers' lock;
  // the caller holds no shim lock and is inside an InternalScope.
  template <typename Destroy>
  uint64_t destroy_unless_gone(const void* ctx, uint64_t since, bool nested, Destroy&& destroy) {
    std::unique_lock<RankedMutex> lock(writers_, std::defer_lock);
    if (nested ? !lock.try_lock() : (lock.lock(), false)) return since;  // left to the driver
    const uint64_t upto = published_.load(std::memory_order_relaxed);
    if (!is_going(ctx) && went(ctx, since, upto) == Since::Alive) destroy();
    return upto;
  }

  enum class Pin {
    Pinned,  // the caller may make its calls on `ctx`, then unpin(ctx)
    Going,   // a teardown of `ctx` is under way: try again after it, or leave the thing
    Busy,    // the lock is held (nested) or every slot is taken: try again, or leave the thing
  };
  // Calls on something of `ctx` (null: of no known context) in progress,
  // outside the lock, until unpin(ctx); refused while a teardown of `ctx` is
  // under way. `nested`: the caller may be inside a driver call this lock is
  // held across (an app's callback): the lock is only tried.
  Pin pin(const void* ctx, bool nested) {
    std::unique_lock<RankedMutex> lock(writers_, std::defer_lock);
    if (nested ? !lock.try_lock() : (lock.lock(), false)) return Pin::Busy;
    if (is_going(ctx)) return Pin::Going;
    for (CtxCount& p : pins_)
      if (p.count && p.ctx == ctx) {
        ++p.count;
        return Pin::Pinned;
      }
    for (CtxCount& p : pins_)
      if (!p.count) {
        p = {ctx, 1};
        return Pin::Pinned;
      }
    return Pin::Busy;
  }
  void unpin(const void* ctx) {
    std::lock_guard<RankedMutex> lock(writers_);
    for (CtxCount& p : pins_)
      if (p.count && p.ctx == ctx) {
        --p.count;
        return;
      }
  }

  // A teardown of `ctx` (null: a context of unknown handle, so every one) is
  // under way from now until done_going(ctx), whatever its result. Teardowns
  // of the same context may overlap (two releases); each is counted. Returns
  // once no call pinned on `ctx` is in progress (the lock released while it
  // waits: a pinned call takes no lock).
  void going(const void* ctx) {
    {
      std::lock_guard<RankedMutex> lock(writers_);
      mark_going(ctx);
    }
    for (;;) {
      {
        std::lock_guard<RankedMutex> lock(writers_);
        if (!is_pinned(ctx)) return;
      }
      struct timespec pause {0, 50'000};
      nanosleep(&pause, nullptr);
    }
  }
  void done_going(const void* ctx) {
    std::lock_guard<RankedMutex> lock(writers_);
    if (ctx)
      for (CtxCount& g : going_)
        if (g.count && g.ctx == ctx) {
          --g.count;
          return;
        }
    // Null, or counted under all_going_ when the slots were full.
    if (ctx && overflow_) --overflow_;
    if (all_going_) --all_going_;
  }

  // Teardowns under way belonged to the parent's threads: none is here.
  void after_fork_child() {
    remake_in_fork_child(writers_);
    for (CtxCount& g : going_) g = {};
    for (CtxCount& p : pins_) p = {};
    all_going_ = overflow_ = 0;
  }

  // Whether `ctx` is among the contexts of generations (since, upto], where
  // `upto` is a generation() the caller read.
  Since went(const void* ctx, uint64_t since, uint64_t upto) const {
    if (upto <= since) return Since::Alive;
    if (upto - since > kSlots) return Since::TooFarBehind;
    for (uint64_t g = since + 1; g <= upto; ++g) {
      const Slot& s = slots_[g % kSlots];
      const uint64_t before = s.generation.load(std::memory_order_acquire);
      const void* c = s.ctx.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint64_t after = s.generation.load(std::memory_order_relaxed);
      // Overwritten by generation g + kSlots (or being): the caller fell behind while it read.
      if (before != g || after != g) return Since::TooFarBehind;
      if (c == ctx || c == nullptr) return Since::Gone;
    }
    return Since::Alive;
  }

 private:
  struct Slot {
    std::atomic<uint64_t> generation{0};
    std::atomic<const void*> ctx{nullptr};
  };
  // A context and how many teardowns (going_) or calls (pins_) of it are under way.
  struct CtxCount {
    const void* ctx = nullptr;
    uint32_t count = 0;
  };
  static constexpr size_t kGoingSlots = 16;

  // Under writers_.
  void mark_going(const void* ctx) {
    if (!ctx) {
      ++all_going_;
      return;
    }
    for (CtxCount& g : going_)
      if (g.count && g.ctx == ctx) {
        ++g.count;
        return;
      }
    for (CtxCount& g : going_)
      if (!g.count) {
        g = {ctx, 1};
        return;
      }
    ++all_going_;  // more teardowns at once than slots: every context counts as going meanwhile
    ++overflow_;
  }
  bool is_going(const void* ctx) const {
    if (all_going_) return true;
    for (const CtxCount& g : going_)
      if (g.count && g.ctx == ctx) return true;
    return false;
  }
  // A call pinned on `ctx`, or on no known context (it may be `ctx`), or any
  // call for a teardown of unknown handle.
  bool is_pinned(const void* ctx) const {
    for (const CtxCount& p : pins_)
      if (p.count && (!ctx || !p.ctx || p.ctx == ctx)) return true;
    return false;
  }

  RankedMutex writers_{LockRank::kZeroCopyContextsGone};
  CtxCount going_[kGoingSlots];  // under writers_
  CtxCount pins_[kGoingSlots];   // under writers_
  uint32_t all_going_ = 0;    // teardowns of unknown contexts, and those past the slots
  uint32_t overflow_ = 0;     // of all_going_, those past the slots
  std::atomic<uint64_t> published_{0};
  Slot slots_[kSlots];
};

}  // namespace cuxfer::shim::rewrite
