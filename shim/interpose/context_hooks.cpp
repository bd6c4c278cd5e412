// Context teardown: cudaDeviceReset (which reaches cuDevicePrimaryCtxReset),
// cuDevicePrimaryCtxReset and cuCtxDestroy free every allocation of the
// context, the rewrite's pinned staging pool and zero-copy buffers included,
// and end its registrations. The rewrite lets go of them first (while the
// context still exists), so that no later copy touches freed memory.
// Nothing is recorded.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "symbols/symbol_table.h"
#include "rewrite/pinned_rewrite.h"

using namespace cuxfer::shim;

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset_v2, (CUdevice dev))
  rewrite::before_context_teardown(nullptr);
  return real(dev);
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxReset, (CUdevice dev))
  rewrite::before_context_teardown(nullptr);
  return real(dev);
}

CUXFER_DRIVER_HOOK_BEGIN(cuCtxDestroy_v2, (CUcontext ctx))
  rewrite::before_context_teardown(ctx);
  return real(ctx);
}

// The last reference's release resets the primary context ("automatically reset once
// the last reference to it is released"): the staging pool made in it is freed and
// its registrations end. Whether a release was the last is known only afterwards
// (the context is then inactive), so the rewrite lets go after the fact: its
// unregistrations fail harmlessly, and staging stops before any copy uses the pool.
namespace {
void after_primary_release(CUdevice dev) {
  using GetState = CUresult (*)(CUdevice, unsigned*, int*);
  static auto get_state = reinterpret_cast<GetState>(
      libcuda_handle() ? real_dlsym(libcuda_handle(), "cuDevicePrimaryCtxGetState") : nullptr);
  unsigned flags = 0;
  int active = 1;
  if (get_state && get_state(dev, &flags, &active) == CUDA_SUCCESS && !active)
    rewrite::before_context_teardown(nullptr);
}
}  // namespace

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS) after_primary_release(dev);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuDevicePrimaryCtxRelease, (CUdevice dev))
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS) after_primary_release(dev);
  return r;
}
