// Context teardown: cudaDeviceReset (which reaches cuDevicePrimaryCtxReset),
// cuDevicePrimaryCtxReset, cuCtxDestroy, a context's last cuCtxDetach
// (PyCUDA's end of every context it makes) and a primary context's last release
// free every allocation of the context, the rewrite's pinned staging pool and
// zero-copy buffers included, end its registrations, and free the context's
// handle. The rewrite lets go of them first where it can (while the context
// still exists), so that no later copy touches freed memory, and never binds
// a destroyed context's handle again. cuGreenCtxDestroy takes the context its
// green context was converted to, a primary context in all but its SMs: what
// the shim bound to that handle goes first, the memory made in it stays.
// Nothing is recorded.
#include <atomic>
#include <string>

#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/context_usage.h"
#include "interpose/green_contexts.h"
#include "interpose/hook_macros.h"
#include "symbols/symbol_table.h"
#include "record/cupti_warmup.h"
#include "record/recorder.h"
#include "rewrite/pinned_rewrite.h"

using namespace cuxfer::shim;

namespace {
using GetState = CUresult (*)(CUdevice, unsigned*, int*);
using DeviceCall = CUresult (*)(CUdevice);

bool rewrite_on() {
  const Config& c = config();
  return c.enabled && c.rewrite_any() && !thread_state().internal;
}

// Each device's primary context handle, as cuDevicePrimaryCtxRetain gave it
// out (the runtime's retain goes through the hook too): what a release or a
// reset destroys. Learnt without a driver call of the shim's own.
constexpr int kMaxDevices = 64;
std::atomic<CUcontext> g_primary[kMaxDevices] = {};

CUcontext known_primary(CUdevice dev) {
  return dev >= 0 && dev < kMaxDevices ? g_primary[dev].load(std::memory_order_acquire) : nullptr;
}

// Whether the device's primary context still exists after a release. Not
// known (no entry point, an error): destroyed, the answer under which the
// shim never binds its handle again.
bool primary_still_active(CUdevice dev) {
  static const auto get_state = libcuda_handle() ? reinterpret_cast<GetState>(
      real_dlsym(libcuda_handle(), "cuDevicePrimaryCtxGetState")) : nullptr;
  unsigned flags = 0;
  int active = 0;
  return get_state && get_state(dev, &flags, &active) == CUDA_SUCCESS && active != 0;
}

void forget_primary(CUdevice dev);

// The usage counts cuCtxAttach and cuCtxDetach change (context_usage.h).
ContextUsage g_usage;
// The context each green context was converted to (green_contexts.h).
GreenContexts g_green;

// `gone` was destroyed with no teardown before it: what the shim had in it
// is let go without binding it.
void let_go_of(CUcontext gone) {
  if (rewrite_on()) rewrite::after_context_gone(gone);
  cupti_warmup_forget(gone);
}

using DestroyCall = CUresult (*)(CUcontext);

// A call that destroys `ctx` (cuCtxDestroy, its last detach): the rewrite lets
// go of what it holds there first, while the context exists. `destroy()`
// makes the call.
template <typename Destroy>
CUresult destroy_context(CUcontext ctx, Destroy&& destroy) {
  const bool tearing = rewrite::before_context_teardown(ctx);
  g_usage.destroyed(ctx);  // before the call: a context made at its address next starts afresh
  const CUresult r = destroy();
  if (r == CUDA_SUCCESS) {
    rewrite::after_context_destroyed(ctx);
    cupti_warmup_forget(ctx);
  }
  if (tearing) rewrite::after_context_teardown(ctx);
  return r;
}

// A detach that may or may not destroy its context (its count was not kept,
// or the context is not the calling thread's, which the driver may refuse):
// as a primary context's release, nothing of the context is freed before, and
// after a successful call it counts as gone, let go without binding it (at
// worst what the shim held there leaks).
CUresult detach_maybe_last(CUcontext ctx, DestroyCall detach) {
  const bool releasing = rewrite::before_primary_release(ctx);
  const CUresult r = detach(ctx);
  if (r == CUDA_SUCCESS) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      Recorder::instance().note("rewrite: a cuCtxDetach whose context's references the shim could not count "
                                "(more than " + std::to_string(ContextUsage::kSlots) +
                                " contexts attached at once, or a context not current to the caller): its context "
                                "counts as gone afterwards (what the rewrite held there is let go, not freed)");
    g_usage.destroyed(ctx);
    let_go_of(ctx);
  }
  if (releasing) rewrite::after_primary_release(ctx);
  return r;
}

// Whether `ctx` is the calling thread's current context (cuCtxDetach's
// condition). Not known: no.
bool is_current(CUcontext ctx) {
  using GetCurrent = CUresult (*)(CUcontext*);
  static const auto get_current =
      libcuda_handle() ? reinterpret_cast<GetCurrent>(real_dlsym(libcuda_handle(), "cuCtxGetCurrent")) : nullptr;
  CUcontext current = nullptr;
  return get_current && get_current(&current) == CUDA_SUCCESS && current == ctx;
}

// A reset destroys the primary context whatever its references: the rewrite
// lets go of what it had there before (while it exists), and its handle is
// forgotten. Other contexts' zero-copy buffers are the app's and stay. A
// handle a release on another thread destroyed, and has not forgotten yet,
// is forgotten first: it is never bound again.
CUresult reset_primary(CUdevice dev, DeviceCall reset) {
  if (known_primary(dev) && !primary_still_active(dev)) forget_primary(dev);
  const CUcontext primary = known_primary(dev);
  const bool tearing =
      dev >= 0 && dev < kMaxDevices && rewrite::before_context_teardown(primary, static_cast<int>(dev));
  const CUresult r = reset(dev);
  if (r == CUDA_SUCCESS && dev >= 0 && dev < kMaxDevices) {
    if (const CUcontext gone = g_primary[dev].exchange(nullptr, std::memory_order_acq_rel)) {
      rewrite::after_context_destroyed(gone);
      cupti_warmup_forget(gone);
    }
  }
  if (tearing) rewrite::after_context_teardown(primary);
  return r;
}

// The device's primary context is known to be gone: what the shim had in it
// is let go without binding it, once (whichever thread sees it first).
//
// The context counts as going (zero copy's mark, rewrite/gone_contexts.h)
// from before the exchange until after the publication: a release whose own
// forget loses the exchange to this one then ends its going mark while this
// one's still holds, so that no thread binds the context (destroys its event
// of it) between that release's end and this publication.
//
// Only the handle that was seen gone is forgotten, and only while the device
// still has no active primary context once the mark is made (marking may wait
// for a zero-copy free's pins): a retain on another thread may meanwhile have
// made a new primary context, maybe at the same address, which lives.
void forget_primary(CUdevice dev) {
  if (dev < 0 || dev >= kMaxDevices) return;
  CUcontext seen = g_primary[dev].load(std::memory_order_acquire);
  if (!seen) return;
  const bool marked = rewrite_on();
  if (marked) rewrite::zero_copy_release_begins(seen);
  const CUcontext gone = seen;
  if (!primary_still_active(dev) &&
      g_primary[dev].compare_exchange_strong(seen, nullptr, std::memory_order_acq_rel))
    let_go_of(gone);
  if (marked) rewrite::zero_copy_teardown_done(gone);
}

// The last reference's release destroys the primary context ("automatically
// reset once the last reference to it is released"). Whether a release is
// the last is known only afterwards, when the handle is freed memory in the
// driver: binding it then is a crash (PyCUDA's detach of a retained primary
// context segfaulted that way). So before the release the registrar finishes
// what it was asked (its requests bind the context), and after a last one
// what the shim had in the context is let go without binding it. A release
// that is not the last changes nothing.
CUresult release_primary(CUdevice dev, DeviceCall release) {
  const CUcontext primary = known_primary(dev);
  const bool releasing = primary && rewrite::before_primary_release(primary);
  const CUresult r = release(dev);
  if (r == CUDA_SUCCESS && primary && !primary_still_active(dev)) forget_primary(dev);
  if (releasing) rewrite::after_primary_release(primary);
  return r;
}
}  // namespace

// A retain of a primary context that no longer exists makes a new one, maybe
// at the old one's address: if a release on another thread destroyed the old
// one and has not said so yet (its check came after this retain), the old
// handle's state is let go here first, so that nothing of it is found under
// the new context.
CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRetain, (CUcontext* pctx, CUdevice dev))
  if (!config().enabled) return real(pctx, dev);  // disabled: inert
  if (known_primary(dev) && !primary_still_active(dev)) forget_primary(dev);
  const CUresult r = real(pctx, dev);
  if (r == CUDA_SUCCESS && pctx && *pctx && dev >= 0 && dev < kMaxDevices)
    g_primary[dev].store(*pctx, std::memory_order_release);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset_v2, (CUdevice dev))
  return reset_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset, (CUdevice dev))
  return reset_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuCtxDestroy_v2, (CUcontext ctx))
  return destroy_context(ctx, [&] { return real(ctx); });
}

namespace {
// The primary contexts a green context's destroy holds, by a retain of its
// own, for the zero-copy buffers made in its converted context: those are the
// primary context's memory, handed to it after the destroy, when it must
// still exist with a known handle -- whether the green context held its last
// reference or another thread releases it meanwhile. The release after is
// the app's release as far as the shim goes (release_primary): a last one
// lets go of the buffers with the rest.
struct HeldPrimaries {
  static constexpr int kDevices = 63;  // zero_copy_devices_of()'s bits below 63
  CUcontext handle[kDevices] = {};
  uint64_t held = 0;
};

void hold_primaries(uint64_t devices, HeldPrimaries& h) {
  using Retain = CUresult (*)(CUcontext*, CUdevice);
  static const auto retain =
      libcuda_handle() ? reinterpret_cast<Retain>(real_dlsym(libcuda_handle(), "cuDevicePrimaryCtxRetain")) : nullptr;
  if (!retain) return;
  for (CUdevice dev = 0; dev < HeldPrimaries::kDevices; ++dev) {
    if (!(devices >> dev & 1)) continue;
    if (known_primary(dev) && !primary_still_active(dev)) forget_primary(dev);  // as the retain hook does
    CUcontext c = nullptr;
    if (retain(&c, dev) != CUDA_SUCCESS || !c) continue;
    g_primary[dev].store(c, std::memory_order_release);
    h.handle[dev] = c;
    h.held |= uint64_t{1} << dev;
  }
}

void release_held(const HeldPrimaries& h) {
  if (!h.held) return;
  static const auto release = [] {
    void* lib = libcuda_handle();
    void* f = lib ? real_dlsym(lib, "cuDevicePrimaryCtxRelease_v2") : nullptr;
    if (!f && lib) f = real_dlsym(lib, "cuDevicePrimaryCtxRelease");
    return reinterpret_cast<DeviceCall>(f);
  }();
  if (!release) return;
  for (CUdevice dev = 0; dev < HeldPrimaries::kDevices; ++dev)
    if (h.held >> dev & 1) release_primary(dev, release);
}
}  // namespace

// A green context's converted context goes with it.
CUXFER_DRIVER_HOOK_BEGIN(cuCtxFromGreenCtx, (CUcontext* pctx, CUgreenCtx green))
  const CUresult r = real(pctx, green);
  if (r == CUDA_SUCCESS && pctx && config().enabled) g_green.converted(green, *pctx);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuGreenCtxDestroy, (CUgreenCtx green))
  if (!config().enabled) return real(green);  // disabled: inert
  GreenContexts::Taken t = g_green.take(green);
  if (t.unknown) {
    // More converted green contexts alive than the shim keeps: the driver
    // says which context this one was converted to (a lookup for a
    // converted one).
    using FromGreen = CUresult (*)(CUcontext*, CUgreenCtx);
    static const auto from_green =
        libcuda_handle() ? reinterpret_cast<FromGreen>(real_dlsym(libcuda_handle(), "cuCtxFromGreenCtx")) : nullptr;
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      Recorder::instance().note("rewrite: more than " + std::to_string(GreenContexts::kSlots) +
                                " green contexts converted at once: the driver is asked which context each "
                                "cuGreenCtxDestroy takes with it");
    if (!from_green || from_green(&t.ctx, green) != CUDA_SUCCESS) t.ctx = nullptr;
  }
  // Never converted: never current, nothing of the shim's is bound to it.
  if (!t.ctx) return real(green);
  const bool tearing = rewrite::before_green_context_destroy(t.ctx);
  HeldPrimaries held;
  if (tearing) hold_primaries(rewrite::zero_copy_devices_of(t.ctx), held);
  const CUresult r = real(green);
  if (tearing) rewrite::after_green_context_destroy(t.ctx, r == CUDA_SUCCESS ? held.handle : nullptr);
  release_held(held);
  if (r != CUDA_SUCCESS) {
    g_green.converted(green, t.ctx);  // still there: a later destroy finds it
    return r;
  }
  g_usage.destroyed(t.ctx);
  cupti_warmup_forget(t.ctx);
  // The green context held a reference to its device's primary context: if
  // that was the last, the primary context went with it, unseen otherwise.
  for (CUdevice dev = 0; dev < kMaxDevices; ++dev)
    if (known_primary(dev) && !primary_still_active(dev)) forget_primary(dev);
  return r;
}

// cuCtxAttach and cuCtxDetach: deprecated, and still PyCUDA's.
CUXFER_DRIVER_HOOK_BEGIN(cuCtxAttach, (CUcontext* pctx, unsigned int flags))
  const CUresult r = real(pctx, flags);
  if (r == CUDA_SUCCESS && pctx && config().enabled) g_usage.attached(*pctx);
  return r;
}

// A detach destroys its context when no attach is left: then it is a destroy.
CUXFER_DRIVER_HOOK_BEGIN(cuCtxDetach, (CUcontext ctx))
  if (!config().enabled) return real(ctx);  // disabled: inert
  switch (g_usage.claim_detach(ctx)) {
    case ContextUsage::Detach::NotLast: {
      const CUresult r = real(ctx);
      if (r != CUDA_SUCCESS) g_usage.attached(ctx);  // refused: the reference is still there
      return r;
    }
    case ContextUsage::Detach::Last:
      if (is_current(ctx)) return destroy_context(ctx, [&] { return real(ctx); });
      return detach_maybe_last(ctx, real);
    case ContextUsage::Detach::Unknown:
      break;
  }
  return detach_maybe_last(ctx, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
  return release_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease, (CUdevice dev))
  return release_primary(dev, real);
}
