// Pointer and host-memory queries. Memory the pinned rewrite registered in
// place is still the app's pageable memory: asked about it, these calls give
// the driver's own answer for pageable memory (they ask about an address the
// driver has never seen instead), so that no app or framework changes course
// because of the shim (PyTorch's is_pinned(), for one, asks
// cuPointerGetAttributes). Nothing is recorded: these are not transfers.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "rewrite/pinned_rewrite.h"

using namespace cuxfer::shim;

namespace {

template <typename P>
P as_seen_by_app(P p) {
  if (!rewrite::registrations_exist() || !rewrite::shim_registered(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p))))
    return p;
  return reinterpret_cast<P>(rewrite::pageable_probe());
}

CUdeviceptr as_seen_by_app(CUdeviceptr p) {
  if (!rewrite::registrations_exist() || !rewrite::shim_registered(p)) return p;
  return reinterpret_cast<CUdeviceptr>(rewrite::pageable_probe());
}

}  // namespace

CUXFER_DRIVER_HOOK_BEGIN(cuPointerGetAttribute, (void* data, CUpointer_attribute attribute, CUdeviceptr ptr))
  CUresult r = CUDA_SUCCESS;
  if (rewrite::zero_copy_attribute(attribute, data, ptr, r)) return r;  // as for the device memory asked for
  return real(data, attribute, as_seen_by_app(ptr));
}

CUXFER_DRIVER_HOOK_BEGIN(cuPointerGetAttributes,
                         (unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr))
  CUresult r = real(count, attributes, data, as_seen_by_app(ptr));
  if (r != CUDA_SUCCESS || !rewrite::zero_copy_exists() || !attributes || !data) return r;
  // A zero-copy buffer: the attributes a device allocation has (this call
  // leaves those it cannot give at their null value instead of failing).
  for (unsigned int i = 0; i < count; ++i) {
    CUresult one = CUDA_SUCCESS;
    rewrite::zero_copy_attribute(attributes[i], data[i], ptr, one);
  }
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemHostGetFlags, (unsigned int* flags, void* p))
  return real(flags, as_seen_by_app(p));
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemHostGetDevicePointer_v2, (CUdeviceptr* out, void* p, unsigned int flags))
  return real(out, as_seen_by_app(p), flags);
}
