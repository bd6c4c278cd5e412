// describe_event: the event fields a finished call gets from its description,
// with pointers classified through the shim's allocation table. No CUDA
// driver is loaded here, so a pointer the table does not know is Pageable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "interpose/call_scope.h"
#include "interpose/copy_describe.h"
#include "symbols/symbol_table.h"
#include "memory/pointer_classifier.h"

namespace cuxfer::shim {
namespace {

namespace d = describe;
using trace::Direction;
using trace::EventKind;
using trace::MemKind;

// Device and managed ranges live above the 47-bit user address space, so no
// malloc'd pointer can fall inside them.
constexpr uint64_t kDev0 = 0xD00000000000ull;
constexpr uint64_t kDev1 = 0xE00000000000ull;
constexpr uint64_t kManaged = 0xF00000000000ull;
constexpr uint64_t kMiB = 1ull << 20;
const CUstream kStream = reinterpret_cast<CUstream>(0x77);

class DescribeEvent : public testing::Test {
 protected:
  void SetUp() override {
    // One block, 4 KiB buffers 8 KiB apart: the byte after each buffer is
    // known to be ordinary (pageable) memory, not a neighbouring buffer.
    block_ = static_cast<char*>(std::malloc(4 * 8192));
    pinned_ = block_;
    registered_ = block_ + 8192;
    pageable_ = block_ + 2 * 8192;  // never inserted
    pageable2_ = block_ + 3 * 8192;
    AllocationTable& t = allocation_table();
    ASSERT_TRUE(t.insert(kDev0, kMiB, MemKind::Device, 0));
    ASSERT_TRUE(t.insert(kDev1, kMiB, MemKind::Device, 1));
    ASSERT_TRUE(t.insert(kManaged, kMiB, MemKind::Managed, 0));
    ASSERT_TRUE(t.insert(ptr(pinned_), 4096, MemKind::Pinned, -1));
    ASSERT_TRUE(t.insert(ptr(registered_), 4096, MemKind::Registered, -1));
    reset_pointer_cache();
  }
  void TearDown() override {
    AllocationTable& t = allocation_table();
    for (uint64_t b : {kDev0, kDev1, kManaged, ptr(pinned_), ptr(registered_)}) t.erase(b);
    EXPECT_EQ(t.size(), 0u);
    reset_pointer_cache();
    std::free(block_);
  }
  static uint64_t ptr(const void* p) { return reinterpret_cast<uint64_t>(p); }

  // Runs describe_event on a fresh event, as the owning hook does.
  static trace::Event run(const CallDesc& c, uint8_t preset_flags = 0) {
    trace::Event e{};
    e.flags = preset_flags;
    describe_event(c, e);
    return e;
  }
  // A unified copy (cuMemcpy / cudaMemcpyDefault): direction from the pointers.
  static trace::Event unified(uint64_t src, uint64_t dst, uint64_t bytes = 256) {
    return run(d::copy(Direction::Unknown, src, dst, bytes, kStream, false, false));
  }

  char* block_ = nullptr;
  char* pinned_ = nullptr;
  char* registered_ = nullptr;
  char* pageable_ = nullptr;
  char* pageable2_ = nullptr;
};

TEST_F(DescribeEvent, NoDriverIsLoadedInUnitTests) {
  // The premise of every Pageable answer below.
  EXPECT_EQ(libcuda_handle(), nullptr);
}

TEST_F(DescribeEvent, ClassifyPointer) {
  PointerInfo dev = classify_pointer(kDev1 + 12345);
  EXPECT_EQ(dev.kind, MemKind::Device);
  EXPECT_EQ(dev.device, 1);
  EXPECT_FALSE(dev.from_driver);
  PointerInfo pin = classify_pointer(ptr(pinned_ + 4095));
  EXPECT_EQ(pin.kind, MemKind::Pinned);
  EXPECT_FALSE(pin.from_driver);
  // Unknown to the table and no driver to ask: ordinary pageable memory.
  PointerInfo pg = classify_pointer(ptr(pageable_));
  EXPECT_EQ(pg.kind, MemKind::Pageable);
  EXPECT_EQ(pg.device, -1);
  EXPECT_EQ(classify_pointer(ptr(pinned_ + 4096)).kind, MemKind::Pageable);  // one past the end
  EXPECT_EQ(classify_pointer(kDev0 + kMiB).kind, MemKind::Pageable);
  // The null pointer is not classified at all.
  PointerInfo null = classify_pointer(0);
  EXPECT_EQ(null.kind, MemKind::Unknown);
  EXPECT_FALSE(null.from_driver);
}

TEST_F(DescribeEvent, ClassificationFollowsTableChanges) {
  uint64_t p = ptr(pageable2_);
  EXPECT_EQ(classify_pointer(p).kind, MemKind::Pageable);                    // now cached for this thread
  ASSERT_TRUE(allocation_table().insert(p, 4096, MemKind::Registered, -1));  // cuMemHostRegister
  EXPECT_EQ(classify_pointer(p + 100).kind, MemKind::Registered);
  ASSERT_TRUE(allocation_table().erase(p));  // cuMemHostUnregister
  EXPECT_EQ(classify_pointer(p + 100).kind, MemKind::Pageable);
}

TEST_F(DescribeEvent, APageSharedByTableMemoryAndOtherMemory) {
  // A registered range in the middle of a page (cudaHostRegister of a malloc'd
  // buffer): a pointer beside it is pageable, and that answer, cached for the
  // thread, must not be given for the range that shares its page.
  const uint64_t p = ptr(pageable2_);
  ASSERT_TRUE(allocation_table().insert(p + 2048, 512, MemKind::Registered, -1));
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(classify_pointer(p).kind, MemKind::Pageable) << round;
    EXPECT_EQ(classify_pointer(p + 2048).kind, MemKind::Registered) << round;
    EXPECT_EQ(classify_pointer(p + 2100).kind, MemKind::Registered) << round;
    EXPECT_EQ(classify_pointer(p + 2560).kind, MemKind::Pageable) << round;  // one past its end
  }
  // Many pages in turn (a ring of batches), then the first ones again: the same answers.
  for (int round = 0; round < 2; ++round)
    for (uint64_t i = 0; i < 256; ++i) EXPECT_EQ(classify_pointer(0x7f0000000000ull + i * 8192).kind, MemKind::Pageable);
  EXPECT_EQ(classify_pointer(p + 2048).kind, MemKind::Registered);
  ASSERT_TRUE(allocation_table().erase(p + 2048));
  EXPECT_EQ(classify_pointer(p + 2048).kind, MemKind::Pageable);
}

TEST_F(DescribeEvent, UnifiedPageableToDevice) {
  trace::Event e = unified(ptr(pageable_), kDev0 + 64, 4096);
  EXPECT_EQ(e.kind, static_cast<uint8_t>(EventKind::Copy));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.address, ptr(pageable_));  // the host side
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.bytes, 4096u);
  EXPECT_EQ(e.stream, 0x77u);
  EXPECT_EQ(e.flags & trace::kFlagAsync, 0);
}

TEST_F(DescribeEvent, UnifiedPinnedToDevice) {
  trace::Event e = unified(ptr(pinned_ + 16), kDev1 + 0x100);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Pinned));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.address, ptr(pinned_ + 16));
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.flags & trace::kFlagKindFromDriver, 0);  // both kinds came from the table
}

TEST_F(DescribeEvent, UnifiedRegisteredToDevice) {
  trace::Event e = unified(ptr(registered_), kDev0);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Registered));
  EXPECT_EQ(e.address, ptr(registered_));
}

TEST_F(DescribeEvent, UnifiedDeviceToPageable) {
  trace::Event e = unified(kDev1 + 8, ptr(pageable_ + 8), 100);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::DtoH));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.address, ptr(pageable_ + 8));  // the host side is the destination
  EXPECT_EQ(e.device, 1);                    // the device side is the source
  EXPECT_EQ(e.bytes, 100u);
}

TEST_F(DescribeEvent, UnifiedDeviceToPinned) {
  trace::Event e = unified(kDev0, ptr(pinned_));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::DtoH));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Pinned));
  EXPECT_EQ(e.address, ptr(pinned_));
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.flags & trace::kFlagKindFromDriver, 0);
}

TEST_F(DescribeEvent, UnifiedDeviceToDeviceSameDevice) {
  trace::Event e = unified(kDev0, kDev0 + kMiB / 2);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::DtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.device, 0);
  EXPECT_EQ(e.address, 1u);  // no host side: the source device + 1 (trace/event.h)
}

TEST_F(DescribeEvent, UnifiedDeviceToOtherDeviceIsPeer) {
  trace::Event e = unified(kDev0 + 1, kDev1 + 2);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::Peer));
  EXPECT_EQ(e.device, 1);    // the destination device
  EXPECT_EQ(e.address, 1u);  // the source device (0) + 1
  trace::Event back = unified(kDev1, kDev0);
  EXPECT_EQ(back.direction, static_cast<uint8_t>(Direction::Peer));
  EXPECT_EQ(back.device, 0);
  EXPECT_EQ(back.address, 2u);
}

TEST_F(DescribeEvent, UnifiedHostToHost) {
  trace::Event e = unified(ptr(pageable_), ptr(pinned_));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoH));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Pinned));
  EXPECT_EQ(e.address, ptr(pageable_));  // both host: the source
  EXPECT_EQ(e.device, -1);

  trace::Event p2p = unified(ptr(pageable_), ptr(pageable2_));
  EXPECT_EQ(p2p.direction, static_cast<uint8_t>(Direction::HtoH));
  EXPECT_EQ(p2p.src_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(p2p.dst_kind, static_cast<uint8_t>(MemKind::Pageable));
}

TEST_F(DescribeEvent, ManagedKindIsRecorded) {
  trace::Event e = run(d::copy(Direction::HtoD, kManaged + 4, kDev0, 64, nullptr, false, false));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Managed));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
}

TEST_F(DescribeEvent, ExplicitDirectionIsKept) {
  // cuMemcpyHtoD: the API states the direction.
  trace::Event e = run(d::copy(Direction::HtoD, ptr(pageable_), kDev1, 512, kStream, true, true));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.address, ptr(pageable_));
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.flags & (trace::kFlagAsync | trace::kFlagPerThreadStream),
            trace::kFlagAsync | trace::kFlagPerThreadStream);
  // cuMemcpyDtoH into pinned memory.
  trace::Event h = run(d::copy(Direction::DtoH, kDev0, ptr(pinned_), 512, nullptr, false, false));
  EXPECT_EQ(h.direction, static_cast<uint8_t>(Direction::DtoH));
  EXPECT_EQ(h.address, ptr(pinned_));
  EXPECT_EQ(h.device, 0);
  // cuMemcpyPeer.
  trace::Event p = run(d::copy(Direction::Peer, kDev0, kDev1, 512, nullptr, false, false));
  EXPECT_EQ(p.direction, static_cast<uint8_t>(Direction::Peer));
  EXPECT_EQ(p.address, 1u);
  EXPECT_EQ(p.device, 1);
  // cudaMemcpyPeer: the devices the app named win over the pointers' (here
  // both on device 0 by the table, as an app's own VMM mapping could be).
  trace::Event named = run(d::peer(reinterpret_cast<void*>(kDev0 + 64), 3, reinterpret_cast<void*>(kDev0), 2, 512,
                                   nullptr, false));
  EXPECT_EQ(named.direction, static_cast<uint8_t>(Direction::Peer));
  EXPECT_EQ(named.address, 3u);
  EXPECT_EQ(named.device, 3);
}

TEST_F(DescribeEvent, ExplicitDeviceToDevice) {
  // cuMemcpyDtoD within one device.
  trace::Event same = run(d::copy(Direction::DtoD, kDev0, kDev0 + 4096, 64, nullptr, false, false));
  EXPECT_EQ(same.direction, static_cast<uint8_t>(Direction::DtoD));
  EXPECT_EQ(same.device, 0);
  EXPECT_EQ(same.address, 1u);
  // cuMemcpyDtoD between devices (legal under UVA): a peer copy, as for the
  // unified and 2D/3D paths (Direction::Peer is "device to device across devices").
  trace::Event across = run(d::copy(Direction::DtoD, kDev0, kDev1, 64, nullptr, false, false));
  EXPECT_EQ(across.direction, static_cast<uint8_t>(Direction::Peer));
  EXPECT_EQ(across.device, 1);
}

TEST_F(DescribeEvent, ArrayPresets) {
  // cuMemcpyAtoH: the source is an array, no pointer.
  CallDesc a2h = d::copy(Direction::DtoH, 0, ptr(pageable_), 128, nullptr, false, false);
  a2h.src_preset = MemKind::Array;
  trace::Event e = run(a2h);
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::DtoH));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Array));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.address, ptr(pageable_));

  // A 2D copy from host to an array: direction from the descriptor.
  CUDA_MEMCPY2D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = CU_MEMORYTYPE_HOST;
  p.srcHost = pinned_;
  p.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  p.dstArray = reinterpret_cast<CUarray>(0xA);
  p.WidthInBytes = 64;
  p.Height = 4;
  trace::Event h2a = run(d::copy2d(&p, nullptr, false, false));
  EXPECT_EQ(h2a.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(h2a.src_kind, static_cast<uint8_t>(MemKind::Pinned));
  EXPECT_EQ(h2a.dst_kind, static_cast<uint8_t>(MemKind::Array));
  EXPECT_EQ(h2a.address, ptr(pinned_));
  EXPECT_EQ(h2a.bytes, 256u);

  // Array to array: device to device, no pointer anywhere.
  p.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  p.srcArray = reinterpret_cast<CUarray>(0xB);
  trace::Event a2a = run(d::copy2d(&p, nullptr, false, false));
  EXPECT_EQ(a2a.direction, static_cast<uint8_t>(Direction::DtoD));
  EXPECT_EQ(a2a.src_kind, static_cast<uint8_t>(MemKind::Array));
  EXPECT_EQ(a2a.dst_kind, static_cast<uint8_t>(MemKind::Array));
}

TEST_F(DescribeEvent, TwoDDeviceToDeviceDescriptorUsesPointers) {
  CUDA_MEMCPY2D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = kDev0;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = kDev1;
  p.WidthInBytes = 8;
  p.Height = 8;
  EXPECT_EQ(run(d::copy2d(&p, nullptr, false, false)).direction, static_cast<uint8_t>(Direction::Peer));
  p.dstDevice = kDev0 + 1024;
  EXPECT_EQ(run(d::copy2d(&p, nullptr, false, false)).direction, static_cast<uint8_t>(Direction::DtoD));
  // Unified descriptor sides resolve through the table too.
  p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  p.srcDevice = ptr(pageable_);
  trace::Event e = run(d::copy2d(&p, nullptr, false, false));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::HtoD));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Pageable));
  EXPECT_EQ(e.address, ptr(pageable_));
}

TEST_F(DescribeEvent, Memset) {
  trace::Event e = run(d::memset(kDev1 + 32, 4000, kStream, true, false));
  EXPECT_EQ(e.kind, static_cast<uint8_t>(EventKind::Memset));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Unknown));
  EXPECT_EQ(e.direction, static_cast<uint8_t>(Direction::Unknown));
  EXPECT_EQ(e.device, 1);
  EXPECT_EQ(e.address, kDev1 + 32);
  EXPECT_EQ(e.bytes, 4000u);
  EXPECT_EQ(e.stream, 0x77u);
  EXPECT_EQ(e.flags & trace::kFlagAsync, trace::kFlagAsync);
  EXPECT_EQ(e.flags & trace::kFlagKindFromDriver, 0);

  trace::Event m = run(d::memset(kManaged, 10, nullptr, false, true));
  EXPECT_EQ(m.dst_kind, static_cast<uint8_t>(MemKind::Managed));
  EXPECT_EQ(m.device, 0);
  EXPECT_EQ(m.flags & trace::kFlagPerThreadStream, trace::kFlagPerThreadStream);
}

TEST_F(DescribeEvent, AllocationEvents) {
  // The post step filled nothing: the description's address and size.
  trace::Event a = run(d::memory(EventKind::DeviceAlloc, kDev0, kMiB, MemKind::Device));
  EXPECT_EQ(a.kind, static_cast<uint8_t>(EventKind::DeviceAlloc));
  EXPECT_EQ(a.address, kDev0);
  EXPECT_EQ(a.bytes, kMiB);
  EXPECT_EQ(a.dst_kind, static_cast<uint8_t>(MemKind::Device));
  EXPECT_EQ(a.direction, static_cast<uint8_t>(Direction::Unknown));

  // The post step filled them (the pointer is known only after the call): kept.
  trace::Event e{};
  e.address = 0x1234000;
  e.bytes = 777;
  describe_event(d::memory(EventKind::HostAlloc, 0, 0, MemKind::Pinned), e);
  EXPECT_EQ(e.kind, static_cast<uint8_t>(EventKind::HostAlloc));
  EXPECT_EQ(e.address, 0x1234000u);
  EXPECT_EQ(e.bytes, 777u);
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Pinned));
}

TEST_F(DescribeEvent, FlagsAreAddedNotReplaced) {
  trace::Event e = run(d::copy(Direction::HtoD, ptr(pinned_), kDev0, 8, kStream, true, false),
                       trace::kFlagGpuExpected | trace::kFlagFailed);
  EXPECT_EQ(e.flags, trace::kFlagGpuExpected | trace::kFlagFailed | trace::kFlagAsync);
}

TEST_F(DescribeEvent, NullPointersOfAFailedCall) {
  // cudaMemcpy(nullptr, nullptr, n, cudaMemcpyDefault): nothing to classify.
  trace::Event e = unified(0, 0, 16);
  EXPECT_EQ(e.src_kind, static_cast<uint8_t>(MemKind::Unknown));
  EXPECT_EQ(e.dst_kind, static_cast<uint8_t>(MemKind::Unknown));
  EXPECT_EQ(e.flags & trace::kFlagKindFromDriver, 0);
  EXPECT_EQ(e.address, 0u);
}

}  // namespace
}  // namespace cuxfer::shim
