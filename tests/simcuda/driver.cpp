// simcuda driver: a test double of libcuda.so.1 for machines without a GPU.
//
// Every exported function is defined under the exact name and prototype the
// real cuda.h declares. We build with __CUDA_API_VERSION_INTERNAL, as NVIDIA's
// own driver does: cuda.h then stops mapping names onto their _v2/_ptds/_ptsz
// variants and instead declares every real exported variant (legacy v1,
// _v2, _ptds, _ptsz), so the compiler checks each definition below against
// the prototype an application or cuxfer's shim resolves.
//
// "Device" memory is ordinary, addressable memory taken from a PROT_NONE
// reservation that belongs to the simulation alone, so a copy is a plain
// memcpy, a stray host access to freed device memory faults, and pointer
// queries can tell device memory from host memory by looking the address up
// in the allocation table. All "asynchronous" work runs synchronously inside
// the call that enqueues it. docs/simcuda.md lists what is and is not modelled.

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------
constexpr int kDriverVersion = 13000;
constexpr int kMaxDevices = 8;
constexpr size_t kPage = 4096;
constexpr size_t kVmmGranularity = 2u << 20;  // what H100/H200 report
constexpr size_t kPitchAlignment = 512;
constexpr uint32_t kCtxMagic = 0x58544353;     // "SCTX"
constexpr uint32_t kStreamMagic = 0x4d525453;  // "STRM"
constexpr uint32_t kEventMagic = 0x54564553;   // "SEVT"

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------
}  // namespace

// CUcontext, CUstream and CUevent are pointers to these opaque structs in
// cuda.h; defining them (at global scope, where cuda.h declared them) lets the
// handles be real objects.
struct CUctx_st {
  uint32_t magic = kCtxMagic;
  int device = 0;
  bool primary = false;
  unsigned flags = 0;
  int usage = 1;  // cuCtxCreate's reference plus each cuCtxAttach's (cuCtxDetach drops one)
};
struct CUstream_st {
  uint32_t magic = kStreamMagic;
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
};
struct CUevent_st {
  uint32_t magic = kEventMagic;
  unsigned flags = 0;
  bool recorded = false;
  uint64_t time_ns = 0;
  // SIMCUDA_EVENTS_PENDING: recorded and not yet waited for (cuEventQuery: NOT_READY).
  bool pending = false;
  CUstream stream = nullptr;  // where it was last recorded
  CUctx_st* ctx = nullptr;    // current when it was created
};
struct CUmemPoolHandle_st {
  int device = 0;
};

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// ---------------------------------------------------------------------------
// Allocation table
// ---------------------------------------------------------------------------
enum class Kind { Device, Managed, HostPinned, HostRegistered, VmmMapped };

struct Alloc {
  uintptr_t base = 0;
  size_t size = 0;       // bytes the user asked for (pitch*height for pitched)
  size_t committed = 0;  // bytes taken from the device region (page rounded)
  Kind kind = Kind::Device;
  int device = 0;
  unsigned flags = 0;
  uint64_t id = 0;
  CUctx_st* ctx = nullptr;
  CUmemoryPool pool = nullptr;
  // VMM: the reservation this mapping lies in (RANGE_START_ADDR/RANGE_SIZE).
  uintptr_t range_base = 0;
  size_t range_size = 0;
  CUmemGenericAllocationHandle handle = 0;
  int prot = PROT_READ | PROT_WRITE;  // VMM: none until cuMemSetAccess
};

// A first-fit allocator over one address range. Ranges are kept page-aligned.
class RangeAllocator {
 public:
  void init(uintptr_t base, size_t size) {
    base_ = base;
    size_ = size;
    free_.clear();
    free_[base] = size;
  }
  bool contains(uintptr_t p) const { return p >= base_ && p < base_ + size_; }
  uintptr_t alloc(size_t size, size_t align) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      uintptr_t start = round_up(it->first, align);
      uintptr_t end = it->first + it->second;
      if (start + size > end || start + size < start) continue;
      uintptr_t blk = it->first;
      size_t blk_size = it->second;
      free_.erase(it);
      if (start > blk) free_[blk] = start - blk;
      if (start + size < blk + blk_size) free_[start + size] = blk + blk_size - (start + size);
      return start;
    }
    return 0;
  }
  // Carves a specific range out (cuMemAddressReserve with a requested address).
  bool take(uintptr_t start, size_t size) {
    auto it = free_.upper_bound(start);
    if (it == free_.begin()) return false;
    --it;
    uintptr_t blk = it->first;
    size_t blk_size = it->second;
    if (start + size > blk + blk_size) return false;
    free_.erase(it);
    if (start > blk) free_[blk] = start - blk;
    if (start + size < blk + blk_size) free_[start + size] = blk + blk_size - (start + size);
    return true;
  }
  void release(uintptr_t start, size_t size) {
    auto [it, ok] = free_.emplace(start, size);
    (void)ok;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

 private:
  uintptr_t base_ = 0;
  size_t size_ = 0;
  std::map<uintptr_t, size_t> free_;
};

struct PhysAlloc {  // cuMemCreate
  int fd = -1;
  size_t size = 0;
  int device = 0;
  int refs = 0;  // 1 for the handle itself + 1 per mapping
  uint64_t id = 0;
};

struct Reservation {  // cuMemAddressReserve
  size_t size = 0;
};

struct DeviceState {
  RangeAllocator heap;
  uintptr_t base = 0;
  size_t size = 0;
  size_t used = 0;
  CUctx_st primary;
  int primary_refs = 0;
  // Its last reference was released: the real driver frees the context then,
  // and a later push of its handle reads freed memory (PyCUDA's detach of a
  // retained primary context crashed the shim that way). Retained again: alive.
  bool primary_destroyed = false;
  unsigned primary_flags = 0;
  CUmemPoolHandle_st default_pool;
};

struct State {
  std::mutex mu;
  std::atomic<bool> initialized{false};
  int device_count = 1;
  size_t device_mem = 0;
  DeviceState devices[kMaxDevices];
  RangeAllocator va;  // cuMemAddressReserve space
  std::map<uintptr_t, Alloc> allocs;
  std::map<uintptr_t, Reservation> reservations;
  std::map<CUmemGenericAllocationHandle, PhysAlloc> phys;
  std::set<CUctx_st*> contexts;  // created with cuCtxCreate
  std::set<CUctx_st*> destroyed;  // destroyed with cuCtxDestroy (until the address is reused)
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  // Events of contexts that were destroyed: freed by the real driver with
  // their context, kept here (never freed) so that a use of one is caught.
  std::set<CUevent_st*> dead_events;
  std::set<CUmemPoolHandle_st*> pools;
  uint64_t next_id = 1;
  CUmemGenericAllocationHandle next_handle = 0x1000;
};

State& state() {
  static State* s = new State();  // never destroyed: apps call us from atexit handlers
  return *s;
}

thread_local std::vector<CUctx_st*> t_ctx_stack;

CUctx_st* current_ctx() { return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back(); }

// Caller holds state().mu.
const Alloc* find_alloc_locked(uintptr_t p) {
  auto& a = state().allocs;
  auto it = a.upper_bound(p);
  if (it == a.begin()) return nullptr;
  --it;
  const Alloc& al = it->second;
  if (p >= al.base && p < al.base + std::max<size_t>(al.size, 1)) return &al;
  return nullptr;
}

bool in_simulated_space_locked(uintptr_t p) {
  State& s = state();
  if (s.va.contains(p)) return true;
  for (int d = 0; d < s.device_count; ++d)
    if (s.devices[d].heap.contains(p)) return true;
  return false;
}

bool overlaps_any_locked(uintptr_t p, size_t n) {
  auto& a = state().allocs;
  auto it = a.lower_bound(p + n);
  if (it == a.begin()) return false;
  --it;
  return it->second.base + it->second.size > p;
}

bool device_accessible(const Alloc& a) {
  if (a.kind == Kind::VmmMapped) return a.prot != PROT_NONE;
  return true;  // device, managed, and (under UVA) pinned/registered host memory
}

// Is [p, p+n) inside one allocation that a device can address?
bool device_range_ok(uintptr_t p, size_t n) {
  if (n == 0) return true;
  std::lock_guard lk(state().mu);
  const Alloc* a = find_alloc_locked(p);
  if (!a || !device_accessible(*a)) return false;
  return p + n <= a->base + a->size && p + n > p;
}

// A pointer passed where "host memory" is expected: anything but an invalid
// address inside the simulated device space.
// A real driver keeps DMA-ing to the pages it pinned at registration, so a
// registration whose memory was unmapped is a silent data bug there. Here it
// is a loud one: the registered pages must still be mapped.
void check_registration_still_mapped(const Alloc& a) {
  if (a.kind != Kind::HostRegistered) return;
  uintptr_t b = a.base & ~(kPage - 1), e = round_up(a.base + a.size, kPage);
  if (msync(reinterpret_cast<void*>(b), e - b, MS_ASYNC) != 0 && errno == ENOMEM) {
    std::fprintf(stderr, "simcuda: copy through a host registration [%#lx, %#lx) whose memory was unmapped "
                 "(stale registration)\n", static_cast<unsigned long>(a.base),
                 static_cast<unsigned long>(a.base + a.size));
    std::abort();
  }
}

bool host_range_ok(uintptr_t p, size_t n) {
  if (n == 0) return true;
  if (p == 0) return false;
  std::lock_guard lk(state().mu);
  const Alloc* a = find_alloc_locked(p);
  if (a) check_registration_still_mapped(*a);
  if (a) return p + n <= a->base + a->size;
  return !in_simulated_space_locked(p);
}

// Unified addressing: either kind of memory is fine, but an address inside the
// device space must belong to a live allocation.
bool unified_range_ok(uintptr_t p, size_t n) {
  if (n == 0) return true;
  if (p == 0) return false;
  std::lock_guard lk(state().mu);
  const Alloc* a = find_alloc_locked(p);
  if (a) return device_accessible(*a) && p + n <= a->base + a->size;
  return !in_simulated_space_locked(p);
}

CUresult check_stream(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return CUDA_SUCCESS;
  std::lock_guard lk(state().mu);
  return state().streams.count(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

bool valid_ctx(CUcontext c) {
  if (!c) return false;
  State& s = state();
  for (int d = 0; d < s.device_count; ++d)
    if (c == &s.devices[d].primary) return true;
  std::lock_guard lk(s.mu);
  return s.contexts.count(c) != 0;
}

// A destroyed context's handle is freed memory in the real driver: binding it
// to a thread is a crash there (a segfault on an H100 with driver 580), so it
// is a loud one here.
void abort_if_destroyed(CUcontext c, const char* fn) {
  if (!c) return;
  State& s = state();
  bool gone = false;
  {
    std::lock_guard lk(s.mu);
    gone = s.destroyed.count(c) != 0;
    for (int d = 0; d < s.device_count; ++d)
      if (c == &s.devices[d].primary && s.devices[d].primary_destroyed) gone = true;
  }
  if (!gone) return;
  std::fprintf(stderr, "simcuda: %s of a destroyed context %p (the real driver reads freed memory here)\n", fn,
               static_cast<void*>(c));
  std::abort();
}

// The thread's current context was destroyed by cuCtxDestroy on another
// thread: "ctx will remain current to those threads, and attempting to access
// ctx from those threads will result in the error
// CUDA_ERROR_CONTEXT_IS_DESTROYED" (cuCtxDestroy). Only the handle's value is
// compared: its object is freed.
bool current_ctx_destroyed() {
  CUctx_st* c = current_ctx();
  if (!c) return false;
  std::lock_guard lk(state().mu);
  return state().destroyed.count(c) != 0;
}

#define SIM_REQUIRE_INIT() \
  do { if (!state().initialized.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define SIM_REQUIRE_CTX()                                                \
  do {                                                                   \
    SIM_REQUIRE_INIT();                                                  \
    if (!current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;               \
    if (current_ctx_destroyed()) return CUDA_ERROR_CONTEXT_IS_DESTROYED; \
  } while (0)

// ---------------------------------------------------------------------------
// Device heap
// ---------------------------------------------------------------------------
CUresult heap_alloc(int dev, size_t bytes, Kind kind, unsigned flags, CUmemoryPool pool, CUdeviceptr* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  DeviceState& d = s.devices[dev];
  // One uncommitted guard page after each block: a raw host access past the
  // end faults instead of silently touching a neighbour.
  size_t committed = round_up(bytes, kPage);
  std::lock_guard lk(s.mu);
  if (d.used + committed > d.size) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t p = d.heap.alloc(committed + kPage, kPage);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  if (mprotect(reinterpret_cast<void*>(p), committed, PROT_READ | PROT_WRITE) != 0) {
    d.heap.release(p, committed + kPage);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d.used += committed;
  Alloc a;
  a.base = p;
  a.size = bytes;
  a.committed = committed;
  a.kind = kind;
  a.device = dev;
  a.flags = flags;
  a.id = s.next_id++;
  a.ctx = current_ctx();
  a.pool = pool;
  s.allocs[p] = a;
  *out = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

// Caller holds the lock. Returns the memory to the heap and decommits it.
void heap_release_locked(const Alloc& a) {
  DeviceState& d = state().devices[a.device];
  void* p = reinterpret_cast<void*>(a.base);
  madvise(p, a.committed, MADV_DONTNEED);  // fresh allocations read as zero
  mprotect(p, a.committed, PROT_NONE);      // use after free faults
  d.heap.release(a.base, a.committed + kPage);
  d.used -= a.committed;
}

CUresult heap_free(CUdeviceptr dptr) {
  State& s = state();
  std::lock_guard lk(s.mu);
  auto it = s.allocs.find(static_cast<uintptr_t>(dptr));
  if (it == s.allocs.end() || (it->second.kind != Kind::Device && it->second.kind != Kind::Managed))
    return CUDA_ERROR_INVALID_VALUE;
  heap_release_locked(it->second);
  s.allocs.erase(it);
  return CUDA_SUCCESS;
}

int current_device() {
  CUctx_st* c = current_ctx();
  return c ? c->device : 0;
}

// ---------------------------------------------------------------------------
// Copies
// ---------------------------------------------------------------------------
CUresult copy_linear(uintptr_t dst, uintptr_t src, size_t n) {
  if (n) std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}

// SIMCUDA_PAGEABLE_US_PER_MIB (default 0, at most 1000000): a host<->device
// copy whose host side is pageable (neither cuMemHostAlloc'd nor registered)
// sleeps this many microseconds per MiB, so that pageable copies are slower
// than pinned ones by a set margin, as on real hardware, instead of by
// whatever memmove's cache luck gives (tests whose findings need a pageable
// copy to be slower than the pinned reference, docs/simcuda.md).
int env_int(const char* name, int dflt, int lo, int hi);
void pageable_delay(uintptr_t host, size_t n) {
  static const int us_per_mib = env_int("SIMCUDA_PAGEABLE_US_PER_MIB", 0, 0, 1000000);
  if (us_per_mib <= 0 || n == 0) return;
  {
    std::lock_guard lk(state().mu);
    const Alloc* a = find_alloc_locked(host);
    if (a && (a->kind == Kind::HostPinned || a->kind == Kind::HostRegistered)) return;
  }
  const uint64_t us = static_cast<uint64_t>(us_per_mib) * n / (1u << 20);
  if (us) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

CUresult htod(CUdeviceptr dst, const void* src, size_t n) {
  SIM_REQUIRE_CTX();
  if (!device_range_ok(dst, n) || !host_range_ok(reinterpret_cast<uintptr_t>(src), n))
    return CUDA_ERROR_INVALID_VALUE;
  pageable_delay(reinterpret_cast<uintptr_t>(src), n);
  return copy_linear(dst, reinterpret_cast<uintptr_t>(src), n);
}
CUresult dtoh(void* dst, CUdeviceptr src, size_t n) {
  SIM_REQUIRE_CTX();
  if (!device_range_ok(src, n) || !host_range_ok(reinterpret_cast<uintptr_t>(dst), n))
    return CUDA_ERROR_INVALID_VALUE;
  pageable_delay(reinterpret_cast<uintptr_t>(dst), n);
  return copy_linear(reinterpret_cast<uintptr_t>(dst), src, n);
}
CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_REQUIRE_CTX();
  if (!device_range_ok(dst, n) || !device_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
  return copy_linear(dst, src, n);
}
CUresult unified(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_REQUIRE_CTX();
  if (!unified_range_ok(dst, n) || !unified_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
  return copy_linear(dst, src, n);
}
CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
  SIM_REQUIRE_CTX();
  if (!valid_ctx(dctx) || !valid_ctx(sctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!device_range_ok(dst, n) || !device_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
  return copy_linear(dst, src, n);
}

template <typename F>
CUresult on_stream(CUstream s, F&& f) {
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  return f();
}

// One side of a 2D/3D copy, normalised.
struct Side {
  CUmemorytype type;
  uintptr_t ptr;  // host or device base
  size_t x, y, z, pitch, height;
};

CUresult copy_3d(const Side& src, const Side& dst, size_t width, size_t height, size_t depth) {
  SIM_REQUIRE_CTX();
  if (src.type == CU_MEMORYTYPE_ARRAY || dst.type == CU_MEMORYTYPE_ARRAY)
    return CUDA_ERROR_NOT_SUPPORTED;  // CUDA arrays are not simulated
  if (width == 0 || height == 0 || depth == 0) return CUDA_SUCCESS;
  for (const Side* s : {&src, &dst}) {
    if (s->pitch < s->x + width) return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 && s->height < s->y + height) return CUDA_ERROR_INVALID_VALUE;
    size_t slice = s->pitch * (depth > 1 ? s->height : 0);
    uintptr_t first = s->ptr + s->z * slice + s->y * s->pitch + s->x;
    uintptr_t last = s->ptr + (s->z + depth - 1) * slice + (s->y + height - 1) * s->pitch + s->x + width;
    size_t span = last - first;
    bool ok = false;
    switch (s->type) {
      case CU_MEMORYTYPE_HOST: ok = host_range_ok(first, span); break;
      case CU_MEMORYTYPE_DEVICE: ok = device_range_ok(first, span); break;
      case CU_MEMORYTYPE_UNIFIED: ok = unified_range_ok(first, span); break;
      default: ok = false;
    }
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
  }
  size_t sslice = src.pitch * src.height, dslice = dst.pitch * dst.height;
  for (size_t z = 0; z < depth; ++z)
    for (size_t y = 0; y < height; ++y) {
      uintptr_t s = src.ptr + (src.z + z) * sslice + (src.y + y) * src.pitch + src.x;
      uintptr_t d = dst.ptr + (dst.z + z) * dslice + (dst.y + y) * dst.pitch + dst.x;
      std::memmove(reinterpret_cast<void*>(d), reinterpret_cast<const void*>(s), width);
    }
  return CUDA_SUCCESS;
}

uintptr_t side_ptr(CUmemorytype t, const void* host, CUdeviceptr dev) {
  return t == CU_MEMORYTYPE_HOST ? reinterpret_cast<uintptr_t>(host) : static_cast<uintptr_t>(dev);
}

CUresult copy_2d(const CUDA_MEMCPY2D* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Side s{p->srcMemoryType, side_ptr(p->srcMemoryType, p->srcHost, p->srcDevice), p->srcXInBytes, p->srcY, 0,
         p->srcPitch, 0};
  Side d{p->dstMemoryType, side_ptr(p->dstMemoryType, p->dstHost, p->dstDevice), p->dstXInBytes, p->dstY, 0,
         p->dstPitch, 0};
  return copy_3d(s, d, p->WidthInBytes, p->Height, 1);
}

CUresult copy_3d_desc(const CUDA_MEMCPY3D* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Side s{p->srcMemoryType, side_ptr(p->srcMemoryType, p->srcHost, p->srcDevice), p->srcXInBytes, p->srcY, p->srcZ,
         p->srcPitch, p->srcHeight};
  Side d{p->dstMemoryType, side_ptr(p->dstMemoryType, p->dstHost, p->dstDevice), p->dstXInBytes, p->dstY, p->dstZ,
         p->dstPitch, p->dstHeight};
  return copy_3d(s, d, p->WidthInBytes, p->Height, p->Depth);
}

CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if ((p->srcContext && !valid_ctx(p->srcContext)) || (p->dstContext && !valid_ctx(p->dstContext)))
    return CUDA_ERROR_INVALID_CONTEXT;
  Side s{p->srcMemoryType, side_ptr(p->srcMemoryType, p->srcHost, p->srcDevice), p->srcXInBytes, p->srcY, p->srcZ,
         p->srcPitch, p->srcHeight};
  Side d{p->dstMemoryType, side_ptr(p->dstMemoryType, p->dstHost, p->dstDevice), p->dstXInBytes, p->dstY, p->dstZ,
         p->dstPitch, p->dstHeight};
  return copy_3d(s, d, p->WidthInBytes, p->Height, p->Depth);
}

CUresult batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, size_t numAttrs,
               size_t* failIdx, CUstream stream) {
  if (failIdx) *failIdx = SIZE_MAX;
  SIM_REQUIRE_CTX();
  if (!dsts || !srcs || !sizes || count == 0 || numAttrs > count) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_stream(stream); r != CUDA_SUCCESS) return r;
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return CUDA_ERROR_INVALID_VALUE;  // as documented
  for (size_t i = 0; i < count; ++i) {
    if (!unified_range_ok(dsts[i], sizes[i]) || !unified_range_ok(srcs[i], sizes[i])) {
      if (failIdx) *failIdx = i;
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (size_t i = 0; i < count; ++i) copy_linear(dsts[i], srcs[i], sizes[i]);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Memsets
// ---------------------------------------------------------------------------
template <typename T>
CUresult memset_2d(CUdeviceptr dst, size_t pitch, T value, size_t width, size_t height) {
  SIM_REQUIRE_CTX();
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (dst % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  size_t row = width * sizeof(T);
  if (height > 1 && pitch < row) return CUDA_ERROR_INVALID_VALUE;
  size_t span = (height - 1) * pitch + row;
  if (!device_range_ok(dst, span)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t y = 0; y < height; ++y) {
    T* p = reinterpret_cast<T*>(dst + y * pitch);
    if constexpr (sizeof(T) == 1)
      std::memset(p, value, width);
    else
      std::fill(p, p + width, value);
  }
  return CUDA_SUCCESS;
}
template <typename T>
CUresult memset_1d(CUdeviceptr dst, T value, size_t n) {
  return memset_2d<T>(dst, n * sizeof(T), value, n, 1);
}

// ---------------------------------------------------------------------------
// Pointer attributes
// ---------------------------------------------------------------------------
// Fills one attribute. `known` is the allocation (copied out under the lock)
// or nothing for memory the simulation does not know.
CUresult pointer_attribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr, const std::optional<Alloc>& known,
                           bool plural) {
  const bool host_kind = known && (known->kind == Kind::HostPinned || known->kind == Kind::HostRegistered);
  if (!known) {
    // cuPointerGetAttribute fails on memory CUDA does not know; the plural
    // form succeeds with "null" values (see the cuPointerGetAttributes docs).
    if (!plural) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
      case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = nullptr; break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_HOST_POINTER: *static_cast<void**>(data) = nullptr; break;
      case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      case CU_POINTER_ATTRIBUTE_MAPPED:
      case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *static_cast<int*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = -2; break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *static_cast<CUdeviceptr*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *static_cast<size_t*>(data) = 0; break;
      case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *static_cast<CUmemoryPool*>(data) = nullptr; break;
      case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *static_cast<unsigned*>(data) = 0; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  }
  const Alloc& a = *known;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = a.ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      // Managed memory reports DEVICE; IS_MANAGED tells it apart.
      *static_cast<unsigned*>(data) = host_kind ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!device_accessible(a)) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<CUdeviceptr*>(data) = ptr;  // unified addressing: same value
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!(host_kind || a.kind == Kind::Managed)) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = a.id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data) = a.kind == Kind::Managed; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = a.device; break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *static_cast<int*>(data) = a.kind == Kind::Device; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = a.kind == Kind::VmmMapped ? a.range_base : a.base;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = a.kind == Kind::VmmMapped ? a.range_size : a.size;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: *static_cast<CUdeviceptr*>(data) = a.base; break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: *static_cast<size_t*>(data) = a.size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<int*>(data) = 1; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *static_cast<CUmemoryPool*>(data) = a.pool; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *static_cast<unsigned*>(data) = a.prot == PROT_NONE   ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE
                                      : a.prot == PROT_READ ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                                                            : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

std::optional<Alloc> lookup(CUdeviceptr ptr) {
  std::lock_guard lk(state().mu);
  const Alloc* a = find_alloc_locked(static_cast<uintptr_t>(ptr));
  if (!a) return std::nullopt;
  return *a;
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------
struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// ---------------------------------------------------------------------------
// Initialisation
// ---------------------------------------------------------------------------
int env_int(const char* name, int dflt, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end || x < lo || x > hi) {
    std::fprintf(stderr, "simcuda: ignoring %s=%s (want %d..%d)\n", name, v, lo, hi);
    return dflt;
  }
  return static_cast<int>(x);
}

// SIMCUDA_LIVE_REPORT=FILE: a line is appended to FILE after every context
// destruction (cuCtxDestroy, a primary context's reset or last release) and
// at exit, "<when> events=<E> host_allocations=<H> contexts=<C>": the events
// and pinned host allocations (cuMemHostAlloc) alive then, and the contexts
// made with cuCtxCreate not yet destroyed. Whatever a destroyed context had
// is not counted: the driver freed it. A test reads whether they grow.
const char* live_report_path() {
  static const char* path = [] {
    const char* v = std::getenv("SIMCUDA_LIVE_REPORT");
    return v && *v ? v : nullptr;
  }();
  return path;
}

void live_report(const char* when) {
  const char* path = live_report_path();
  if (!path) return;
  size_t events = 0, host = 0, contexts = 0;
  {
    State& s = state();
    std::lock_guard lk(s.mu);
    events = s.events.size();
    contexts = s.contexts.size();
    for (const auto& [base, a] : s.allocs) host += a.kind == Kind::HostPinned;
  }
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s events=%zu host_allocations=%zu contexts=%zu\n", when, events, host, contexts);
    std::fclose(f);
  }
}

CUresult do_init() {
  State& s = state();
  std::lock_guard lk(s.mu);
  if (s.initialized.load()) return CUDA_SUCCESS;
  s.device_count = env_int("SIMCUDA_DEVICE_COUNT", 1, 0, kMaxDevices);
  if (s.device_count == 0) return CUDA_ERROR_NO_DEVICE;
  s.device_mem = static_cast<size_t>(env_int("SIMCUDA_DEVICE_MEM_MB", 4096, 64, 1 << 20)) << 20;
  const size_t va_size = s.device_mem;  // room for cuMemAddressReserve
  // Each device heap carries one guard page per block, so reserve some slack.
  const size_t per_dev = s.device_mem + (s.device_mem / 8);
  const size_t total = per_dev * s.device_count + va_size;
  void* base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    std::fprintf(stderr, "simcuda: cannot reserve %zu bytes of simulated device memory: %s\n", total,
                 std::strerror(errno));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(base);
  for (int d = 0; d < s.device_count; ++d) {
    DeviceState& ds = s.devices[d];
    ds.base = p;
    ds.size = s.device_mem;
    ds.heap.init(p, per_dev);
    ds.primary.device = d;
    ds.primary.primary = true;
    ds.default_pool.device = d;
    p += per_dev;
  }
  s.va.init(p, va_size);
  s.initialized.store(true, std::memory_order_release);
  if (live_report_path()) std::atexit([] { live_report("exit"); });
  return CUDA_SUCCESS;
}

bool valid_device(CUdevice d) { return d >= 0 && d < state().device_count; }

// Frees every allocation a context owns (context destruction, primary reset).
void release_ctx_resources(CUctx_st* c) {
  State& s = state();
  std::lock_guard lk(s.mu);
  for (auto it = s.allocs.begin(); it != s.allocs.end();) {
    const Alloc& a = it->second;
    if (a.ctx != c || a.kind == Kind::VmmMapped) {
      ++it;
      continue;
    }
    if (a.kind == Kind::Device || a.kind == Kind::Managed) heap_release_locked(a);
    if (a.kind == Kind::HostPinned) munmap(reinterpret_cast<void*>(a.base), round_up(a.size, kPage));
    it = s.allocs.erase(it);
  }
  for (auto it = s.events.begin(); it != s.events.end();) {
    if ((*it)->ctx != c) {
      ++it;
      continue;
    }
    s.dead_events.insert(*it);
    it = s.events.erase(it);
  }
}

// An event of a destroyed context is freed memory in the real driver: any
// use of it (destroy included) reads freed memory there, so it is a loud
// crash here. The shim drops such events without touching them.
void abort_if_dead_event(CUevent e, const char* fn) {
  bool dead = false;
  {
    std::lock_guard lk(state().mu);
    dead = e && state().dead_events.count(e) != 0;
  }
  if (!dead) return;
  std::fprintf(stderr,
               "simcuda: %s of an event %p whose context was destroyed (undefined in the real driver: a crash "
               "there, or error 709)\n",
               fn, static_cast<void*>(e));
  std::abort();
}

// cuGetProcAddress table, defined after the API functions below.
struct ProcEntry {
  const char* name;
  int version;  // lowest cudaVersion this variant answers
  void* fn;
  void* ptds;   // per-thread-default-stream variant, or null
};
CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status);

// cuMemHostRegister/cuMemHostUnregister hold this for their whole call (the
// real driver serialises them process-wide: an unregister waits for another
// thread's registration of a different range to finish).
std::mutex& host_register_mutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: apps call us from atexit handlers
  return *m;
}

// SIMCUDA_REGISTER_US_PER_MIB (default 0, at most 1000000): cuMemHostRegister
// sleeps this many microseconds per MiB registered, to stand for the ~47 ms/GiB
// the H200 takes to pin touched memory (docs/simcuda.md).
void pin_delay(size_t bytes) {
  static const int us_per_mib = env_int("SIMCUDA_REGISTER_US_PER_MIB", 0, 0, 1000000);
  if (us_per_mib <= 0) return;
  const uint64_t us = static_cast<uint64_t>(us_per_mib) * bytes / (1u << 20);
  if (us) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

}  // namespace

// ===========================================================================
// Exported API
// ===========================================================================
extern "C" {

__attribute__((visibility("default"))) int simcuda_is_simulated(void) { return 1; }

// Test introspection: is `p` inside a host range registered with cuMemHostRegister?
__attribute__((visibility("default"))) int simcuda_is_host_registered(const void* p) {
  std::lock_guard lk(state().mu);
  const Alloc* a = find_alloc_locked(reinterpret_cast<uintptr_t>(p));
  return a && a->kind == Kind::HostRegistered;
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return do_init();
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& e : kErrors)
    if (e.code == error) {
      *pStr = e.name;
      return CUDA_SUCCESS;
    }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& e : kErrors)
    if (e.code == error) {
      *pStr = e.text;
      return CUDA_SUCCESS;
    }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetExportTable(const void** ppExportTable, const CUuuid*) {
  if (ppExportTable) *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;  // private NVIDIA interfaces are not simulated
}

// --- devices ---------------------------------------------------------------
CUresult CUDAAPI cuDeviceGetCount(int* count) {
  SIM_REQUIRE_INIT();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = state().device_count;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  SIM_REQUIRE_INIT();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "simcuda simulated GPU %d", dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, "simcuda", 7);
  uuid->bytes[15] = static_cast<char>(dev);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = state().device_mem;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  // Plausible values for an H200-like part. Anything not listed reads 0.
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *pi = 0; break;  // as measured (FACTS.md)
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *pi = static_cast<int>(kPitchAlignment); break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x10 + dev; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *pi = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = 6144; break;
    default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  SIM_REQUIRE_INIT();
  if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev) || !valid_device(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = dev != peerDev;
  return CUDA_SUCCESS;
}

// --- contexts ----------------------------------------------------------------
// The primary context's reference counting, shared with green contexts
// (each holds a reference, taken and given back inside the driver: no hook
// sees those calls).
static CUcontext primary_retain(CUdevice dev) {
  std::lock_guard lk(state().mu);
  state().devices[dev].primary_refs++;
  state().devices[dev].primary_destroyed = false;
  return &state().devices[dev].primary;
}
static CUresult primary_release(CUdevice dev) {
  {
    std::lock_guard lk(state().mu);
    DeviceState& d = state().devices[dev];
    if (d.primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d.primary_refs > 0) return CUDA_SUCCESS;
    d.primary_destroyed = true;
  }
  release_ctx_resources(&state().devices[dev].primary);
  live_report("primary_release");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = primary_retain(dev);
  return CUDA_SUCCESS;
}

// As documented: "The context is automatically reset once the last reference
// to it is released", freeing every allocation, pinned buffer and registration
// made in it (the runtime never releases its reference; driver apps do).
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return primary_release(dev);
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* c = &state().devices[dev].primary;
  release_ctx_resources(c);
  {
    std::lock_guard lk(state().mu);
    state().devices[dev].primary_refs = 0;
  }
  live_report("primary_reset");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  SIM_REQUIRE_INIT();
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lk(state().mu);
  *flags = state().devices[dev].primary_flags;
  *active = state().devices[dev].primary_refs > 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lk(state().mu);
  state().devices[dev].primary_flags = flags;
  return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext* pctx, unsigned flags, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* c = new CUctx_st();
  c->device = dev;
  c->flags = flags;
  {
    std::lock_guard lk(state().mu);
    state().contexts.insert(c);
    state().destroyed.erase(c);
  }
  t_ctx_stack.push_back(c);  // a new context becomes current
  *pctx = c;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}
CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) { return ctx_create(pctx, flags, dev); }
CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) { return ctx_create(pctx, flags, dev); }

// Not cuCtxDestroy_v2 itself for cuCtxDetach: a call between the library's
// exported functions goes through its PLT, where the shim's hook would see a
// destroy that the real driver's cuCtxDetach never shows.
static CUresult ctx_destroy(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  {
    std::lock_guard lk(state().mu);
    if (!ctx || !state().contexts.count(ctx)) return CUDA_ERROR_INVALID_VALUE;
    state().contexts.erase(ctx);
    state().destroyed.insert(ctx);
  }
  release_ctx_resources(ctx);
  std::erase(t_ctx_stack, ctx);
  delete ctx;
  live_report("ctx_destroy");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }

// The deprecated usage count PyCUDA still ends its contexts with: cuCtxAttach
// adds a reference to the current context, cuCtxDetach drops one from a
// context that "must be current to the calling thread" and destroys it at
// zero (popped, as cuCtxDestroy pops it).
CUresult CUDAAPI cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  SIM_REQUIRE_CTX();
  if (!pctx || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* c = current_ctx();
  std::lock_guard lk(state().mu);
  if (!state().contexts.count(c)) return CUDA_ERROR_INVALID_CONTEXT;  // a primary context: not attachable
  ++c->usage;
  *pctx = c;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxDetach(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  {
    std::lock_guard lk(state().mu);
    if (!ctx || !state().contexts.count(ctx) || current_ctx() != ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (--ctx->usage > 0) return CUDA_SUCCESS;
  }
  return ctx_destroy(ctx);
}

// Green contexts (CUDA 12.4+): a partition of the device's SMs. The app
// converts one to a CUcontext (cuCtxFromGreenCtx) to make it current;
// cuGreenCtxDestroy destroys that context's handle, events and streams with
// it (not through the exported cuCtxDestroy: ctx_destroy), while the memory
// made in it, the primary context's, stays.
// The resource calls only hand back what a real device would: every SM.
struct CUgreenCtx_st {
  uint32_t magic = 0x47524e43;  // "GRNC"
  CUdevice device = 0;
  CUctx_st* ctx = nullptr;  // made by the first cuCtxFromGreenCtx
};
struct CUdevResourceDesc_st {
  CUdevResource resource{};
};
CUresult CUDAAPI cuDeviceGetDevResource(CUdevice device, CUdevResource* resource, CUdevResourceType type) {
  SIM_REQUIRE_INIT();
  if (!resource || type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(resource, 0, sizeof(*resource));
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->sm.smCount = 132;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc* phDesc, CUdevResource* resources, unsigned int n) {
  SIM_REQUIRE_INIT();
  if (!phDesc || !resources || n != 1) return CUDA_ERROR_INVALID_VALUE;
  auto* d = new CUdevResourceDesc_st();
  d->resource = resources[0];
  *phDesc = d;  // kept for the process, as the driver keeps it
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  SIM_REQUIRE_INIT();
  if (!phCtx || !desc || !(flags & CU_GREEN_CTX_DEFAULT_STREAM)) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* g = new CUgreenCtx_st();
  g->device = dev;
  primary_retain(dev);  // a green context holds its device's primary context
  *phCtx = g;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
  SIM_REQUIRE_INIT();
  if (!pContext || !hCtx || hCtx->magic != 0x47524e43) return CUDA_ERROR_INVALID_VALUE;
  if (!hCtx->ctx) {
    auto* c = new CUctx_st();  // not made current: the app sets it
    c->device = hCtx->device;
    std::lock_guard lk(state().mu);
    state().contexts.insert(c);
    state().destroyed.erase(c);
    hCtx->ctx = c;
  }
  *pContext = hCtx->ctx;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx hCtx) {
  SIM_REQUIRE_INIT();
  if (!hCtx || hCtx->magic != 0x47524e43) return CUDA_ERROR_INVALID_CONTEXT;
  CUctx_st* c = hCtx->ctx;
  const CUdevice dev = hCtx->device;
  hCtx->magic = 0;
  delete hCtx;
  CUresult r = CUDA_SUCCESS;
  if (c) {
    {
      // The converted context is the primary context with the green one's SMs:
      // the memory made in it is the primary context's, and stays while that does.
      std::lock_guard lk(state().mu);
      for (auto& [base, a] : state().allocs)
        if (a.ctx == c) a.ctx = &state().devices[dev].primary;
    }
    r = ctx_destroy(c);
  }
  // "Destroys the green context, releasing the primary context of the device
  // that this green context was created for": its last reference resets it.
  // (After a reset of the primary context nothing is left to release.)
  primary_release(dev);
  return r;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  SIM_REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current_ctx();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  abort_if_destroyed(ctx, "cuCtxSetCurrent");
  if (ctx && !valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx == nullptr) {
    if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (t_ctx_stack.empty())
    t_ctx_stack.push_back(ctx);
  else
    t_ctx_stack.back() = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_REQUIRE_INIT();
  abort_if_destroyed(ctx, "cuCtxPushCurrent");
  if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  SIM_REQUIRE_INIT();
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = t_ctx_stack.back();
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) { return cuCtxPopCurrent_v2(pctx); }

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  SIM_REQUIRE_CTX();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = current_ctx()->device;
  return CUDA_SUCCESS;
}

// SIMCUDA_EVENTS_PENDING=1 (default 0): work stands for DMA still in flight
// until something waits for it. A recorded event stays pending (cuEventQuery
// answers CUDA_ERROR_NOT_READY) until cuEventSynchronize of it, cuStreamSynchronize
// of its stream (of the legacy stream: every stream's), or cuCtxSynchronize.
// The work itself still runs at once; only the events say otherwise.
static bool events_pending() {
  static const bool on = env_int("SIMCUDA_EVENTS_PENDING", 0, 0, 1) != 0;
  return on;
}
// The events recorded on `s` are complete; `all`: every event of the current
// context (a context or legacy-stream synchronisation waits for that
// context's work only; other contexts' events stay pending).
static void events_waited(CUstream s, bool all) {
  if (!events_pending()) return;
  CUctx_st* const ctx = current_ctx();
  std::lock_guard lk(state().mu);
  for (CUevent e : state().events)
    if (all ? e->ctx == ctx : e->stream == s) e->pending = false;
}

// "Blocks until the current context has completed all preceding requested
// tasks": no current context is CUDA_ERROR_INVALID_CONTEXT, and only the
// current context's events complete.
CUresult CUDAAPI cuCtxSynchronize(void) {
  SIM_REQUIRE_CTX();
  events_waited(nullptr, true);
  return CUDA_SUCCESS;  // all work already ran synchronously
}

// No profiler listens: the calls need a context and do nothing else.
CUresult CUDAAPI cuProfilerStart(void) {
  SIM_REQUIRE_CTX();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuProfilerStop(void) {
  SIM_REQUIRE_CTX();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  SIM_REQUIRE_CTX();
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_ctx(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

// --- streams -----------------------------------------------------------------
CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  SIM_REQUIRE_CTX();
  if (!phStream || (flags & ~CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  auto* s = new CUstream_st();
  s->ctx = current_ctx();
  s->flags = flags;
  s->priority = priority;
  std::lock_guard lk(state().mu);
  state().streams.insert(s);
  *phStream = s;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  SIM_REQUIRE_INIT();
  std::lock_guard lk(state().mu);
  if (!hStream || !state().streams.erase(hStream)) return CUDA_ERROR_INVALID_HANDLE;
  delete hStream;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

static CUresult stream_sync(CUstream s) {
  SIM_REQUIRE_CTX();
  return check_stream(s);
}
// Fault injection: SIMCUDA_FAIL_STREAM_SYNC=N, the same for the N-th
// cuStreamSynchronize and every later one (0: never).
static CUresult stream_wait(CUstream s) {
  static const int fail_from = env_int("SIMCUDA_FAIL_STREAM_SYNC", 0, 0, 1 << 30);
  static std::atomic<int> calls{0};
  const CUresult r = stream_sync(s);
  if (r == CUDA_SUCCESS && fail_from > 0 && calls.fetch_add(1) + 1 >= fail_from) return CUDA_ERROR_LAUNCH_FAILED;
  if (r == CUDA_SUCCESS) events_waited(s, !s || s == CU_STREAM_LEGACY);
  return r;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) { return stream_wait(hStream); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { return stream_wait(hStream); }
CUresult CUDAAPI cuStreamQuery(CUstream hStream) { return stream_sync(hStream); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { return stream_sync(hStream); }

static CUresult stream_wait_event(CUstream s, CUevent e) {
  SIM_REQUIRE_CTX();
  abort_if_dead_event(e, "cuStreamWaitEvent");
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  std::lock_guard lk(state().mu);
  return e && state().events.count(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int) {
  return stream_wait_event(hStream, hEvent);
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int) {
  return stream_wait_event(hStream, hEvent);
}

static CUresult stream_get_flags(CUstream s, unsigned* flags) {
  SIM_REQUIRE_CTX();
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  *flags = (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) ? s->flags : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) { return stream_get_flags(hStream, flags); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  return stream_get_flags(hStream, flags);
}

// Host functions run at once: every earlier operation on the stream is done.
static CUresult launch_host_func(CUstream s, CUhostFn fn, void* user) {
  SIM_REQUIRE_CTX();
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  fn(user);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  return launch_host_func(hStream, fn, userData);
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  return launch_host_func(hStream, fn, userData);
}

static CUresult add_callback(CUstream s, CUstreamCallback cb, void* user, unsigned flags) {
  SIM_REQUIRE_CTX();
  if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  cb(s, CUDA_SUCCESS, user);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamAddCallback(CUstream s, CUstreamCallback cb, void* user, unsigned int flags) {
  return add_callback(s, cb, user, flags);
}
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void* user, unsigned int flags) {
  return add_callback(s, cb, user, flags);
}

// --- events --------------------------------------------------------------------
CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  SIM_REQUIRE_CTX();
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUevent_st();
  e->flags = Flags;
  e->ctx = current_ctx();
  std::lock_guard lk(state().mu);
  state().events.insert(e);
  *phEvent = e;
  return CUDA_SUCCESS;
}

// "event and stream must be on the same CUDA context" (cudaEventRecord): an
// event of another context is CUDA_ERROR_INVALID_HANDLE, as the real driver
// answers. The default streams are the current context's.
// Fault injection: SIMCUDA_FAIL_EVENT_RECORD=N makes the N-th cuEventRecord
// of the process and every later one return CUDA_ERROR_LAUNCH_FAILED, as a
// context broken by an earlier fault answers (0: never).
static CUresult event_record(CUevent e, CUstream s) {
  SIM_REQUIRE_CTX();
  abort_if_dead_event(e, "cuEventRecord");
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  static const int fail_from = env_int("SIMCUDA_FAIL_EVENT_RECORD", 0, 0, 1 << 30);
  static std::atomic<int> calls{0};
  if (fail_from > 0 && calls.fetch_add(1) + 1 >= fail_from) return CUDA_ERROR_LAUNCH_FAILED;
  std::lock_guard lk(state().mu);
  if (!e || !state().events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  const bool default_stream = !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
  if (e->ctx != (default_stream ? current_ctx() : s->ctx)) return CUDA_ERROR_INVALID_HANDLE;
  e->recorded = true;
  e->time_ns = now_ns();
  e->pending = events_pending();
  e->stream = s;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int) {
  return event_record(hEvent, hStream);
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int) {
  return event_record(hEvent, hStream);
}

static CUresult event_check(CUevent e, const char* fn) {
  SIM_REQUIRE_INIT();
  abort_if_dead_event(e, fn);
  std::lock_guard lk(state().mu);
  return e && state().events.count(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
// A wait for the event: it is complete from then on.
static CUresult event_wait(CUevent e) {
  const CUresult r = event_check(e, "cuEventSynchronize");
  if (r == CUDA_SUCCESS && events_pending()) {
    std::lock_guard lk(state().mu);
    e->pending = false;
  }
  return r;
}
// Fault injection: SIMCUDA_FAIL_EVENT_SYNC=N makes the N-th cuEventSynchronize
// of the process and every later one return CUDA_ERROR_LAUNCH_FAILED, as a
// DMA that failed reports itself to whoever waits for it (0: never).
CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  static const int fail_from = env_int("SIMCUDA_FAIL_EVENT_SYNC", 0, 0, 1 << 30);
  static std::atomic<int> calls{0};
  const CUresult r = event_wait(hEvent);
  if (r == CUDA_SUCCESS && fail_from > 0 && calls.fetch_add(1) + 1 >= fail_from) return CUDA_ERROR_LAUNCH_FAILED;
  return r;
}
CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  const CUresult r = event_check(hEvent, "cuEventQuery");
  if (r != CUDA_SUCCESS || !events_pending()) return r;
  std::lock_guard lk(state().mu);
  return hEvent->pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_REQUIRE_INIT();
  if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
  abort_if_dead_event(hStart, "cuEventElapsedTime");
  abort_if_dead_event(hEnd, "cuEventElapsedTime");
  std::lock_guard lk(state().mu);
  auto& ev = state().events;
  if (!hStart || !hEnd || !ev.count(hStart) || !ev.count(hEnd)) return CUDA_ERROR_INVALID_HANDLE;
  if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!hStart->recorded || !hEnd->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *pMilliseconds = static_cast<float>(static_cast<double>(static_cast<int64_t>(hEnd->time_ns - hStart->time_ns)) / 1e6);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

// SIMCUDA_EVENT_DESTROY_DELAY_US=N (default 0) makes cuEventDestroy sleep N
// microseconds at its entry, before it reads anything: the caller as if
// descheduled just before the call. A context destroyed meanwhile by another
// thread went before the call, and the destroy is then of a dead event (an
// abort): it widens the window in which a caller's "its context lives" can go
// stale before the driver sees the event (e2e.rewrite.zero_copy_event_race).
static void event_destroy_delay() {
  static const int us = env_int("SIMCUDA_EVENT_DESTROY_DELAY_US", 0, 0, 10000000);
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  SIM_REQUIRE_INIT();
  event_destroy_delay();
  std::unique_lock lk(state().mu);
  // Dead or not decided under the one lock a context's destruction takes too:
  // a destroy that lands after the context went is always caught.
  if (hEvent && state().dead_events.count(hEvent)) {
    lk.unlock();
    abort_if_dead_event(hEvent, "cuEventDestroy");
  }
  if (!hEvent || !state().events.erase(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
  delete hEvent;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

// --- device memory ---------------------------------------------------------------
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  SIM_REQUIRE_CTX();
  return heap_alloc(current_device(), bytesize, Kind::Device, 0, nullptr, dptr);
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  // The 32-bit legacy entry point: only answers when the address fits.
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, bytesize);
  if (r != CUDA_SUCCESS) return r;
  if (p > 0xffffffffu) {
    heap_free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  SIM_REQUIRE_CTX();
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = round_up(WidthInBytes, kPitchAlignment);
  CUresult r = heap_alloc(current_device(), pitch * Height, Kind::Device, 0, nullptr, dptr);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  SIM_REQUIRE_INIT();
  if (dptr == 0) return CUDA_SUCCESS;
  return heap_free(dptr);
}
CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  SIM_REQUIRE_CTX();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return heap_alloc(current_device(), bytesize, Kind::Managed, flags, nullptr, dptr);
}

static CUresult alloc_async(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  SIM_REQUIRE_CTX();
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  int dev = current_device();
  if (pool) {
    std::lock_guard lk(state().mu);
    bool is_default = false;
    for (int d = 0; d < state().device_count; ++d)
      if (pool == &state().devices[d].default_pool) is_default = true, dev = d;
    if (!is_default) {
      if (!state().pools.count(pool)) return CUDA_ERROR_INVALID_VALUE;
      dev = pool->device;
    }
  } else {
    pool = &state().devices[dev].default_pool;
  }
  return heap_alloc(dev, bytes, Kind::Device, 0, pool, dptr);
}
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, nullptr, hStream);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return alloc_async(dptr, bytesize, nullptr, hStream);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytesize, pool, hStream);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytesize, pool, hStream);
}
static CUresult free_async(CUdeviceptr dptr, CUstream s) {
  SIM_REQUIRE_CTX();
  if (CUresult r = check_stream(s); r != CUDA_SUCCESS) return r;
  return heap_free(dptr);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream); }

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  SIM_REQUIRE_INIT();
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool_out = &state().devices[dev].default_pool;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  SIM_REQUIRE_INIT();
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(props->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  auto* p = new CUmemPoolHandle_st();
  p->device = props->location.id;
  std::lock_guard lk(state().mu);
  state().pools.insert(p);
  *pool = p;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  SIM_REQUIRE_INIT();
  std::lock_guard lk(state().mu);
  if (!pool || !state().pools.erase(pool)) return CUDA_ERROR_INVALID_VALUE;
  delete pool;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  SIM_REQUIRE_CTX();
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lk(state().mu);
  const DeviceState& d = state().devices[current_device()];
  *total = d.size;
  *free = d.size - std::min(d.size, d.used);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  SIM_REQUIRE_CTX();
  auto a = lookup(dptr);
  if (!a || a->kind == Kind::HostPinned || a->kind == Kind::HostRegistered) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = a->base;
  if (psize) *psize = a->size;
  return CUDA_SUCCESS;
}

// --- host memory ---------------------------------------------------------------------
CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  SIM_REQUIRE_CTX();
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (Flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  // Pinned memory is ordinary host memory from its own mapping: the pointer
  // is outside the device space and only the table says it is pinned.
  void* p = mmap(nullptr, round_up(bytesize, kPage), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Alloc a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = bytesize;
  a.kind = Kind::HostPinned;
  a.device = current_device();
  a.flags = Flags;
  a.ctx = current_ctx();
  std::lock_guard lk(state().mu);
  a.id = state().next_id++;
  state().allocs[a.base] = a;
  *pp = p;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }

// Any context or none may be current: the driver finds the allocation (and
// its context) from the pointer, as it does for cuMemFree and
// cuMemHostUnregister. Memory of a destroyed context went with it: freeing
// it again is CUDA_ERROR_INVALID_VALUE. Null is a no-op, as free(NULL).
// With SIMCUDA_EVENTS_PENDING, work of the allocation's context still in
// flight (an event of that context recorded and not waited for) may still
// read or write the memory over the link (mapped memory, a DMA): freeing it
// then is the caller's error, a loud abort here rather than a silent
// corruption on a GPU. Waiting for another context's work does not help
// (cuCtxSynchronize waits for the current context's only).
CUresult CUDAAPI cuMemFreeHost(void* p) {
  SIM_REQUIRE_INIT();
  if (!p) return CUDA_SUCCESS;
  std::lock_guard lk(state().mu);
  auto it = state().allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == state().allocs.end() || it->second.kind != Kind::HostPinned) return CUDA_ERROR_INVALID_VALUE;
  if (events_pending()) {
    for (CUevent e : state().events)
      if (e->pending && e->ctx == it->second.ctx) {
        std::fprintf(
            stderr,
            "simcuda: cuMemFreeHost of %p while work of its context %p is in flight (event %p recorded, "
            "not waited for: the GPU may still use the memory)\n",
            p, static_cast<void*>(it->second.ctx), static_cast<void*>(e));
        std::abort();
      }
  }
  munmap(p, round_up(it->second.size, kPage));
  state().allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  SIM_REQUIRE_CTX();
  if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
                         CU_MEMHOSTREGISTER_READ_ONLY;
  if (Flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  if (Flags & CU_MEMHOSTREGISTER_IOMEMORY) return CUDA_ERROR_NOT_SUPPORTED;
  uintptr_t base = reinterpret_cast<uintptr_t>(p);
  // Like the real driver: registrations and unregistrations of all threads
  // go one at a time, and pinning takes time per byte.
  std::lock_guard reg(host_register_mutex());
  pin_delay(bytesize);
  std::lock_guard lk(state().mu);
  if (in_simulated_space_locked(base)) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_any_locked(base, bytesize)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  Alloc a;
  a.base = base;
  a.size = bytesize;
  a.kind = Kind::HostRegistered;
  a.device = current_device();
  a.flags = Flags;
  a.ctx = current_ctx();
  a.id = state().next_id++;
  state().allocs[base] = a;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  SIM_REQUIRE_CTX();
  std::lock_guard reg(host_register_mutex());  // behind any other thread's cuMemHostRegister
  std::lock_guard lk(state().mu);
  auto it = state().allocs.find(reinterpret_cast<uintptr_t>(p));
  if (!p || it == state().allocs.end() || it->second.kind != Kind::HostRegistered)
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  state().allocs.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  SIM_REQUIRE_CTX();
  if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = lookup(reinterpret_cast<CUdeviceptr>(p));
  if (!a || (a->kind != Kind::HostPinned && a->kind != Kind::HostRegistered)) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  SIM_REQUIRE_CTX();
  if (!pFlags) return CUDA_ERROR_INVALID_VALUE;
  auto a = lookup(reinterpret_cast<CUdeviceptr>(p));
  if (!a || a->kind != Kind::HostPinned) return CUDA_ERROR_INVALID_VALUE;
  *pFlags = a->flags;
  return CUDA_SUCCESS;
}

// --- virtual memory management ----------------------------------------------------------
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags) {
  SIM_REQUIRE_INIT();
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  SIM_REQUIRE_INIT();
  if (!handle || !prop || flags != 0 || size == 0 || size % kVmmGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !valid_device(prop->location.id))
    return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lk(s.mu);
  DeviceState& d = s.devices[prop->location.id];
  if (d.used + size > d.size) return CUDA_ERROR_OUT_OF_MEMORY;
  // A memfd is the physical allocation: mapping it twice really aliases.
  int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  d.used += size;
  CUmemGenericAllocationHandle h = s.next_handle++;
  s.phys[h] = PhysAlloc{fd, size, prop->location.id, 1, s.next_id++};
  *handle = h;
  return CUDA_SUCCESS;
}

// Caller holds the lock.
static void phys_unref_locked(CUmemGenericAllocationHandle h) {
  auto it = state().phys.find(h);
  if (it == state().phys.end()) return;
  if (--it->second.refs == 0) {
    close(it->second.fd);
    state().devices[it->second.device].used -= it->second.size;
    state().phys.erase(it);
  }
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_REQUIRE_INIT();
  std::lock_guard lk(state().mu);
  if (!state().phys.count(handle)) return CUDA_ERROR_INVALID_VALUE;
  phys_unref_locked(handle);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  SIM_REQUIRE_INIT();
  if (!ptr || size == 0 || size % kVmmGranularity != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = kVmmGranularity;
  if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lk(s.mu);
  uintptr_t p = 0;
  if (addr && addr % alignment == 0 && s.va.take(addr, size)) p = addr;  // the address is only a hint
  if (!p) p = s.va.alloc(size, std::max(alignment, kVmmGranularity));
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  s.reservations[p] = Reservation{size};
  *ptr = p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_REQUIRE_INIT();
  State& s = state();
  std::lock_guard lk(s.mu);
  auto it = s.reservations.find(ptr);
  if (it == s.reservations.end() || it->second.size != size) return CUDA_ERROR_INVALID_VALUE;
  auto m = s.allocs.lower_bound(ptr);
  if (m != s.allocs.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  s.va.release(ptr, size);
  s.reservations.erase(it);
  return CUDA_SUCCESS;
}

// Caller holds the lock. The reservation that contains [p, p+n), if any.
static const std::pair<const uintptr_t, Reservation>* reservation_of_locked(uintptr_t p, size_t n) {
  auto& r = state().reservations;
  auto it = r.upper_bound(p);
  if (it == r.begin()) return nullptr;
  --it;
  if (p + n > it->first + it->second.size) return nullptr;
  return &*it;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  SIM_REQUIRE_INIT();
  if (flags != 0 || size == 0 || ptr % kVmmGranularity || size % kVmmGranularity || offset % kVmmGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard lk(s.mu);
  auto ph = s.phys.find(handle);
  if (ph == s.phys.end() || offset + size > ph->second.size) return CUDA_ERROR_INVALID_VALUE;
  const auto* res = reservation_of_locked(ptr, size);
  if (!res) return CUDA_ERROR_INVALID_VALUE;
  if (overlaps_any_locked(ptr, size)) return CUDA_ERROR_ALREADY_MAPPED;
  void* m = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->second.fd,
                 static_cast<off_t>(offset));
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  ph->second.refs++;
  Alloc a;
  a.base = ptr;
  a.size = size;
  a.kind = Kind::VmmMapped;
  a.device = ph->second.device;
  a.id = ph->second.id;
  a.ctx = current_ctx();
  a.range_base = res->first;
  a.range_size = res->second.size;
  a.handle = handle;
  a.prot = PROT_NONE;  // no access until cuMemSetAccess
  s.allocs[ptr] = a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_REQUIRE_INIT();
  State& s = state();
  std::lock_guard lk(s.mu);
  // The range must consist of whole mappings.
  std::vector<uintptr_t> bases;
  uintptr_t p = ptr;
  while (p < ptr + size) {
    auto it = s.allocs.find(p);
    if (it == s.allocs.end() || it->second.kind != Kind::VmmMapped) return CUDA_ERROR_INVALID_VALUE;
    bases.push_back(p);
    p += it->second.size;
  }
  if (p != ptr + size) return CUDA_ERROR_INVALID_VALUE;
  for (uintptr_t b : bases) {
    Alloc a = s.allocs[b];
    mmap(reinterpret_cast<void*>(b), a.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
         0);
    s.allocs.erase(b);
    phys_unref_locked(a.handle);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  SIM_REQUIRE_INIT();
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(desc[i].location.id))
      return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  State& s = state();
  std::lock_guard lk(s.mu);
  std::vector<Alloc*> maps;
  uintptr_t p = ptr;
  while (p < ptr + size) {
    auto it = s.allocs.find(p);
    if (it == s.allocs.end() || it->second.kind != Kind::VmmMapped) return CUDA_ERROR_INVALID_VALUE;
    maps.push_back(&it->second);
    p += it->second.size;
  }
  if (p != ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  for (Alloc* a : maps) a->prot = prot;
  return CUDA_SUCCESS;
}

// --- pointer attributes ------------------------------------------------------------------
CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIM_REQUIRE_INIT();
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  return pointer_attribute(data, attribute, ptr, lookup(ptr), false);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes, void** data,
                                        CUdeviceptr ptr) {
  SIM_REQUIRE_INIT();
  if (!attributes || !data || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = lookup(ptr);
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = pointer_attribute(data[i], attributes[i], ptr, a, true);
    // Attributes that do not apply to this kind of memory read as null in
    // the plural form instead of failing the whole query.
    if (r != CUDA_SUCCESS) {
      if (attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER) *static_cast<void**>(data[i]) = nullptr;
      else if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_POINTER) *static_cast<CUdeviceptr*>(data[i]) = 0;
      else return r;
    }
  }
  return CUDA_SUCCESS;
}

// --- copies ---------------------------------------------------------------------------------
#define SIM_SYNC2(name, impl, T1, T2, T3) \
  CUresult CUDAAPI name(T1 a, T2 b, T3 n) { return impl(a, b, n); }
#define SIM_ASYNC2(name, impl, T1, T2, T3) \
  CUresult CUDAAPI name(T1 a, T2 b, T3 n, CUstream s) { return on_stream(s, [&] { return impl(a, b, n); }); }

SIM_SYNC2(cuMemcpyHtoD_v2, htod, CUdeviceptr, const void*, size_t)
SIM_SYNC2(cuMemcpyHtoD_v2_ptds, htod, CUdeviceptr, const void*, size_t)
SIM_SYNC2(cuMemcpyDtoH_v2, dtoh, void*, CUdeviceptr, size_t)
SIM_SYNC2(cuMemcpyDtoH_v2_ptds, dtoh, void*, CUdeviceptr, size_t)
SIM_SYNC2(cuMemcpyDtoD_v2, dtod, CUdeviceptr, CUdeviceptr, size_t)
SIM_SYNC2(cuMemcpyDtoD_v2_ptds, dtod, CUdeviceptr, CUdeviceptr, size_t)
SIM_SYNC2(cuMemcpy, unified, CUdeviceptr, CUdeviceptr, size_t)
SIM_SYNC2(cuMemcpy_ptds, unified, CUdeviceptr, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyHtoDAsync_v2, htod, CUdeviceptr, const void*, size_t)
SIM_ASYNC2(cuMemcpyHtoDAsync_v2_ptsz, htod, CUdeviceptr, const void*, size_t)
SIM_ASYNC2(cuMemcpyDtoHAsync_v2, dtoh, void*, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyDtoHAsync_v2_ptsz, dtoh, void*, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyDtoDAsync_v2, dtod, CUdeviceptr, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyDtoDAsync_v2_ptsz, dtod, CUdeviceptr, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyAsync, unified, CUdeviceptr, CUdeviceptr, size_t)
SIM_ASYNC2(cuMemcpyAsync_ptsz, unified, CUdeviceptr, CUdeviceptr, size_t)
// Legacy 32-bit entry points (what cuGetProcAddress answers for cudaVersion < 3020).
SIM_SYNC2(cuMemcpyHtoD, htod, CUdeviceptr_v1, const void*, unsigned int)
SIM_SYNC2(cuMemcpyDtoH, dtoh, void*, CUdeviceptr_v1, unsigned int)
SIM_SYNC2(cuMemcpyDtoD, dtod, CUdeviceptr_v1, CUdeviceptr_v1, unsigned int)
SIM_ASYNC2(cuMemcpyHtoDAsync, htod, CUdeviceptr_v1, const void*, unsigned int)
SIM_ASYNC2(cuMemcpyDtoHAsync, dtoh, void*, CUdeviceptr_v1, unsigned int)
SIM_ASYNC2(cuMemcpyDtoDAsync, dtod, CUdeviceptr_v1, CUdeviceptr_v1, unsigned int)

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return peer(d, dc, s, sc, n);
}
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return peer(d, dc, s, sc, n);
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                   CUstream st) {
  return on_stream(st, [&] { return peer(d, dc, s, sc, n); });
}
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                        CUstream st) {
  return on_stream(st, [&] { return peer(d, dc, s, sc, n); });
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) { return copy_2d(p); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* p) { return copy_2d(p); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* p) { return copy_2d(p); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* p) { return copy_2d(p); }
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream s) {
  return on_stream(s, [&] { return copy_2d(p); });
}
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* p, CUstream s) {
  return on_stream(s, [&] { return copy_2d(p); });
}
CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D* p) { return copy_3d_desc(p); }
CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* p) { return copy_3d_desc(p); }
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* p, CUstream s) {
  return on_stream(s, [&] { return copy_3d_desc(p); });
}
CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* p, CUstream s) {
  return on_stream(s, [&] { return copy_3d_desc(p); });
}
CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) { return copy_3d_peer(p); }
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) { return copy_3d_peer(p); }
CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream s) {
  return on_stream(s, [&] { return copy_3d_peer(p); });
}
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream s) {
  return on_stream(s, [&] { return copy_3d_peer(p); });
}

CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                       CUmemcpyAttributes*, size_t*, size_t numAttrs, CUstream hStream) {
  return batch(dsts, srcs, sizes, count, numAttrs, nullptr, hStream);
}
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                            CUmemcpyAttributes*, size_t*, size_t numAttrs, CUstream hStream) {
  return batch(dsts, srcs, sizes, count, numAttrs, nullptr, hStream);
}
CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                    CUmemcpyAttributes*, size_t*, size_t numAttrs, size_t* failIdx,
                                    CUstream hStream) {
  return batch(dsts, srcs, sizes, count, numAttrs, failIdx, hStream);
}
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                         CUmemcpyAttributes*, size_t*, size_t numAttrs, size_t* failIdx,
                                         CUstream hStream) {
  return batch(dsts, srcs, sizes, count, numAttrs, failIdx, hStream);
}

// --- memsets ------------------------------------------------------------------------------------
CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { return memset_1d(d, v, n); }
CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
CUresult CUDAAPI cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
CUresult CUDAAPI cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
CUresult CUDAAPI cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h) {
  return memset_2d(d, pitch, v, w, h);
}
#define SIM_MEMSET_ASYNC(name, T)                                                 \
  CUresult CUDAAPI name(CUdeviceptr d, T v, size_t n, CUstream s) {               \
    return on_stream(s, [&] { return memset_1d(d, v, n); });                      \
  }
#define SIM_MEMSET2D_ASYNC(name, T)                                                             \
  CUresult CUDAAPI name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) {     \
    return on_stream(s, [&] { return memset_2d(d, pitch, v, w, h); });                          \
  }
SIM_MEMSET_ASYNC(cuMemsetD8Async, unsigned char)
SIM_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char)
SIM_MEMSET_ASYNC(cuMemsetD16Async, unsigned short)
SIM_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short)
SIM_MEMSET_ASYNC(cuMemsetD32Async, unsigned int)
SIM_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int)
SIM_MEMSET2D_ASYNC(cuMemsetD2D8Async, unsigned char)
SIM_MEMSET2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char)
SIM_MEMSET2D_ASYNC(cuMemsetD2D16Async, unsigned short)
SIM_MEMSET2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short)
SIM_MEMSET2D_ASYNC(cuMemsetD2D32Async, unsigned int)
SIM_MEMSET2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int)

// --- entry point lookup ----------------------------------------------------------------------------
CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) {
  return get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}
CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return get_proc_address(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"

namespace {

#define FN(f) reinterpret_cast<void*>(&f)
// Rows for one base name are listed newest first; a lookup answers the first
// row whose version is <= the caller's cudaVersion. Versions are the CUDA
// releases that introduced each variant (approximate where it does not matter).
const ProcEntry kProcTable[] = {
    {"cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), nullptr},
    {"cuGetProcAddress", 11030, FN(cuGetProcAddress), nullptr},
    {"cuInit", 2000, FN(cuInit), nullptr},
    {"cuDriverGetVersion", 2020, FN(cuDriverGetVersion), nullptr},
    {"cuGetErrorName", 6000, FN(cuGetErrorName), nullptr},
    {"cuGetErrorString", 6000, FN(cuGetErrorString), nullptr},
    {"cuGetExportTable", 3000, FN(cuGetExportTable), nullptr},
    {"cuDeviceGet", 2000, FN(cuDeviceGet), nullptr},
    {"cuDeviceGetCount", 2000, FN(cuDeviceGetCount), nullptr},
    {"cuDeviceGetName", 2000, FN(cuDeviceGetName), nullptr},
    {"cuDeviceGetUuid", 11040, FN(cuDeviceGetUuid_v2), nullptr},
    {"cuDeviceGetUuid", 9020, FN(cuDeviceGetUuid), nullptr},
    {"cuDeviceGetPCIBusId", 4010, FN(cuDeviceGetPCIBusId), nullptr},
    {"cuDeviceGetAttribute", 2000, FN(cuDeviceGetAttribute), nullptr},
    {"cuDeviceTotalMem", 3020, FN(cuDeviceTotalMem_v2), nullptr},
    {"cuDeviceCanAccessPeer", 4000, FN(cuDeviceCanAccessPeer), nullptr},
    {"cuDeviceGetDefaultMemPool", 11020, FN(cuDeviceGetDefaultMemPool), nullptr},
    {"cuDevicePrimaryCtxRetain", 7000, FN(cuDevicePrimaryCtxRetain), nullptr},
    {"cuDevicePrimaryCtxRelease", 11000, FN(cuDevicePrimaryCtxRelease_v2), nullptr},
    {"cuDevicePrimaryCtxRelease", 7000, FN(cuDevicePrimaryCtxRelease), nullptr},
    {"cuDevicePrimaryCtxReset", 11000, FN(cuDevicePrimaryCtxReset_v2), nullptr},
    {"cuDevicePrimaryCtxReset", 7000, FN(cuDevicePrimaryCtxReset), nullptr},
    {"cuDevicePrimaryCtxGetState", 7000, FN(cuDevicePrimaryCtxGetState), nullptr},
    {"cuDevicePrimaryCtxSetFlags", 11000, FN(cuDevicePrimaryCtxSetFlags_v2), nullptr},
    {"cuCtxCreate", 12050, FN(cuCtxCreate_v4), nullptr},
    {"cuCtxCreate", 3020, FN(cuCtxCreate_v2), nullptr},
    {"cuCtxCreate", 2000, FN(cuCtxCreate), nullptr},
    {"cuCtxDestroy", 4000, FN(cuCtxDestroy_v2), nullptr},
    {"cuCtxDestroy", 2000, FN(cuCtxDestroy), nullptr},
    {"cuCtxAttach", 2000, FN(cuCtxAttach), nullptr},
    {"cuCtxDetach", 2000, FN(cuCtxDetach), nullptr},
    {"cuCtxGetCurrent", 4000, FN(cuCtxGetCurrent), nullptr},
    {"cuCtxSetCurrent", 4000, FN(cuCtxSetCurrent), nullptr},
    {"cuCtxPushCurrent", 4000, FN(cuCtxPushCurrent_v2), nullptr},
    {"cuCtxPushCurrent", 2000, FN(cuCtxPushCurrent), nullptr},
    {"cuCtxPopCurrent", 4000, FN(cuCtxPopCurrent_v2), nullptr},
    {"cuCtxPopCurrent", 2000, FN(cuCtxPopCurrent), nullptr},
    {"cuCtxGetDevice", 2000, FN(cuCtxGetDevice), nullptr},
    {"cuCtxSynchronize", 2000, FN(cuCtxSynchronize), nullptr},
    {"cuProfilerStart", 4000, FN(cuProfilerStart), nullptr},
    {"cuProfilerStop", 4000, FN(cuProfilerStop), nullptr},
    {"cuCtxEnablePeerAccess", 4000, FN(cuCtxEnablePeerAccess), nullptr},
    {"cuStreamCreate", 2000, FN(cuStreamCreate), nullptr},
    {"cuStreamCreateWithPriority", 5050, FN(cuStreamCreateWithPriority), nullptr},
    {"cuStreamDestroy", 4000, FN(cuStreamDestroy_v2), nullptr},
    {"cuStreamDestroy", 2000, FN(cuStreamDestroy), nullptr},
    {"cuStreamSynchronize", 2000, FN(cuStreamSynchronize), FN(cuStreamSynchronize_ptsz)},
    {"cuStreamQuery", 2000, FN(cuStreamQuery), FN(cuStreamQuery_ptsz)},
    {"cuStreamWaitEvent", 3020, FN(cuStreamWaitEvent), FN(cuStreamWaitEvent_ptsz)},
    {"cuStreamGetFlags", 5050, FN(cuStreamGetFlags), FN(cuStreamGetFlags_ptsz)},
    {"cuStreamAddCallback", 5000, FN(cuStreamAddCallback), FN(cuStreamAddCallback_ptsz)},
    {"cuLaunchHostFunc", 10000, FN(cuLaunchHostFunc), FN(cuLaunchHostFunc_ptsz)},
    {"cuEventCreate", 2000, FN(cuEventCreate), nullptr},
    {"cuEventRecord", 2000, FN(cuEventRecord), FN(cuEventRecord_ptsz)},
    {"cuEventRecordWithFlags", 11010, FN(cuEventRecordWithFlags), FN(cuEventRecordWithFlags_ptsz)},
    {"cuEventSynchronize", 2000, FN(cuEventSynchronize), nullptr},
    {"cuEventQuery", 2000, FN(cuEventQuery), nullptr},
    {"cuEventElapsedTime", 12080, FN(cuEventElapsedTime_v2), nullptr},
    {"cuEventElapsedTime", 2000, FN(cuEventElapsedTime), nullptr},
    {"cuEventDestroy", 4000, FN(cuEventDestroy_v2), nullptr},
    {"cuEventDestroy", 2000, FN(cuEventDestroy), nullptr},
    {"cuMemAlloc", 3020, FN(cuMemAlloc_v2), nullptr},
    {"cuMemAlloc", 2000, FN(cuMemAlloc), nullptr},
    {"cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), nullptr},
    {"cuMemFree", 3020, FN(cuMemFree_v2), nullptr},
    {"cuMemFree", 2000, FN(cuMemFree), nullptr},
    {"cuMemAllocManaged", 6000, FN(cuMemAllocManaged), nullptr},
    {"cuMemAllocAsync", 11020, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, FN(cuMemAllocFromPoolAsync), FN(cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemFreeAsync", 11020, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz)},
    {"cuMemPoolCreate", 11020, FN(cuMemPoolCreate), nullptr},
    {"cuMemPoolDestroy", 11020, FN(cuMemPoolDestroy), nullptr},
    {"cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), nullptr},
    {"cuMemGetAddressRange", 3020, FN(cuMemGetAddressRange_v2), nullptr},
    {"cuMemHostAlloc", 2020, FN(cuMemHostAlloc), nullptr},
    {"cuMemAllocHost", 3020, FN(cuMemAllocHost_v2), nullptr},
    {"cuMemFreeHost", 2000, FN(cuMemFreeHost), nullptr},
    {"cuMemHostRegister", 6050, FN(cuMemHostRegister_v2), nullptr},
    {"cuMemHostRegister", 4000, FN(cuMemHostRegister), nullptr},
    {"cuMemHostUnregister", 4000, FN(cuMemHostUnregister), nullptr},
    {"cuMemHostGetDevicePointer", 3020, FN(cuMemHostGetDevicePointer_v2), nullptr},
    {"cuMemHostGetFlags", 2030, FN(cuMemHostGetFlags), nullptr},
    {"cuMemGetAllocationGranularity", 10020, FN(cuMemGetAllocationGranularity), nullptr},
    {"cuMemCreate", 10020, FN(cuMemCreate), nullptr},
    {"cuMemRelease", 10020, FN(cuMemRelease), nullptr},
    {"cuMemAddressReserve", 10020, FN(cuMemAddressReserve), nullptr},
    {"cuMemAddressFree", 10020, FN(cuMemAddressFree), nullptr},
    {"cuMemMap", 10020, FN(cuMemMap), nullptr},
    {"cuMemUnmap", 10020, FN(cuMemUnmap), nullptr},
    {"cuMemSetAccess", 10020, FN(cuMemSetAccess), nullptr},
    {"cuPointerGetAttribute", 4000, FN(cuPointerGetAttribute), nullptr},
    {"cuPointerGetAttributes", 7000, FN(cuPointerGetAttributes), nullptr},
    {"cuMemcpy", 4000, FN(cuMemcpy), FN(cuMemcpy_ptds)},
    {"cuMemcpyAsync", 4000, FN(cuMemcpyAsync), FN(cuMemcpyAsync_ptsz)},
    {"cuMemcpyPeer", 4000, FN(cuMemcpyPeer), FN(cuMemcpyPeer_ptds)},
    {"cuMemcpyPeerAsync", 4000, FN(cuMemcpyPeerAsync), FN(cuMemcpyPeerAsync_ptsz)},
    {"cuMemcpyHtoD", 3020, FN(cuMemcpyHtoD_v2), FN(cuMemcpyHtoD_v2_ptds)},
    {"cuMemcpyHtoD", 2000, FN(cuMemcpyHtoD), nullptr},
    {"cuMemcpyDtoH", 3020, FN(cuMemcpyDtoH_v2), FN(cuMemcpyDtoH_v2_ptds)},
    {"cuMemcpyDtoH", 2000, FN(cuMemcpyDtoH), nullptr},
    {"cuMemcpyDtoD", 3020, FN(cuMemcpyDtoD_v2), FN(cuMemcpyDtoD_v2_ptds)},
    {"cuMemcpyDtoD", 2000, FN(cuMemcpyDtoD), nullptr},
    {"cuMemcpyHtoDAsync", 3020, FN(cuMemcpyHtoDAsync_v2), FN(cuMemcpyHtoDAsync_v2_ptsz)},
    {"cuMemcpyHtoDAsync", 2000, FN(cuMemcpyHtoDAsync), nullptr},
    {"cuMemcpyDtoHAsync", 3020, FN(cuMemcpyDtoHAsync_v2), FN(cuMemcpyDtoHAsync_v2_ptsz)},
    {"cuMemcpyDtoHAsync", 2000, FN(cuMemcpyDtoHAsync), nullptr},
    {"cuMemcpyDtoDAsync", 3020, FN(cuMemcpyDtoDAsync_v2), FN(cuMemcpyDtoDAsync_v2_ptsz)},
    {"cuMemcpyDtoDAsync", 3000, FN(cuMemcpyDtoDAsync), nullptr},
    {"cuMemcpy2D", 3020, FN(cuMemcpy2D_v2), FN(cuMemcpy2D_v2_ptds)},
    {"cuMemcpy2DUnaligned", 3020, FN(cuMemcpy2DUnaligned_v2), FN(cuMemcpy2DUnaligned_v2_ptds)},
    {"cuMemcpy2DAsync", 3020, FN(cuMemcpy2DAsync_v2), FN(cuMemcpy2DAsync_v2_ptsz)},
    {"cuMemcpy3D", 3020, FN(cuMemcpy3D_v2), FN(cuMemcpy3D_v2_ptds)},
    {"cuMemcpy3DAsync", 3020, FN(cuMemcpy3DAsync_v2), FN(cuMemcpy3DAsync_v2_ptsz)},
    {"cuMemcpy3DPeer", 4000, FN(cuMemcpy3DPeer), FN(cuMemcpy3DPeer_ptds)},
    {"cuMemcpy3DPeerAsync", 4000, FN(cuMemcpy3DPeerAsync), FN(cuMemcpy3DPeerAsync_ptsz)},
    {"cuMemcpyBatchAsync", 13000, FN(cuMemcpyBatchAsync_v2), FN(cuMemcpyBatchAsync_v2_ptsz)},
    {"cuMemcpyBatchAsync", 12080, FN(cuMemcpyBatchAsync), FN(cuMemcpyBatchAsync_ptsz)},
    {"cuMemsetD8", 3020, FN(cuMemsetD8_v2), FN(cuMemsetD8_v2_ptds)},
    {"cuMemsetD16", 3020, FN(cuMemsetD16_v2), FN(cuMemsetD16_v2_ptds)},
    {"cuMemsetD32", 3020, FN(cuMemsetD32_v2), FN(cuMemsetD32_v2_ptds)},
    {"cuMemsetD2D8", 3020, FN(cuMemsetD2D8_v2), FN(cuMemsetD2D8_v2_ptds)},
    {"cuMemsetD2D16", 3020, FN(cuMemsetD2D16_v2), FN(cuMemsetD2D16_v2_ptds)},
    {"cuMemsetD2D32", 3020, FN(cuMemsetD2D32_v2), FN(cuMemsetD2D32_v2_ptds)},
    {"cuMemsetD8Async", 3020, FN(cuMemsetD8Async), FN(cuMemsetD8Async_ptsz)},
    {"cuMemsetD16Async", 3020, FN(cuMemsetD16Async), FN(cuMemsetD16Async_ptsz)},
    {"cuMemsetD32Async", 3020, FN(cuMemsetD32Async), FN(cuMemsetD32Async_ptsz)},
    {"cuMemsetD2D8Async", 3020, FN(cuMemsetD2D8Async), FN(cuMemsetD2D8Async_ptsz)},
    {"cuMemsetD2D16Async", 3020, FN(cuMemsetD2D16Async), FN(cuMemsetD2D16Async_ptsz)},
    {"cuMemsetD2D32Async", 3020, FN(cuMemsetD2D32Async), FN(cuMemsetD2D32Async_ptsz)},
};
#undef FN

CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status) {
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const cuuint64_t known = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  const bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const std::string_view name(symbol);
  bool seen = false;
  for (const ProcEntry& e : kProcTable) {
    if (name != e.name) continue;
    seen = true;
    if (version < e.version) continue;
    *pfn = (ptds && e.ptds) ? e.ptds : e.fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (seen && status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace
