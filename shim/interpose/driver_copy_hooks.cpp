// Driver-layer hooks for every copy and memset entry point. Each line names
// the exported symbol and how its arguments describe the transfer; the
// _ptds/_ptsz twins differ only in the per-thread-stream flag.
#include "interpose/copy_describe.h"
#include "interpose/hook_macros.h"

using namespace cuxfer::shim;
namespace d = cuxfer::shim::describe;
using D = cuxfer::trace::Direction;

#define SYNC_AND_PTDS(name, params, args, ...)                 \
  CUXFER_DRIVER_HOOK(name, params, args, __VA_ARGS__(false))   \
  CUXFER_DRIVER_HOOK(name##_ptds, params, args, __VA_ARGS__(true))
// Async copies the rewrite does not take over: guarded (hook_macros.h).
#define GUARD_DESC [](const cuxfer::shim::CallDesc& c) { cuxfer::shim::rewrite::before_passthrough(c); }
#define ASYNC_AND_PTSZ(name, params, args, ...)                                 \
  CUXFER_GUARDED_HOOK(name, params, args, __VA_ARGS__(false), GUARD_DESC)       \
  CUXFER_GUARDED_HOOK(name##_ptsz, params, args, __VA_ARGS__(true), GUARD_DESC)
#define ASYNC_AND_PTSZ_GUARD(name, params, args, guard, ...)                    \
  CUXFER_GUARDED_HOOK(name, params, args, __VA_ARGS__(false), guard)            \
  CUXFER_GUARDED_HOOK(name##_ptsz, params, args, __VA_ARGS__(true), guard)
// Every pointer of a batch, not just the first that describes it.
#define GUARD_BATCH [&](const cuxfer::shim::CallDesc&) {                                   \
    for (size_t i = 0; srcs && dsts && sizes && i < count; ++i) {                        \
      cuxfer::shim::rewrite::release_range(srcs[i], sizes[i]);                           \
      cuxfer::shim::rewrite::release_range(dsts[i], sizes[i]);                           \
    }                                                                                    \
  }
#define GUARD_BATCH3D [&](const cuxfer::shim::CallDesc&) {                                 \
    for (size_t i = 0; ops && i < n; ++i)                                                \
      for (const CUmemcpy3DOperand* o : {&ops[i].src, &ops[i].dst})                      \
        if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER)                                   \
          cuxfer::shim::rewrite::release_range(                                          \
              o->op.ptr.ptr, static_cast<uint64_t>(o->op.ptr.rowLength ? o->op.ptr.rowLength : ops[i].extent.width) * \
                                 (o->op.ptr.layerHeight ? o->op.ptr.layerHeight : (ops[i].extent.height ? ops[i].extent.height : 1)) * \
                                 (ops[i].extent.depth ? ops[i].extent.depth : 1));       \
  }
// Copies the rewrite never takes for their shape (arrays, 2D, 3D, batches):
// their events say so (hook_macros.h). Synchronous ones need no guard.
#define NO_GUARD [](const cuxfer::shim::CallDesc&) {}
#define SHAPED_SYNC(name, params, args, ...)                                        \
  CUXFER_SHAPED_COPY_HOOK(name, params, args, __VA_ARGS__(false), NO_GUARD)          \
  CUXFER_SHAPED_COPY_HOOK(name##_ptds, params, args, __VA_ARGS__(true), NO_GUARD)
#define SHAPED_ASYNC_GUARD(name, params, args, guard, ...)                          \
  CUXFER_SHAPED_COPY_HOOK(name, params, args, __VA_ARGS__(false), guard)             \
  CUXFER_SHAPED_COPY_HOOK(name##_ptsz, params, args, __VA_ARGS__(true), guard)
#define SHAPED_ASYNC(name, params, args, ...) SHAPED_ASYNC_GUARD(name, params, args, GUARD_DESC, __VA_ARGS__)
// 1D host<->device copies, which the pinned rewrite may stage.
#define STAGEABLE_SYNC(name, params, args, ...)                   \
  CUXFER_STAGEABLE_HOOK(name, params, args, __VA_ARGS__(false))   \
  CUXFER_STAGEABLE_HOOK(name##_ptds, params, args, __VA_ARGS__(true))
#define STAGEABLE_ASYNC(name, params, args, ...)                  \
  CUXFER_STAGEABLE_HOOK(name, params, args, __VA_ARGS__(false))   \
  CUXFER_STAGEABLE_HOOK(name##_ptsz, params, args, __VA_ARGS__(true))

// 1D
STAGEABLE_SYNC(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n),
              [&](bool pt) { return d::copy(D::Unknown, src, dst, n, nullptr, false, pt); })
STAGEABLE_ASYNC(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s),
               [&](bool pt) { return d::copy(D::Unknown, src, dst, n, s, true, pt); })
STAGEABLE_SYNC(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void* src, size_t n), (dst, src, n),
              [&](bool pt) { return d::copy(D::HtoD, d::ptr(src), dst, n, nullptr, false, pt); })
STAGEABLE_SYNC(cuMemcpyDtoH_v2, (void* dst, CUdeviceptr src, size_t n), (dst, src, n),
              [&](bool pt) { return d::copy(D::DtoH, src, d::ptr(dst), n, nullptr, false, pt); })
SYNC_AND_PTDS(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n),
              [&](bool pt) { return d::copy(D::DtoD, src, dst, n, nullptr, false, pt); })
STAGEABLE_ASYNC(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, CUstream s), (dst, src, n, s),
               [&](bool pt) { return d::copy(D::HtoD, d::ptr(src), dst, n, s, true, pt); })
STAGEABLE_ASYNC(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s),
               [&](bool pt) { return d::copy(D::DtoH, src, d::ptr(dst), n, s, true, pt); })
ASYNC_AND_PTSZ(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s),
               [&](bool pt) { return d::copy(D::DtoD, src, dst, n, s, true, pt); })
SYNC_AND_PTDS(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
              (dst, dc, src, sc, n),
              [&](bool pt) { return d::copy(D::Peer, src, dst, n, nullptr, false, pt); })
ASYNC_AND_PTSZ(cuMemcpyPeerAsync, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
               (dst, dc, src, sc, n, s),
               [&](bool pt) { return d::copy(D::Peer, src, dst, n, s, true, pt); })

// Arrays: the array side has no pointer; its kind is fixed.
#define ARRAY_SRC(c) (c.src_preset = cuxfer::trace::MemKind::Array, c)
#define ARRAY_DST(c) (c.dst_preset = cuxfer::trace::MemKind::Array, c)
SHAPED_SYNC(cuMemcpyHtoA_v2, (CUarray dst, size_t off, const void* src, size_t n), (dst, off, src, n),
            [&](bool pt) { auto c = d::copy(D::HtoD, d::ptr(src), 0, n, nullptr, false, pt); return ARRAY_DST(c); })
SHAPED_SYNC(cuMemcpyAtoH_v2, (void* dst, CUarray src, size_t off, size_t n), (dst, src, off, n),
            [&](bool pt) { auto c = d::copy(D::DtoH, 0, d::ptr(dst), n, nullptr, false, pt); return ARRAY_SRC(c); })
SHAPED_ASYNC(cuMemcpyHtoAAsync_v2, (CUarray dst, size_t off, const void* src, size_t n, CUstream s),
             (dst, off, src, n, s),
             [&](bool pt) { auto c = d::copy(D::HtoD, d::ptr(src), 0, n, s, true, pt); return ARRAY_DST(c); })
SHAPED_ASYNC(cuMemcpyAtoHAsync_v2, (void* dst, CUarray src, size_t off, size_t n, CUstream s),
             (dst, src, off, n, s),
             [&](bool pt) { auto c = d::copy(D::DtoH, 0, d::ptr(dst), n, s, true, pt); return ARRAY_SRC(c); })
SHAPED_SYNC(cuMemcpyDtoA_v2, (CUarray dst, size_t off, CUdeviceptr src, size_t n), (dst, off, src, n),
            [&](bool pt) { auto c = d::copy(D::DtoD, src, 0, n, nullptr, false, pt); return ARRAY_DST(c); })
SHAPED_SYNC(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t off, size_t n), (dst, src, off, n),
            [&](bool pt) { auto c = d::copy(D::DtoD, 0, dst, n, nullptr, false, pt); return ARRAY_SRC(c); })
SHAPED_SYNC(cuMemcpyAtoA_v2, (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n),
            (dst, doff, src, soff, n),
            [&](bool pt) { auto c = d::copy(D::DtoD, 0, 0, n, nullptr, false, pt); c.src_preset = cuxfer::trace::MemKind::Array; return ARRAY_DST(c); })

// 2D / 3D
SHAPED_SYNC(cuMemcpy2D_v2, (const CUDA_MEMCPY2D* p), (p), [&](bool pt) { return d::copy2d(p, nullptr, false, pt); })
SHAPED_SYNC(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D* p), (p),
            [&](bool pt) { return d::copy2d(p, nullptr, false, pt); })
SHAPED_ASYNC(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D* p, CUstream s), (p, s),
             [&](bool pt) { return d::copy2d(p, s, true, pt); })
SHAPED_SYNC(cuMemcpy3D_v2, (const CUDA_MEMCPY3D* p), (p), [&](bool pt) { return d::copy3d(p, nullptr, false, pt); })
SHAPED_ASYNC(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D* p, CUstream s), (p, s),
             [&](bool pt) { return d::copy3d(p, s, true, pt); })
SHAPED_SYNC(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER* p), (p),
            [&](bool pt) { return d::copy3d_peer(p, nullptr, false, pt); })
SHAPED_ASYNC(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER* p, CUstream s), (p, s),
             [&](bool pt) { return d::copy3d_peer(p, s, true, pt); })

// Batches
SHAPED_ASYNC_GUARD(cuMemcpyBatchAsync,
             (CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
              size_t* attr_idx, size_t nattrs, size_t* fail_idx, CUstream s),
             (dsts, srcs, sizes, count, attrs, attr_idx, nattrs, fail_idx, s), GUARD_BATCH,
             [&](bool pt) { return d::batch(dsts, srcs, sizes, count, s, pt); })
SHAPED_ASYNC_GUARD(cuMemcpyBatchAsync_v2,
             (CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUmemcpyAttributes* attrs,
              size_t* attr_idx, size_t nattrs, CUstream s),
             (dsts, srcs, sizes, count, attrs, attr_idx, nattrs, s), GUARD_BATCH,
             [&](bool pt) { return d::batch(dsts, srcs, sizes, count, s, pt); })
SHAPED_ASYNC_GUARD(cuMemcpy3DBatchAsync,
             (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail_idx, unsigned long long flags, CUstream s),
             (n, ops, fail_idx, flags, s), GUARD_BATCH3D, [&](bool pt) { return d::batch3d(n, ops, s, pt); })
SHAPED_ASYNC_GUARD(cuMemcpy3DBatchAsync_v2, (size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, unsigned long long flags, CUstream s),
             (n, ops, flags, s), GUARD_BATCH3D, [&](bool pt) { return d::batch3d(n, ops, s, pt); })

// Memset: bytes = elements x element size (x rows for 2D).
#define MEMSET_1D(name, T, size)                                                                  \
  SYNC_AND_PTDS(name##_v2, (CUdeviceptr p, T v, size_t n), (p, v, n),                             \
                [&](bool pt) { return d::memset(p, n * size, nullptr, false, pt); })             \
  ASYNC_AND_PTSZ(name##Async, (CUdeviceptr p, T v, size_t n, CUstream s), (p, v, n, s),           \
                 [&](bool pt) { return d::memset(p, n * size, s, true, pt); })
#define MEMSET_2D(name, T, size)                                                                             \
  SYNC_AND_PTDS(name##_v2, (CUdeviceptr p, size_t pitch, T v, size_t w, size_t h), (p, pitch, v, w, h),      \
                [&](bool pt) { return d::memset(p, w * h * size, nullptr, false, pt); })                    \
  ASYNC_AND_PTSZ(name##Async, (CUdeviceptr p, size_t pitch, T v, size_t w, size_t h, CUstream s),            \
                 (p, pitch, v, w, h, s), [&](bool pt) { return d::memset(p, w * h * size, s, true, pt); })
MEMSET_1D(cuMemsetD8, unsigned char, 1)
MEMSET_1D(cuMemsetD16, unsigned short, 2)
MEMSET_1D(cuMemsetD32, unsigned int, 4)
MEMSET_2D(cuMemsetD2D8, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16, unsigned short, 2)
MEMSET_2D(cuMemsetD2D32, unsigned int, 4)
