#include "rewrite/driver_calls.h"

#include <atomic>
#include <mutex>
#include <new>
#include <type_traits>

#include "core/clock.h"
#include "core/ranked_lock.h"
#include "symbols/symbol_table.h"

namespace cuxfer::shim::rewrite {
namespace {

bool load(DriverCalls& d) {
  void* h = libcuda_handle();
  if (!h) return false;
  auto get = [h](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(real_dlsym(h, name));
    return fn != nullptr;
  };
  auto real = [](auto& fn, HookId id) {
    fn = real_function_as<std::remove_reference_t<decltype(fn)>>(id);
    return fn != nullptr;
  };
  bool ok = real(d.memcpy_async, HookId::h_cuMemcpyAsync) && real(d.host_alloc, HookId::h_cuMemHostAlloc) &&
            real(d.host_register, HookId::h_cuMemHostRegister_v2) &&
            real(d.host_unregister, HookId::h_cuMemHostUnregister) && get(d.ctx_get_current, "cuCtxGetCurrent") &&
            get(d.ctx_push_current, "cuCtxPushCurrent_v2") && get(d.ctx_pop_current, "cuCtxPopCurrent_v2") &&
            get(d.event_create, "cuEventCreate") && get(d.event_record, "cuEventRecord") &&
            get(d.event_query, "cuEventQuery") && get(d.event_synchronize, "cuEventSynchronize") &&
            get(d.stream_synchronize, "cuStreamSynchronize");
  real(d.memcpy_async_ptsz, HookId::h_cuMemcpyAsync_ptsz);
  real(d.host_get_device_pointer, HookId::h_cuMemHostGetDevicePointer_v2);
  real(d.free_host, HookId::h_cuMemFreeHost);
  get(d.ctx_synchronize, "cuCtxSynchronize");
  get(d.event_destroy, "cuEventDestroy_v2");
  get(d.exchange_capture_mode, "cuThreadExchangeStreamCaptureMode");
  get(d.event_record_ptsz, "cuEventRecord_ptsz");
  get(d.stream_synchronize_ptsz, "cuStreamSynchronize_ptsz");
  get(d.stream_query, "cuStreamQuery");
  get(d.stream_query_ptsz, "cuStreamQuery_ptsz");
  get(d.stream_get_flags, "cuStreamGetFlags");
  get(d.stream_is_capturing, "cuStreamIsCapturing");
  get(d.stream_is_capturing_ptsz, "cuStreamIsCapturing_ptsz");
  return ok;
}

}  // namespace

bool DriverCalls::capturing(bool per_thread, CUstream s) const {
  auto fn = per_thread && stream_is_capturing_ptsz ? stream_is_capturing_ptsz : stream_is_capturing;
  if (!fn) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return fn(s, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool DriverCalls::idle(bool per_thread, CUstream s) const {
  auto fn = per_thread && stream_query_ptsz ? stream_query_ptsz : stream_query;
  if (!fn) return false;
  RelaxedCaptureScope capture_safe(*this);
  return !capturing(per_thread, s) && fn(s) == CUDA_SUCCESS;
}

const DriverCalls* driver_calls() {
  // Only a complete table is kept: a failure (libcuda not loaded yet, an
  // entry point missing) is tried again, at most every 100 ms.
  static std::atomic<DriverCalls*> ready{nullptr};
  static std::atomic<uint64_t> next_try_ns{0};
  static RankedMutex loading{LockRank::kDriverLoading};
  if (DriverCalls* d = ready.load(std::memory_order_acquire)) return d;
  // Threads that arrive while another loads wait for its result.
  std::lock_guard<RankedMutex> lock(loading);
  if (DriverCalls* d = ready.load(std::memory_order_acquire)) return d;
  const uint64_t now = now_ns();
  if (now < next_try_ns.load(std::memory_order_relaxed)) return nullptr;
  next_try_ns.store(now + 100'000'000, std::memory_order_relaxed);
  DriverCalls found;
  if (!load(found)) return nullptr;
  DriverCalls* d = new (std::nothrow) DriverCalls(found);
  if (d) ready.store(d, std::memory_order_release);
  return d;
}

}  // namespace cuxfer::shim::rewrite
