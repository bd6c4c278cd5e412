// Describers: what each family of copy and memset calls moves, from its
// arguments alone. Pure functions, unit-tested in tests/unit/shim.
#pragma once

#include "record/call_desc.h"
#include "symbols/cuda_headers.h"

namespace cuxfer::shim::describe {

using trace::Direction;
using trace::EventKind;
using trace::MemKind;

inline uint8_t async_flags(bool async, bool per_thread) {
  return static_cast<uint8_t>((async ? trace::kFlagAsync : 0) | (per_thread ? trace::kFlagPerThreadStream : 0));
}

inline CallDesc copy(Direction dir, uint64_t src, uint64_t dst, uint64_t bytes, CUstream stream,
                     bool async, bool per_thread) {
  CallDesc d;
  d.kind = EventKind::Copy;
  d.direction = dir;
  d.src = src;
  d.dst = dst;
  d.bytes = bytes;
  d.stream = reinterpret_cast<uint64_t>(stream);
  d.flags = async_flags(async, per_thread);
  return d;
}

inline uint64_t ptr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// cudaMemcpyPeer[Async]: the devices are arguments, not inferred.
inline CallDesc peer(const void* dst, int dst_device, const void* src, int src_device, uint64_t bytes,
                     CUstream stream, bool async) {
  CallDesc d = copy(dst_device == src_device ? Direction::DtoD : Direction::Peer, ptr(src), ptr(dst), bytes, stream,
                    async, false);
  if (src_device >= 0 && src_device < 128) d.src_device = static_cast<int8_t>(src_device);
  if (dst_device >= 0 && dst_device < 128) d.dst_device = static_cast<int8_t>(dst_device);
  return d;
}

// One side of a 2D/3D copy descriptor: the pointer, and the kind when the
// descriptor itself says (arrays, explicit host/device).
struct Side {
  uint64_t ptr = 0;
  MemKind preset = MemKind::Unknown;
  bool device = false;
  bool known = false;  // memory type given explicitly (not unified)
};

inline Side side(CUmemorytype type, const void* host, CUdeviceptr device, CUarray array) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: return Side{ptr(host), MemKind::Unknown, false, true};
    case CU_MEMORYTYPE_DEVICE: return Side{device, MemKind::Unknown, true, true};
    case CU_MEMORYTYPE_ARRAY: return Side{0, MemKind::Array, true, true};
    default: (void)array; return Side{device, MemKind::Unknown, false, false};  // unified
  }
}

inline CallDesc from_sides(Side s, Side d, uint64_t bytes, CUstream stream, bool async, bool per_thread) {
  Direction dir = Direction::Unknown;
  if (s.known && d.known)
    dir = !s.device && d.device ? Direction::HtoD
          : s.device && !d.device ? Direction::DtoH
          : s.device && d.device  ? Direction::DtoD
                                  : Direction::HtoH;
  if (dir == Direction::DtoD) dir = Direction::Unknown;  // let the pointers tell D2D from peer
  CallDesc c = copy(dir, s.ptr, d.ptr, bytes, stream, async, per_thread);
  c.src_preset = s.preset;
  c.dst_preset = d.preset;
  return c;
}

inline CallDesc copy2d(const CUDA_MEMCPY2D* p, CUstream stream, bool async, bool per_thread) {
  if (!p) return copy(Direction::Unknown, 0, 0, 0, stream, async, per_thread);
  return from_sides(side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray),
                    side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray),
                    static_cast<uint64_t>(p->WidthInBytes) * p->Height, stream, async, per_thread);
}

inline CallDesc copy3d(const CUDA_MEMCPY3D* p, CUstream stream, bool async, bool per_thread) {
  if (!p) return copy(Direction::Unknown, 0, 0, 0, stream, async, per_thread);
  return from_sides(side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray),
                    side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray),
                    static_cast<uint64_t>(p->WidthInBytes) * p->Height * (p->Depth ? p->Depth : 1),
                    stream, async, per_thread);
}

inline CallDesc copy3d_peer(const CUDA_MEMCPY3D_PEER* p, CUstream stream, bool async, bool per_thread) {
  if (!p) return copy(Direction::Unknown, 0, 0, 0, stream, async, per_thread);
  CallDesc c = from_sides(side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray),
                          side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray),
                          static_cast<uint64_t>(p->WidthInBytes) * p->Height * (p->Depth ? p->Depth : 1),
                          stream, async, per_thread);
  if (p->srcContext != p->dstContext && p->srcMemoryType != CU_MEMORYTYPE_HOST &&
      p->dstMemoryType != CU_MEMORYTYPE_HOST)
    c.direction = Direction::Peer;
  return c;
}

inline CallDesc batch(const CUdeviceptr* dsts, const CUdeviceptr* srcs, const size_t* sizes, size_t count,
                      CUstream stream, bool per_thread) {
  uint64_t bytes = 0;
  for (size_t i = 0; sizes && i < count; ++i) bytes += sizes[i];
  // The batch is one user call: classified by its first copy.
  return copy(Direction::Unknown, count && srcs ? srcs[0] : 0, count && dsts ? dsts[0] : 0, bytes, stream,
              true, per_thread);
}

inline uint64_t extent_bytes(const CUextent3D& e) {
  return static_cast<uint64_t>(e.width) * (e.height ? e.height : 1) * (e.depth ? e.depth : 1);
}

inline CallDesc batch3d(size_t n, const CUDA_MEMCPY3D_BATCH_OP* ops, CUstream stream, bool per_thread) {
  uint64_t bytes = 0;
  for (size_t i = 0; ops && i < n; ++i) bytes += extent_bytes(ops[i].extent);
  CallDesc c = copy(Direction::Unknown, 0, 0, bytes, stream, true, per_thread);
  if (n && ops) {
    auto operand = [](const CUmemcpy3DOperand& o, uint64_t& p, MemKind& k) {
      if (o.type == CU_MEMCPY_OPERAND_TYPE_POINTER) p = o.op.ptr.ptr;
      else k = MemKind::Array;
    };
    operand(ops[0].src, c.src, c.src_preset);
    operand(ops[0].dst, c.dst, c.dst_preset);
  }
  return c;
}

inline CallDesc memset(CUdeviceptr dst, uint64_t bytes, CUstream stream, bool async, bool per_thread) {
  CallDesc d;
  d.kind = EventKind::Memset;
  d.dst = dst;
  d.bytes = bytes;
  d.stream = reinterpret_cast<uint64_t>(stream);
  d.flags = async_flags(async, per_thread);
  return d;
}

inline CallDesc memory(EventKind kind, uint64_t address, uint64_t bytes, MemKind memory_kind) {
  CallDesc d;
  d.kind = kind;
  d.dst = address;
  d.bytes = bytes;
  d.dst_preset = memory_kind;
  return d;
}

}  // namespace cuxfer::shim::describe
