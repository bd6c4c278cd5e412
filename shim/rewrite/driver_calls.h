// Driver entry points the rewrite calls itself, resolved once and always the
// real ones (never our hooks), so that its own work is never recorded or
// rewritten again.
#pragma once

#include "symbols/cuda_headers.h"

namespace cuxfer::shim::rewrite {

struct DriverCalls {
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventRecord_ptsz) event_record_ptsz = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamSynchronize_ptsz) stream_synchronize_ptsz = nullptr;
  decltype(&::cuStreamQuery) stream_query = nullptr;
  decltype(&::cuStreamQuery_ptsz) stream_query_ptsz = nullptr;
  decltype(&::cuStreamGetFlags) stream_get_flags = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;
  decltype(&::cuStreamIsCapturing_ptsz) stream_is_capturing_ptsz = nullptr;
  decltype(&::cuMemcpyAsync) memcpy_async = nullptr;
  decltype(&::cuMemcpyAsync_ptsz) memcpy_async_ptsz = nullptr;
  decltype(&::cuMemHostAlloc) host_alloc = nullptr;
  decltype(&::cuMemHostRegister) host_register = nullptr;
  decltype(&::cuMemHostUnregister) host_unregister = nullptr;
  // The zero-copy path (zero_copy.h).
  decltype(&::cuMemHostGetDevicePointer_v2) host_get_device_pointer = nullptr;
  decltype(&::cuMemFreeHost) free_host = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuEventDestroy_v2) event_destroy = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) exchange_capture_mode = nullptr;

  // The per-thread-stream variant when the app used one.
  CUresult copy_async(bool per_thread, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) const {
    return per_thread && memcpy_async_ptsz ? memcpy_async_ptsz(dst, src, n, s) : memcpy_async(dst, src, n, s);
  }
  CUresult record(bool per_thread, CUevent ev, CUstream s) const {
    return per_thread && event_record_ptsz ? event_record_ptsz(ev, s) : event_record(ev, s);
  }
  CUresult sync_stream(bool per_thread, CUstream s) const {
    return per_thread && stream_synchronize_ptsz ? stream_synchronize_ptsz(s) : stream_synchronize(s);
  }
  // True when everything queued on `s` has completed. False for a stream
  // being captured, which is never queried: cuStreamQuery on it would
  // invalidate the app's capture. The query itself runs in relaxed capture
  // mode (RelaxedCaptureScope): in global mode, while another thread
  // captures, a stream or event query is a "potentially unsafe" call that
  // the driver refuses and that invalidates that thread's capture.
  bool idle(bool per_thread, CUstream s) const;
  // True when work on `s` waits for the legacy default stream: `s` was made
  // without CU_STREAM_NON_BLOCKING, or its flags cannot be read (assumed so).
  bool orders_after_legacy(CUstream s) const {
    unsigned int flags = 0;
    if (!stream_get_flags || stream_get_flags(s, &flags) != CUDA_SUCCESS) return true;
    return (flags & CU_STREAM_NON_BLOCKING) == 0;
  }
  // True when `s` is being captured into a graph (or the query itself fails:
  // the original call will then report whatever is wrong).
  bool capturing(bool per_thread, CUstream s) const;
};

// The shim's own driver calls made safe beside a graph capture: while any
// thread captures in global mode, a thread in global mode that calls
// cuMemHostRegister or cuMemHostUnregister is refused and invalidates that
// capture: the app's, because of the shim. For the scope's lifetime this
// thread is in relaxed mode (cuThreadExchangeStreamCaptureMode), and its own
// mode is given back after. A thread that is itself capturing in global mode
// stays restricted (the driver's rule); the callers check their own stream.
class RelaxedCaptureScope {
 public:
  explicit RelaxedCaptureScope(const DriverCalls& d) : d_(d) {
    if (d_.exchange_capture_mode) exchanged_ = d_.exchange_capture_mode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureScope() {
    if (exchanged_) d_.exchange_capture_mode(&mode_);
  }
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  const DriverCalls& d_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;  // in: wanted; out: the thread's own
  bool exchanged_ = false;
};

// Null when libcuda is not loaded or lacks an entry point the rewrite needs.
const DriverCalls* driver_calls();

}  // namespace cuxfer::shim::rewrite
