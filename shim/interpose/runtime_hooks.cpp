// Runtime-layer hooks (reached only where cudart is a shared library: PyTorch,
// nvcc -cudart=shared). They own the user's call: its name, call site and CPU
// time. The driver hooks underneath refine what was moved; where no driver
// hook is reached, the runtime's own arguments describe the transfer.
#include "interpose/copy_describe.h"
#include "interpose/hook_macros.h"
#include "memory/pointer_classifier.h"

using namespace cuxfer::shim;
namespace d = cuxfer::shim::describe;
using D = cuxfer::trace::Direction;
using cuxfer::trace::EventKind;
using cuxfer::trace::MemKind;

namespace {

D direction_of(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice: return D::HtoD;
    case cudaMemcpyDeviceToHost: return D::DtoH;
    case cudaMemcpyHostToHost: return D::HtoH;
    default: return D::Unknown;  // DeviceToDevice may be peer; Default: ask the pointers
  }
}

CUXFER_HOT CallDesc rt_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s, bool async,
                 bool per_thread) {
  return d::copy(direction_of(kind), d::ptr(src), d::ptr(dst), bytes, reinterpret_cast<CUstream>(s), async,
                 per_thread);
}

CallDesc rt_memset(void* p, uint64_t bytes, cudaStream_t s, bool async, bool per_thread) {
  return d::memset(d::ptr(p), bytes, reinterpret_cast<CUstream>(s), async, per_thread);
}

CallDesc rt_3d(const cudaMemcpy3DParms* p, cudaStream_t s, bool async, bool per_thread) {
  if (!p) return rt_copy(nullptr, nullptr, 0, cudaMemcpyDefault, s, async, per_thread);
  uint64_t bytes = static_cast<uint64_t>(p->extent.width) * (p->extent.height ? p->extent.height : 1) *
                   (p->extent.depth ? p->extent.depth : 1);
  CallDesc c = rt_copy(p->dstPtr.ptr, p->srcPtr.ptr, bytes, p->kind, s, async, per_thread);
  if (p->srcArray) c.src_preset = MemKind::Array;
  if (p->dstArray) c.dst_preset = MemKind::Array;
  return c;
}

uint64_t forget(const void* p) { return forget_app_range(d::ptr(p)); }

// After a runtime allocation: record the range unless the driver hook below
// already did, and complete the event.
auto rt_alloc_post(void** out, uint64_t bytes, MemKind kind) {
  return [=](cudaError_t r, cuxfer::trace::Event* e) {
    if (r != cudaSuccess || !out) return;
    uint64_t address = d::ptr(*out);
    if (!allocation_table().find(address)) allocation_table().insert(address, bytes, kind, -1);
    if (kind == MemKind::Managed) Recorder::instance().managed_memory_seen();
    if (e) {
      e->address = address;
      e->bytes = bytes;
    }
  };
}

template <typename Call, typename Post>
cudaError_t rt_intercept(HookId id, const CallDesc& desc, Caller caller, Call&& call, Post&& post) {
  return intercept<cudaError_t>(id, desc, caller, std::forward<Call>(call), std::forward<Post>(post));
}

}  // namespace

// Copies
CUXFER_RUNTIME_HOOK(cudaMemcpy, (void* dst, const void* src, size_t n, cudaMemcpyKind k), (dst, src, n, k),
                    rt_copy(dst, src, n, k, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemcpy_ptds, (void* dst, const void* src, size_t n, cudaMemcpyKind k), (dst, src, n, k),
                    rt_copy(dst, src, n, k, nullptr, false, true))
CUXFER_RUNTIME_HOOK(cudaMemcpyAsync, (void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t s),
                    (dst, src, n, k, s), rt_copy(dst, src, n, k, s, true, false))
CUXFER_RUNTIME_HOOK(cudaMemcpyAsync_ptsz, (void* dst, const void* src, size_t n, cudaMemcpyKind k, cudaStream_t s),
                    (dst, src, n, k, s), rt_copy(dst, src, n, k, s, true, true))
#define RT_2D(name, async, pt)                                                                                     \
  CUXFER_RUNTIME_HOOK(name, (void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h, cudaMemcpyKind k), \
                      (dst, dp, src, sp, w, h, k), rt_copy(dst, src, w * h, k, nullptr, async, pt))
#define RT_2D_ASYNC(name, pt)                                                                                        \
  CUXFER_RUNTIME_HOOK(name,                                                                                        \
                      (void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h, cudaMemcpyKind k,       \
                       cudaStream_t s),                                                                            \
                      (dst, dp, src, sp, w, h, k, s), rt_copy(dst, src, w * h, k, s, true, pt))
RT_2D(cudaMemcpy2D, false, false)
RT_2D(cudaMemcpy2D_ptds, false, true)
RT_2D_ASYNC(cudaMemcpy2DAsync, false)
RT_2D_ASYNC(cudaMemcpy2DAsync_ptsz, true)
CUXFER_RUNTIME_HOOK(cudaMemcpy3D, (const cudaMemcpy3DParms* p), (p), rt_3d(p, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemcpy3D_ptds, (const cudaMemcpy3DParms* p), (p), rt_3d(p, nullptr, false, true))
CUXFER_RUNTIME_HOOK(cudaMemcpy3DAsync, (const cudaMemcpy3DParms* p, cudaStream_t s), (p, s), rt_3d(p, s, true, false))
CUXFER_RUNTIME_HOOK(cudaMemcpy3DAsync_ptsz, (const cudaMemcpy3DParms* p, cudaStream_t s), (p, s),
                    rt_3d(p, s, true, true))
CUXFER_RUNTIME_HOOK(cudaMemcpyPeer, (void* dst, int dd, const void* src, int sd, size_t n), (dst, dd, src, sd, n),
                    d::peer(dst, dd, src, sd, n, nullptr, false))
CUXFER_RUNTIME_HOOK(cudaMemcpyPeerAsync, (void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t s),
                    (dst, dd, src, sd, n, s), d::peer(dst, dd, src, sd, n, reinterpret_cast<CUstream>(s), true))
// Symbols: the device side is a __device__ variable; its address is not a pointer the app holds.
CUXFER_RUNTIME_HOOK(cudaMemcpyToSymbol, (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k),
                    (sym, src, n, off, k),
                    d::copy(k == cudaMemcpyDeviceToDevice ? D::DtoD : D::HtoD, d::ptr(src), 0, n, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemcpyFromSymbol, (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k),
                    (dst, sym, n, off, k),
                    d::copy(k == cudaMemcpyDeviceToDevice ? D::DtoD : D::DtoH, 0, d::ptr(dst), n, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemcpyToSymbolAsync,
                    (const void* sym, const void* src, size_t n, size_t off, cudaMemcpyKind k, cudaStream_t s),
                    (sym, src, n, off, k, s),
                    d::copy(k == cudaMemcpyDeviceToDevice ? D::DtoD : D::HtoD, d::ptr(src), 0, n,
                            reinterpret_cast<CUstream>(s), true, false))
CUXFER_RUNTIME_HOOK(cudaMemcpyFromSymbolAsync,
                    (void* dst, const void* sym, size_t n, size_t off, cudaMemcpyKind k, cudaStream_t s),
                    (dst, sym, n, off, k, s),
                    d::copy(k == cudaMemcpyDeviceToDevice ? D::DtoD : D::DtoH, 0, d::ptr(dst), n,
                            reinterpret_cast<CUstream>(s), true, false))

// Memset
CUXFER_RUNTIME_HOOK(cudaMemset, (void* p, int v, size_t n), (p, v, n), rt_memset(p, n, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemset_ptds, (void* p, int v, size_t n), (p, v, n), rt_memset(p, n, nullptr, false, true))
CUXFER_RUNTIME_HOOK(cudaMemsetAsync, (void* p, int v, size_t n, cudaStream_t s), (p, v, n, s),
                    rt_memset(p, n, s, true, false))
CUXFER_RUNTIME_HOOK(cudaMemsetAsync_ptsz, (void* p, int v, size_t n, cudaStream_t s), (p, v, n, s),
                    rt_memset(p, n, s, true, true))
CUXFER_RUNTIME_HOOK(cudaMemset2D, (void* p, size_t pitch, int v, size_t w, size_t h), (p, pitch, v, w, h),
                    rt_memset(p, w * h, nullptr, false, false))
CUXFER_RUNTIME_HOOK(cudaMemset2DAsync, (void* p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s),
                    (p, pitch, v, w, h, s), rt_memset(p, w * h, s, true, false))

// Allocation
#define RT_ALLOC(name, params, args, out, bytes, event_kind, mem_kind)                                  \
  CUXFER_RUNTIME_HOOK_BEGIN(name, params)                                                              \
    return rt_intercept(HookId::h_##name, d::memory(event_kind, 0, bytes, mem_kind), CUXFER_CALLER,    \
                        [&] { return real args; }, rt_alloc_post(out, bytes, mem_kind));               \
  }
// cudaMalloc reaches cuMemAlloc_v2, where the zero-copy path may take it
// (after the runtime has made its context current).
RT_ALLOC(cudaMalloc, (void** p, size_t n), (p, n), p, n, EventKind::DeviceAlloc, MemKind::Device)
RT_ALLOC(cudaMallocManaged, (void** p, size_t n, unsigned int f), (p, n, f), p, n, EventKind::ManagedAlloc,
         MemKind::Managed)
RT_ALLOC(cudaMallocAsync, (void** p, size_t n, cudaStream_t s), (p, n, s), p, n, EventKind::DeviceAlloc,
         MemKind::Device)
RT_ALLOC(cudaMallocAsync_ptsz, (void** p, size_t n, cudaStream_t s), (p, n, s), p, n, EventKind::DeviceAlloc,
         MemKind::Device)
RT_ALLOC(cudaMallocFromPoolAsync, (void** p, size_t n, cudaMemPool_t pool, cudaStream_t s), (p, n, pool, s), p, n,
         EventKind::DeviceAlloc, MemKind::Device)
RT_ALLOC(cudaMallocHost, (void** p, size_t n), (p, n), p, n, EventKind::HostAlloc, MemKind::Pinned)
RT_ALLOC(cudaHostAlloc, (void** p, size_t n, unsigned int f), (p, n, f), p, n, EventKind::HostAlloc, MemKind::Pinned)

CUXFER_RUNTIME_HOOK_BEGIN(cudaMallocPitch, (void** p, size_t* pitch, size_t w, size_t h))
  return rt_intercept(HookId::h_cudaMallocPitch, d::memory(EventKind::DeviceAlloc, 0, w * h, MemKind::Device),
                      CUXFER_CALLER, [&] { return real(p, pitch, w, h); },
                      [&](cudaError_t r, cuxfer::trace::Event* e) {
                        if (r == cudaSuccess && pitch) rt_alloc_post(p, *pitch * h, MemKind::Device)(r, e);
                      });
}

CUXFER_RUNTIME_HOOK_BEGIN(cudaHostRegister, (void* p, size_t n, unsigned int f))
  return rt_intercept(HookId::h_cudaHostRegister, d::memory(EventKind::HostRegister, d::ptr(p), n, MemKind::Registered),
                      CUXFER_CALLER, [&] { return real(p, n, f); },
                      [&](cudaError_t r, cuxfer::trace::Event*) {
                        if (r == cudaSuccess && !allocation_table().find(d::ptr(p)))
                          allocation_table().insert(d::ptr(p), n, MemKind::Registered, -1);
                      });
}

// Frees: drop the range before the real call (see driver_memory_hooks.cpp).
#define RT_FREE(name, params, args, p, event_kind, mem_kind)                                               \
  CUXFER_RUNTIME_HOOK_BEGIN(name, params)                                                                 \
    if (!p) return real args; /* cudaFree(0) is the runtime's init idiom, not a free */                   \
    const uint64_t address = d::ptr(p);                                                                    \
    return intercept<cudaError_t>(HookId::h_##name, d::memory(event_kind, address, forget(p), mem_kind),      \
                                  CUXFER_CALLER, [&] {                                                        \
                                    if (event_kind == EventKind::DeviceFree && rewrite::zero_copy_exists() && \
                                        rewrite::zero_copy_free(address))                                 \
                                      return cudaSuccess;                                                 \
                                    return real args;                                                     \
                                  });                                                                     \
  }
RT_FREE(cudaFree, (void* p), (p), p, EventKind::DeviceFree, MemKind::Device)
RT_FREE(cudaFreeAsync, (void* p, cudaStream_t s), (p, s), p, EventKind::DeviceFree, MemKind::Device)
RT_FREE(cudaFreeAsync_ptsz, (void* p, cudaStream_t s), (p, s), p, EventKind::DeviceFree, MemKind::Device)
RT_FREE(cudaFreeHost, (void* p), (p), p, EventKind::HostFree, MemKind::Pinned)
RT_FREE(cudaHostUnregister, (void* p), (p), p, EventKind::HostUnregister, MemKind::Registered)
