// Context teardown: cudaDeviceReset (which reaches cuDevicePrimaryCtxReset),
// cuDevicePrimaryCtxReset and cuCtxDestroy free every allocation of the
// context, the rewrite's pinned staging pool and zero-copy buffers included,
// and end its registrations. The rewrite lets go of them first (while the
// context still exists), so that no later copy touches freed memory.
// Nothing is recorded.
#include "core/export.h"
#include "interpose/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "rewrite/pinned_rewrite.h"

using namespace cuxfer::shim;

namespace {

template <typename Fn>
Fn real_as(HookId id) {
  return reinterpret_cast<Fn>(real_function(id));
}

}  // namespace

extern "C" CUXFER_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  auto real = real_as<CUresult (*)(CUdevice)>(HookId::h_cuDevicePrimaryCtxReset_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  rewrite::before_context_teardown(nullptr);
  return real(dev);
}

extern "C" CUXFER_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  auto real = real_as<CUresult (*)(CUdevice)>(HookId::h_cuDevicePrimaryCtxReset);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  rewrite::before_context_teardown(nullptr);
  return real(dev);
}

extern "C" CUXFER_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  auto real = real_as<CUresult (*)(CUcontext)>(HookId::h_cuCtxDestroy_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  rewrite::before_context_teardown(ctx);
  return real(ctx);
}
