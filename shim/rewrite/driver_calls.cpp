#include "rewrite/driver_calls.h"

#include <mutex>
#include <type_traits>

#include "interpose/symbol_table.h"

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
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(real_function(id));
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
  get(d.event_record_ptsz, "cuEventRecord_ptsz");
  get(d.stream_synchronize_ptsz, "cuStreamSynchronize_ptsz");
  get(d.stream_query, "cuStreamQuery");
  get(d.stream_query_ptsz, "cuStreamQuery_ptsz");
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

const DriverCalls* driver_calls() {
  static DriverCalls* calls = [] {
    auto* d = new DriverCalls;
    return load(*d) ? d : nullptr;
  }();
  return calls;
}

}  // namespace cuxfer::shim::rewrite
