// Context teardown: cudaDeviceReset (which reaches cuDevicePrimaryCtxReset),
// cuDevicePrimaryCtxReset, cuCtxDestroy and a primary context's last release
// free every allocation of the context, the rewrite's pinned staging pool and
// zero-copy buffers included, end its registrations, and free the context's
// handle. The rewrite lets go of them first where it can (while the context
// still exists), so that no later copy touches freed memory, and never binds
// a destroyed context's handle again. Nothing is recorded.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "symbols/symbol_table.h"
#include "record/cupti_warmup.h"
#include "rewrite/pinned_rewrite.h"

using namespace cuxfer::shim;

namespace {
using GetState = CUresult (*)(CUdevice, unsigned*, int*);
using Retain = CUresult (*)(CUcontext*, CUdevice);
using Release = CUresult (*)(CUdevice);

template <typename F>
F driver_entry(const char* name) {
  return libcuda_handle() ? reinterpret_cast<F>(real_dlsym(libcuda_handle(), name)) : nullptr;
}

bool rewrite_on() {
  const Config& c = config();
  return c.enabled && c.rewrite_any() && !thread_state().internal;
}

// Whether the device's primary context exists (referenced); unknown: true,
// so that nothing is let go on a guess.
bool primary_active(CUdevice dev) {
  static const auto get_state = driver_entry<GetState>("cuDevicePrimaryCtxGetState");
  unsigned flags = 0;
  int active = 1;
  return !get_state || get_state(dev, &flags, &active) != CUDA_SUCCESS || active != 0;
}

// The device's primary context while it exists, else null: retained and
// released again through `release`, so that its count of references is as it
// was; never made where there was none. Its handle is what a release or a
// reset destroys, and the shim must know it to never bind it again.
CUcontext existing_primary(CUdevice dev, Release release) {
  static const auto get_state = driver_entry<GetState>("cuDevicePrimaryCtxGetState");
  static const auto retain = driver_entry<Retain>("cuDevicePrimaryCtxRetain");
  unsigned flags = 0;
  int active = 0;
  if (!get_state || !retain || !release || get_state(dev, &flags, &active) != CUDA_SUCCESS || !active) return nullptr;
  CUcontext ctx = nullptr;
  if (retain(&ctx, dev) != CUDA_SUCCESS) return nullptr;
  release(dev);
  return ctx;
}

Release primary_release_entry() {
  static const auto release = driver_entry<Release>("cuDevicePrimaryCtxRelease_v2");
  return release;
}

// A reset destroys the primary context whatever its references: everything
// is let go before (which context is not needed), and its handle forgotten.
CUresult reset_primary(CUdevice dev, Release reset) {
  const CUcontext primary = rewrite_on() ? existing_primary(dev, primary_release_entry()) : nullptr;
  rewrite::before_context_teardown(nullptr);
  const CUresult r = reset(dev);
  if (r == CUDA_SUCCESS && primary) {
    rewrite::after_context_destroyed(primary);
    cupti_warmup_forget(primary);
  }
  return r;
}

// The last reference's release destroys the primary context ("automatically
// reset once the last reference to it is released"). Whether a release is the
// last is known only afterwards, when the handle is already freed memory in
// the driver: binding it then is a crash (PyCUDA's detach of a retained
// primary context segfaulted that way). So the handle is learnt before, the
// shim's threads leave the context before, and what it had there is let go
// after without binding it.
CUresult release_primary(CUdevice dev, Release release) {
  const CUcontext primary = rewrite_on() ? existing_primary(dev, release) : nullptr;
  if (primary) rewrite::before_primary_release(primary);
  const CUresult r = release(dev);
  if (r == CUDA_SUCCESS && primary) {
    const bool destroyed = !primary_active(dev);
    rewrite::after_primary_release(primary, destroyed);
    if (destroyed) cupti_warmup_forget(primary);
  }
  return r;
}
}  // namespace

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset_v2, (CUdevice dev))
  return reset_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset, (CUdevice dev))
  return reset_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuCtxDestroy_v2, (CUcontext ctx))
  rewrite::before_context_teardown(ctx);
  const CUresult r = real(ctx);
  if (r == CUDA_SUCCESS) {
    rewrite::after_context_destroyed(ctx);
    cupti_warmup_forget(ctx);
  }
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
  return release_primary(dev, real);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease, (CUdevice dev))
  return release_primary(dev, real);
}
