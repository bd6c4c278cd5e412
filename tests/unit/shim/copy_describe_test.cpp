// The describers in interpose/copy_describe.h: what each copy/memset family
// moves, from its arguments alone.
#include <gtest/gtest.h>

#include <cstring>

#include "interpose/copy_describe.h"

namespace cuxfer::shim {
namespace {

namespace d = describe;
using trace::Direction;
using trace::EventKind;
using trace::MemKind;

const CUstream kStream = reinterpret_cast<CUstream>(0x5151);
constexpr CUdeviceptr kDev = 0xD00000000000ull;
constexpr CUdeviceptr kDev2 = 0xE00000000000ull;
char g_host[64];
const uint64_t kHost = reinterpret_cast<uint64_t>(g_host);
const CUarray kArray = reinterpret_cast<CUarray>(0xA11A);

TEST(CopyDescribe, AsyncFlags) {
  EXPECT_EQ(d::async_flags(false, false), 0);
  EXPECT_EQ(d::async_flags(true, false), trace::kFlagAsync);
  EXPECT_EQ(d::async_flags(false, true), trace::kFlagPerThreadStream);
  EXPECT_EQ(d::async_flags(true, true), trace::kFlagAsync | trace::kFlagPerThreadStream);
}

TEST(CopyDescribe, OneDimensional) {
  CallDesc c = d::copy(Direction::HtoD, kHost, kDev, 4096, kStream, true, false);
  EXPECT_EQ(c.kind, EventKind::Copy);
  EXPECT_EQ(c.direction, Direction::HtoD);
  EXPECT_EQ(c.src, kHost);
  EXPECT_EQ(c.dst, kDev);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(c.stream, 0x5151u);
  EXPECT_EQ(c.flags, trace::kFlagAsync);
  EXPECT_EQ(c.src_preset, MemKind::Unknown);
  EXPECT_EQ(c.dst_preset, MemKind::Unknown);

  CallDesc u = d::copy(Direction::Unknown, kDev, kDev2, 1, nullptr, false, true);  // cuMemcpy_ptds
  EXPECT_EQ(u.direction, Direction::Unknown);
  EXPECT_EQ(u.stream, 0u);
  EXPECT_EQ(u.flags, trace::kFlagPerThreadStream);
  EXPECT_EQ(d::ptr(g_host), kHost);
  EXPECT_EQ(d::ptr(nullptr), 0u);
}

CUDA_MEMCPY2D desc2d(CUmemorytype src, CUmemorytype dst, size_t width, size_t height) {
  CUDA_MEMCPY2D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = src;
  p.dstMemoryType = dst;
  p.srcHost = g_host;
  p.dstHost = g_host + 8;
  p.srcDevice = kDev;
  p.dstDevice = kDev2;
  p.srcArray = kArray;
  p.dstArray = kArray;
  p.srcPitch = 1024;
  p.dstPitch = 2048;  // pitches do not count: only width x height bytes move
  p.WidthInBytes = width;
  p.Height = height;
  return p;
}

TEST(CopyDescribe, TwoDHostToDevice) {
  auto p = desc2d(CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE, 100, 7);
  CallDesc c = d::copy2d(&p, kStream, true, true);
  EXPECT_EQ(c.kind, EventKind::Copy);
  EXPECT_EQ(c.bytes, 700u);
  EXPECT_EQ(c.direction, Direction::HtoD);
  EXPECT_EQ(c.src, kHost);
  EXPECT_EQ(c.dst, kDev2);
  EXPECT_EQ(c.src_preset, MemKind::Unknown);  // host memory: pageable or pinned, the table says
  EXPECT_EQ(c.dst_preset, MemKind::Unknown);
  EXPECT_EQ(c.stream, 0x5151u);
  EXPECT_EQ(c.flags, trace::kFlagAsync | trace::kFlagPerThreadStream);
}

TEST(CopyDescribe, TwoDDirectionsFromMemoryTypes) {
  struct Case {
    CUmemorytype src, dst;
    Direction dir;
    uint64_t src_ptr, dst_ptr;
    MemKind src_preset, dst_preset;
  };
  const CUmemorytype H = CU_MEMORYTYPE_HOST, D = CU_MEMORYTYPE_DEVICE, A = CU_MEMORYTYPE_ARRAY,
                     U = CU_MEMORYTYPE_UNIFIED;
  const Case cases[] = {
      {H, D, Direction::HtoD, kHost, kDev2, MemKind::Unknown, MemKind::Unknown},
      {D, H, Direction::DtoH, kDev, kHost + 8, MemKind::Unknown, MemKind::Unknown},
      {H, H, Direction::HtoH, kHost, kHost + 8, MemKind::Unknown, MemKind::Unknown},
      // Device to device: left to the pointers (same device or peer).
      {D, D, Direction::Unknown, kDev, kDev2, MemKind::Unknown, MemKind::Unknown},
      // Arrays are device memory, without a pointer.
      {H, A, Direction::HtoD, kHost, 0, MemKind::Unknown, MemKind::Array},
      {A, H, Direction::DtoH, 0, kHost + 8, MemKind::Array, MemKind::Unknown},
      {A, D, Direction::Unknown, 0, kDev2, MemKind::Array, MemKind::Unknown},
      {A, A, Direction::Unknown, 0, 0, MemKind::Array, MemKind::Array},
      // Unified: the device field holds a UVA pointer of any kind.
      {U, D, Direction::Unknown, kDev, kDev2, MemKind::Unknown, MemKind::Unknown},
      {H, U, Direction::Unknown, kHost, kDev2, MemKind::Unknown, MemKind::Unknown},
      {U, U, Direction::Unknown, kDev, kDev2, MemKind::Unknown, MemKind::Unknown},
      {U, A, Direction::Unknown, kDev, 0, MemKind::Unknown, MemKind::Array},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(testing::Message() << "src type " << k.src << " dst type " << k.dst);
    auto p = desc2d(k.src, k.dst, 16, 4);
    CallDesc c = d::copy2d(&p, nullptr, false, false);
    EXPECT_EQ(c.direction, k.dir);
    EXPECT_EQ(c.src, k.src_ptr);
    EXPECT_EQ(c.dst, k.dst_ptr);
    EXPECT_EQ(c.src_preset, k.src_preset);
    EXPECT_EQ(c.dst_preset, k.dst_preset);
    EXPECT_EQ(c.bytes, 64u);
    EXPECT_EQ(c.flags, 0);
  }
}

TEST(CopyDescribe, TwoDNullDescriptor) {
  CallDesc c = d::copy2d(nullptr, kStream, true, false);
  EXPECT_EQ(c.kind, EventKind::Copy);
  EXPECT_EQ(c.direction, Direction::Unknown);
  EXPECT_EQ(c.bytes, 0u);
  EXPECT_EQ(c.src, 0u);
  EXPECT_EQ(c.dst, 0u);
  EXPECT_EQ(c.stream, 0x5151u);
  EXPECT_EQ(c.flags, trace::kFlagAsync);
}

TEST(CopyDescribe, TwoDLargeDoesNotOverflow) {
  auto p = desc2d(CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, size_t{1} << 20, size_t{1} << 14);
  EXPECT_EQ(d::copy2d(&p, nullptr, false, false).bytes, uint64_t{1} << 34);
}

CUDA_MEMCPY3D desc3d(CUmemorytype src, CUmemorytype dst, size_t w, size_t h, size_t depth) {
  CUDA_MEMCPY3D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = src;
  p.dstMemoryType = dst;
  p.srcHost = g_host;
  p.dstHost = g_host + 8;
  p.srcDevice = kDev;
  p.dstDevice = kDev2;
  p.srcArray = kArray;
  p.dstArray = kArray;
  p.WidthInBytes = w;
  p.Height = h;
  p.Depth = depth;
  return p;
}

TEST(CopyDescribe, ThreeD) {
  auto p = desc3d(CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, 32, 8, 5);
  CallDesc c = d::copy3d(&p, kStream, false, true);
  EXPECT_EQ(c.bytes, 32u * 8 * 5);
  EXPECT_EQ(c.direction, Direction::DtoH);
  EXPECT_EQ(c.src, kDev);
  EXPECT_EQ(c.dst, kHost + 8);
  EXPECT_EQ(c.flags, trace::kFlagPerThreadStream);

  auto flat = desc3d(CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_ARRAY, 32, 8, 0);  // depth 0 counts as 1
  CallDesc f = d::copy3d(&flat, nullptr, true, false);
  EXPECT_EQ(f.bytes, 256u);
  EXPECT_EQ(f.direction, Direction::HtoD);
  EXPECT_EQ(f.dst_preset, MemKind::Array);
  EXPECT_EQ(f.dst, 0u);
  EXPECT_EQ(f.flags, trace::kFlagAsync);

  auto uni = desc3d(CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED, 4, 4, 4);
  CallDesc u = d::copy3d(&uni, nullptr, false, false);
  EXPECT_EQ(u.bytes, 64u);
  EXPECT_EQ(u.direction, Direction::Unknown);
  EXPECT_EQ(u.src, kDev);
  EXPECT_EQ(u.dst, kDev2);

  EXPECT_EQ(d::copy3d(nullptr, nullptr, false, false).bytes, 0u);
}

CUDA_MEMCPY3D_PEER desc3d_peer(CUmemorytype src, CUmemorytype dst, CUcontext sc, CUcontext dc) {
  CUDA_MEMCPY3D_PEER p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = src;
  p.dstMemoryType = dst;
  p.srcHost = g_host;
  p.dstHost = g_host + 8;
  p.srcDevice = kDev;
  p.dstDevice = kDev2;
  p.srcArray = kArray;
  p.dstArray = kArray;
  p.srcContext = sc;
  p.dstContext = dc;
  p.WidthInBytes = 10;
  p.Height = 3;
  p.Depth = 2;
  return p;
}

TEST(CopyDescribe, ThreeDPeer) {
  auto c0 = reinterpret_cast<CUcontext>(0x100), c1 = reinterpret_cast<CUcontext>(0x200);
  // Different contexts, device on both sides: peer.
  auto p = desc3d_peer(CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE, c0, c1);
  CallDesc c = d::copy3d_peer(&p, kStream, true, false);
  EXPECT_EQ(c.direction, Direction::Peer);
  EXPECT_EQ(c.bytes, 60u);
  EXPECT_EQ(c.src, kDev);
  EXPECT_EQ(c.dst, kDev2);
  EXPECT_EQ(c.flags, trace::kFlagAsync);
  // An array on one side is still device memory in another context.
  auto pa = desc3d_peer(CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_DEVICE, c0, c1);
  EXPECT_EQ(d::copy3d_peer(&pa, nullptr, false, false).direction, Direction::Peer);
  // Same context: left to the pointers.
  auto same = desc3d_peer(CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE, c0, c0);
  EXPECT_EQ(d::copy3d_peer(&same, nullptr, false, false).direction, Direction::Unknown);
  // A host side is never a peer copy, whatever the contexts.
  auto h2d = desc3d_peer(CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE, c0, c1);
  EXPECT_EQ(d::copy3d_peer(&h2d, nullptr, false, false).direction, Direction::HtoD);
  auto d2h = desc3d_peer(CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, c0, c1);
  EXPECT_EQ(d::copy3d_peer(&d2h, nullptr, false, false).direction, Direction::DtoH);
  EXPECT_EQ(d::copy3d_peer(nullptr, nullptr, false, false).bytes, 0u);
}

TEST(CopyDescribe, BatchSumsSizesAndTakesFirstPointers) {
  CUdeviceptr dsts[3] = {kDev2, kDev2 + 100, kDev2 + 200};
  CUdeviceptr srcs[3] = {kDev, kDev + 100, kHost};
  size_t sizes[3] = {10, 20, 30};
  CallDesc c = d::batch(dsts, srcs, sizes, 3, kStream, true);
  EXPECT_EQ(c.kind, EventKind::Copy);
  EXPECT_EQ(c.bytes, 60u);
  EXPECT_EQ(c.src, kDev);
  EXPECT_EQ(c.dst, kDev2);
  EXPECT_EQ(c.direction, Direction::Unknown);
  EXPECT_EQ(c.stream, 0x5151u);
  EXPECT_EQ(c.flags, trace::kFlagAsync | trace::kFlagPerThreadStream);  // batches are always async

  CallDesc empty = d::batch(dsts, srcs, sizes, 0, kStream, false);
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_EQ(empty.src, 0u);
  EXPECT_EQ(empty.dst, 0u);
  EXPECT_EQ(empty.flags, trace::kFlagAsync);

  CallDesc nulls = d::batch(nullptr, nullptr, nullptr, 3, nullptr, false);
  EXPECT_EQ(nulls.bytes, 0u);
  EXPECT_EQ(nulls.src, 0u);
  EXPECT_EQ(nulls.dst, 0u);
}

CUDA_MEMCPY3D_BATCH_OP op(bool src_ptr, bool dst_ptr, size_t w, size_t h, size_t depth) {
  CUDA_MEMCPY3D_BATCH_OP o;
  std::memset(&o, 0, sizeof o);
  o.src.type = src_ptr ? CU_MEMCPY_OPERAND_TYPE_POINTER : CU_MEMCPY_OPERAND_TYPE_ARRAY;
  if (src_ptr)
    o.src.op.ptr.ptr = kDev;
  else
    o.src.op.array.array = kArray;
  o.dst.type = dst_ptr ? CU_MEMCPY_OPERAND_TYPE_POINTER : CU_MEMCPY_OPERAND_TYPE_ARRAY;
  if (dst_ptr)
    o.dst.op.ptr.ptr = kHost;
  else
    o.dst.op.array.array = kArray;
  o.extent.width = w;
  o.extent.height = h;
  o.extent.depth = depth;
  return o;
}

TEST(CopyDescribe, Batch3D) {
  CUextent3D e{};
  e.width = 8;
  EXPECT_EQ(d::extent_bytes(e), 8u);  // zero height/depth count as 1
  e.height = 3;
  e.depth = 2;
  EXPECT_EQ(d::extent_bytes(e), 48u);

  CUDA_MEMCPY3D_BATCH_OP ops[2] = {op(true, true, 16, 2, 1), op(false, true, 4, 4, 4)};
  CallDesc c = d::batch3d(2, ops, kStream, false);
  EXPECT_EQ(c.bytes, 32u + 64u);
  EXPECT_EQ(c.src, kDev);
  EXPECT_EQ(c.dst, kHost);
  EXPECT_EQ(c.src_preset, MemKind::Unknown);
  EXPECT_EQ(c.dst_preset, MemKind::Unknown);
  EXPECT_EQ(c.direction, Direction::Unknown);
  EXPECT_EQ(c.flags, trace::kFlagAsync);

  CUDA_MEMCPY3D_BATCH_OP arr[1] = {op(false, false, 4, 1, 1)};
  CallDesc a = d::batch3d(1, arr, nullptr, true);
  EXPECT_EQ(a.src, 0u);
  EXPECT_EQ(a.dst, 0u);
  EXPECT_EQ(a.src_preset, MemKind::Array);
  EXPECT_EQ(a.dst_preset, MemKind::Array);
  EXPECT_EQ(a.flags, trace::kFlagAsync | trace::kFlagPerThreadStream);

  CallDesc none = d::batch3d(0, nullptr, nullptr, false);
  EXPECT_EQ(none.bytes, 0u);
  EXPECT_EQ(none.src, 0u);
  EXPECT_EQ(none.src_preset, MemKind::Unknown);
}

TEST(CopyDescribe, Memset) {
  // cuMemsetD32Async(p, v, 1000, s): the hook passes elements x 4.
  CallDesc m = d::memset(kDev, 1000 * 4, kStream, true, false);
  EXPECT_EQ(m.kind, EventKind::Memset);
  EXPECT_EQ(m.dst, kDev);
  EXPECT_EQ(m.src, 0u);
  EXPECT_EQ(m.bytes, 4000u);
  EXPECT_EQ(m.stream, 0x5151u);
  EXPECT_EQ(m.flags, trace::kFlagAsync);
  EXPECT_EQ(m.direction, Direction::Unknown);
  EXPECT_EQ(m.dst_preset, MemKind::Unknown);
  // cuMemsetD2D16_v2_ptds(p, pitch, v, 64, 10): 64 x 10 x 2.
  CallDesc m2 = d::memset(kDev, 64 * 10 * 2, nullptr, false, true);
  EXPECT_EQ(m2.bytes, 1280u);
  EXPECT_EQ(m2.flags, trace::kFlagPerThreadStream);
  EXPECT_EQ(m2.stream, 0u);
}

TEST(CopyDescribe, MemoryEvents) {
  CallDesc a = d::memory(EventKind::DeviceAlloc, kDev, 1 << 20, MemKind::Device);
  EXPECT_EQ(a.kind, EventKind::DeviceAlloc);
  EXPECT_EQ(a.dst, kDev);
  EXPECT_EQ(a.bytes, 1u << 20);
  EXPECT_EQ(a.dst_preset, MemKind::Device);
  EXPECT_EQ(a.flags, 0);
  EXPECT_EQ(a.stream, 0u);
}

}  // namespace
}  // namespace cuxfer::shim
