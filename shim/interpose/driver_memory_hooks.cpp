// Driver-layer hooks for allocation, free, host allocation and registration.
// They keep the allocation table true (which the copy hooks classify against)
// and record allocation events. A range is dropped from the table *before*
// the real free, so an address reused by another thread right after the free
// is never shadowed by the stale entry.
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "interpose/copy_describe.h"
#include "interpose/hook_macros.h"
#include "core/log.h"
#include "core/ranked_lock.h"
#include "memory/pointer_classifier.h"
#include "core/config.h"
#include "rewrite/staging.h"
#include "rewrite/capture_watch.h"
#include "record/cupti_warmup.h"

using namespace cuxfer::shim;
using cuxfer::trace::EventKind;
using cuxfer::trace::MemKind;

namespace {

int8_t current_device() { return current_device_ordinal(); }

// Device allocations at least this large prewarm the staging pool (0: never):
// as large as a copy the pool would stage, so that an app whose buffers are
// all small (PyCUDA's tests make a context each) pins nothing for it.
uint64_t prewarm_min_bytes() {
  static const uint64_t min = config().enabled && config().rewrite_pin
                                  ? std::max<uint64_t>(1, std::min(config().stage_min_h2d, config().stage_min_d2h))
                                  : 0;
  return min;
}

void remember(uint64_t address, uint64_t bytes, MemKind kind) {
  if (!allocation_table().insert(address, bytes, kind, kind == MemKind::Device || kind == MemKind::Managed
                                                             ? current_device()
                                                             : -1)) {
    static std::atomic<bool> warned{false};
    cuxfer::shim::log::warn_once(warned, "allocation table full; further pointers are classified by the driver");
  }
}

uint64_t forget(uint64_t address) { return forget_app_range(address); }

// An allocation: after success, record the range and complete the event.
uint64_t address_of(const CUdeviceptr* p) { return *p; }
uint64_t address_of(void* const* p) { return reinterpret_cast<uint64_t>(*p); }

// `first_use`: a synchronous device allocation, where the context's first
// CUPTI record may be made ahead of the app's first copy (cupti_warmup.h).
template <typename R, typename P>
auto on_alloc(const P* out, uint64_t bytes, MemKind kind, bool first_use = false) {
  return [=](R r, cuxfer::trace::Event* e) {
    if (r != 0 || !out) return;
    uint64_t address = address_of(out);
    // The zero-copy path made it and listed it as mapped (rewrite/zero_copy.h).
    if (!thread_state().mapped) remember(address, bytes, kind);
    if (kind == MemKind::Managed) Recorder::instance().managed_memory_seen();
    // Device memory as large as a staged copy: the staging pool's first
    // buffers are pinned now, in the background, rather than inside the
    // context's first copy.
    if (kind == MemKind::Device && prewarm_min_bytes() && bytes >= prewarm_min_bytes()) {
      rewrite::staging_prewarm(rewrite::Prewarm::OneCopy);
      rewrite::device_memory_made();
    }
    if (first_use && !thread_state().mapped) warm_cupti_records(rewrite::global_capture_open());
    if (e) {
      e->address = address;
      e->bytes = bytes;
    }
  };
}

CallDesc free_desc(EventKind kind, uint64_t address, MemKind memory) {
  // Forget first: see the file comment.
  return describe::memory(kind, address, forget(address), memory);
}

// VMM: cuMemCreate hands out a handle; cuMemMap gives it an address.
struct VmmHandles {
  RankedMutex mutex{LockRank::kVmmMappings};
  std::unordered_map<CUmemGenericAllocationHandle, MemKind> kinds;
};
VmmHandles& vmm() {
  static auto* v = new VmmHandles;
  return *v;
}

}  // namespace


CUXFER_DRIVER_HOOK_BEGIN(cuMemAlloc_v2, (CUdeviceptr* p, size_t n))
  return intercept<CUresult>(HookId::h_cuMemAlloc_v2, describe::memory(EventKind::DeviceAlloc, 0, n, MemKind::Device),
                             CUXFER_CALLER,
                             [&] {
                               uint64_t mapped = 0;
                               if (p && rewrite::zero_copy_alloc(n, &mapped)) {
                                 *p = mapped;
                                 return CUDA_SUCCESS;
                               }
                               return real(p, n);
                             },
                             on_alloc<CUresult>(p, n, MemKind::Device, /*first_use=*/true));
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemAllocPitch_v2, (CUdeviceptr* p, size_t* pitch, size_t w, size_t h, unsigned int elem))
  return intercept<CUresult>(
      HookId::h_cuMemAllocPitch_v2, describe::memory(EventKind::DeviceAlloc, 0, w * h, MemKind::Device),
      CUXFER_CALLER, [&] { return real(p, pitch, w, h, elem); },
      [&](CUresult r, cuxfer::trace::Event* e) {
        if (r != CUDA_SUCCESS || !p || !pitch) return;
        on_alloc<CUresult>(p, static_cast<uint64_t>(*pitch) * h, MemKind::Device, /*first_use=*/true)(r, e);
      });
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemAllocManaged, (CUdeviceptr* p, size_t n, unsigned int flags))
  return intercept<CUresult>(HookId::h_cuMemAllocManaged,
                             describe::memory(EventKind::ManagedAlloc, 0, n, MemKind::Managed),
                             CUXFER_CALLER, [&] { return real(p, n, flags); },
                             on_alloc<CUresult>(p, n, MemKind::Managed));
}

#define ALLOC_ASYNC(name)                                                                                   \
  CUXFER_DRIVER_HOOK_BEGIN(name, (CUdeviceptr* p, size_t n, CUstream s))                                    \
    return intercept<CUresult>(HookId::h_##name, describe::memory(EventKind::DeviceAlloc, 0, n, MemKind::Device), \
                               CUXFER_CALLER, [&] { return real(p, n, s); },                                      \
                               on_alloc<CUresult>(p, n, MemKind::Device));                                  \
  }
ALLOC_ASYNC(cuMemAllocAsync)
ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define ALLOC_FROM_POOL(name)                                                                               \
  CUXFER_DRIVER_HOOK_BEGIN(name, (CUdeviceptr* p, size_t n, CUmemoryPool pool, CUstream s))                 \
    return intercept<CUresult>(HookId::h_##name, describe::memory(EventKind::DeviceAlloc, 0, n, MemKind::Device), \
                               CUXFER_CALLER, [&] { return real(p, n, pool, s); },                                \
                               on_alloc<CUresult>(p, n, MemKind::Device));                                  \
  }
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)

// A zero-copy buffer (rewrite/zero_copy.h) is freed by the shim, which made it.
#define CUXFER_DEVICE_FREE_HOOK(name, params, args)                                                       \
  CUXFER_DRIVER_HOOK_BEGIN(name, params)                                                                  \
    return intercept<CUresult>(HookId::h_##name, free_desc(EventKind::DeviceFree, p, MemKind::Device),    \
                               CUXFER_CALLER, [&] {                                                       \
                                 if (rewrite::zero_copy_exists() && rewrite::zero_copy_free(p))           \
                                   return CUDA_SUCCESS;                                                   \
                                 return real args;                                                        \
                               });                                                                        \
  }
CUXFER_DEVICE_FREE_HOOK(cuMemFree_v2, (CUdeviceptr p), (p))
CUXFER_DEVICE_FREE_HOOK(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s))
CUXFER_DEVICE_FREE_HOOK(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), (p, s))

CUXFER_DRIVER_HOOK_BEGIN(cuMemCreate, (CUmemGenericAllocationHandle* handle, size_t n,
                                       const CUmemAllocationProp* prop, unsigned long long flags))
  bool host = prop && (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                       prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                       prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT);
  MemKind kind = host ? MemKind::Pinned : MemKind::Device;
  return intercept<CUresult>(
      HookId::h_cuMemCreate, describe::memory(host ? EventKind::HostAlloc : EventKind::DeviceAlloc, 0, n, kind),
      CUXFER_CALLER, [&] { return real(handle, n, prop, flags); },
      [&](CUresult r, cuxfer::trace::Event*) {
        if (r != CUDA_SUCCESS || !handle) return;
        std::lock_guard<RankedMutex> lock(vmm().mutex);
        vmm().kinds[*handle] = kind;
      });
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemRelease, (CUmemGenericAllocationHandle handle))
  CUresult r = real(handle);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<RankedMutex> lock(vmm().mutex);
    vmm().kinds.erase(handle);
  }
  return r;
}

// Mapping and unmapping only move address ranges; the allocation event was cuMemCreate.
CUXFER_DRIVER_HOOK_BEGIN(cuMemMap, (CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle handle,
                                    unsigned long long flags))
  CUresult r = real(p, n, offset, handle, flags);
  if (r == CUDA_SUCCESS) {
    MemKind kind = MemKind::Device;
    {
      std::lock_guard<RankedMutex> lock(vmm().mutex);
      auto it = vmm().kinds.find(handle);
      if (it != vmm().kinds.end()) kind = it->second;
    }
    remember(p, n, kind);
  }
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemUnmap, (CUdeviceptr p, size_t n))
  forget(p);
  return real(p, n);
}

// Host memory
CUXFER_DRIVER_HOOK_BEGIN(cuMemHostAlloc, (void** p, size_t n, unsigned int flags))
  return intercept<CUresult>(HookId::h_cuMemHostAlloc, describe::memory(EventKind::HostAlloc, 0, n, MemKind::Pinned),
                             CUXFER_CALLER, [&] { return real(p, n, flags); },
                             on_alloc<CUresult>(p, n, MemKind::Pinned));
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemAllocHost_v2, (void** p, size_t n))
  return intercept<CUresult>(HookId::h_cuMemAllocHost_v2, describe::memory(EventKind::HostAlloc, 0, n, MemKind::Pinned),
                             CUXFER_CALLER, [&] { return real(p, n); },
                             on_alloc<CUresult>(p, n, MemKind::Pinned));
}

CUXFER_DRIVER_HOOK(cuMemFreeHost, (void* p), (p),
                   free_desc(EventKind::HostFree, describe::ptr(p), MemKind::Pinned))

CUXFER_DRIVER_HOOK_BEGIN(cuMemHostRegister_v2, (void* p, size_t n, unsigned int flags))
  uint64_t address = describe::ptr(p);
  // The app pins memory the shim registered: the app's registration wins.
  rewrite::release_range(address, n);
  return intercept<CUresult>(
      HookId::h_cuMemHostRegister_v2, describe::memory(EventKind::HostRegister, address, n, MemKind::Registered),
      CUXFER_CALLER, [&] { return real(p, n, flags); },
      [=](CUresult r, cuxfer::trace::Event*) {
        if (r == CUDA_SUCCESS) remember(address, n, MemKind::Registered);
      });
}

CUXFER_DRIVER_HOOK_BEGIN(cuMemHostUnregister, (void* p))
  // Memory the shim registered is pageable to the app: it gets the driver's
  // answer for pageable memory, and the registration stays.
  void* target = rewrite::shim_registered(describe::ptr(p)) ? rewrite::pageable_probe() : p;
  return intercept<CUresult>(HookId::h_cuMemHostUnregister,
                             free_desc(EventKind::HostUnregister, describe::ptr(p), MemKind::Registered),
                             CUXFER_CALLER, [&] { return real(target); });
}
