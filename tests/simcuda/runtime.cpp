// simcuda runtime: a test double of libcudart (the subset cuxfer's test apps
// use), built both as libcudart.so.13 and as a static archive that stands in
// for nvcc's default static cudart.
//
// It reaches the driver exactly the way the real cudart does (FACTS.md):
//   1. dlopen("libcuda.so.1")
//   2. dlsym(handle, "cuGetProcAddress_v2")
//   3. ask that function for "cuGetProcAddress" itself (cudaVersion 11030 and
//      12000) and keep the 12000 answer
//   4. fetch every other driver entry point through THAT pointer, by base name
//      and cudaVersion, with flags DEFAULT (legacy stream) and, for the
//      _ptds/_ptsz runtime entry points, PER_THREAD_DEFAULT_STREAM.
// Nothing here calls a driver function by name, so a preloaded library sees
// only what it would see with the real static cudart: one dlopen, one dlsym
// and the cuGetProcAddress self-lookup.
//
// Like cuda.h in driver.cpp, the runtime header is included with
// __CUDA_API_VERSION_INTERNAL so both the plain and the _ptds/_ptsz runtime
// entry points are declared, and each definition is checked against them.

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace {

constexpr int kRuntimeVersion = 13000;
constexpr int kMaxDevices = 8;

// Driver entry points; [0] legacy default stream, [1] per-thread default stream.
template <typename F>
using Pair = F[2];

struct Driver {
  decltype(&cuGetProcAddress_v2) GetProcAddress = nullptr;
  decltype(&cuGetProcAddress) GetProcAddressV1 = nullptr;
  decltype(&cuInit) Init = nullptr;
  decltype(&cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&cuDeviceGet) DeviceGet = nullptr;
  decltype(&cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&cuDeviceTotalMem_v2) DeviceTotalMem = nullptr;
  decltype(&cuDeviceCanAccessPeer) DeviceCanAccessPeer = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) PrimaryCtxRetain = nullptr;
  decltype(&cuDevicePrimaryCtxReset_v2) PrimaryCtxReset = nullptr;
  decltype(&cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&cuCtxEnablePeerAccess) CtxEnablePeerAccess = nullptr;
  decltype(&cuMemAlloc_v2) MemAlloc = nullptr;
  decltype(&cuMemAllocPitch_v2) MemAllocPitch = nullptr;
  decltype(&cuMemFree_v2) MemFree = nullptr;
  decltype(&cuMemAllocManaged) MemAllocManaged = nullptr;
  Pair<decltype(&cuMemAllocAsync)> MemAllocAsync{};
  Pair<decltype(&cuMemFreeAsync)> MemFreeAsync{};
  decltype(&cuMemHostAlloc) MemHostAlloc = nullptr;
  decltype(&cuMemFreeHost) MemFreeHost = nullptr;
  decltype(&cuMemHostRegister_v2) MemHostRegister = nullptr;
  decltype(&cuMemHostUnregister) MemHostUnregister = nullptr;
  decltype(&cuMemHostGetDevicePointer_v2) MemHostGetDevicePointer = nullptr;
  decltype(&cuMemGetInfo_v2) MemGetInfo = nullptr;
  decltype(&cuPointerGetAttributes) PointerGetAttributes = nullptr;
  Pair<decltype(&cuMemcpy)> Memcpy{};
  Pair<decltype(&cuMemcpyAsync)> MemcpyAsync{};
  Pair<decltype(&cuMemcpyHtoD_v2)> MemcpyHtoD{};
  Pair<decltype(&cuMemcpyDtoH_v2)> MemcpyDtoH{};
  Pair<decltype(&cuMemcpyDtoD_v2)> MemcpyDtoD{};
  Pair<decltype(&cuMemcpyHtoDAsync_v2)> MemcpyHtoDAsync{};
  Pair<decltype(&cuMemcpyDtoHAsync_v2)> MemcpyDtoHAsync{};
  Pair<decltype(&cuMemcpyDtoDAsync_v2)> MemcpyDtoDAsync{};
  Pair<decltype(&cuMemcpy2D_v2)> Memcpy2D{};
  Pair<decltype(&cuMemcpy2DAsync_v2)> Memcpy2DAsync{};
  Pair<decltype(&cuMemcpy3D_v2)> Memcpy3D{};
  Pair<decltype(&cuMemcpy3DAsync_v2)> Memcpy3DAsync{};
  Pair<decltype(&cuMemcpyPeer)> MemcpyPeer{};
  Pair<decltype(&cuMemcpyPeerAsync)> MemcpyPeerAsync{};
  Pair<decltype(&cuMemsetD8_v2)> MemsetD8{};
  Pair<decltype(&cuMemsetD8Async)> MemsetD8Async{};
  Pair<decltype(&cuMemsetD2D8_v2)> MemsetD2D8{};
  Pair<decltype(&cuMemsetD2D8Async)> MemsetD2D8Async{};
  decltype(&cuStreamCreate) StreamCreate = nullptr;
  decltype(&cuStreamDestroy_v2) StreamDestroy = nullptr;
  Pair<decltype(&cuStreamSynchronize)> StreamSynchronize{};
  Pair<decltype(&cuStreamQuery)> StreamQuery{};
  Pair<decltype(&cuStreamWaitEvent)> StreamWaitEvent{};
  decltype(&cuEventCreate) EventCreate = nullptr;
  Pair<decltype(&cuEventRecord)> EventRecord{};
  decltype(&cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&cuEventQuery) EventQuery = nullptr;
  decltype(&cuEventElapsedTime_v2) EventElapsedTime = nullptr;
  decltype(&cuEventDestroy_v2) EventDestroy = nullptr;
  Pair<decltype(&cuLaunchHostFunc)> LaunchHostFunc{};
  decltype(&cuProfilerStart) ProfilerStart = nullptr;
  decltype(&cuProfilerStop) ProfilerStop = nullptr;
};

Driver g_drv;
cudaError_t g_init_error = cudaSuccess;
std::once_flag g_init_once;
int g_device_count = 0;

struct DeviceCtx {
  std::once_flag retained;
  CUcontext ctx = nullptr;
  CUresult retain_error = CUDA_SUCCESS;
};
DeviceCtx* g_devices = new DeviceCtx[kMaxDevices];  // leaked: used from atexit handlers
std::mutex g_reset_mu;

thread_local int t_device = 0;
thread_local CUcontext t_bound = nullptr;  // the context this thread last made current
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t to_cuda_error(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED: return cudaErrorCudartUnloading;
    case CUDA_ERROR_STUB_LIBRARY: return cudaErrorStubLibrary;
    case CUDA_ERROR_NO_DEVICE: return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT: return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_ALREADY_MAPPED: return cudaErrorAlreadyMapped;
    case CUDA_ERROR_NOT_MAPPED: return cudaErrorNotMapped;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return cudaErrorPeerAccessUnsupported;
    case CUDA_ERROR_OPERATING_SYSTEM: return cudaErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE: return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND: return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_READY: return cudaErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return cudaErrorIllegalAddress;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return cudaErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return cudaErrorPeerAccessNotEnabled;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return cudaErrorContextIsDestroyed;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return cudaErrorHostMemoryNotRegistered;
    case CUDA_ERROR_NOT_SUPPORTED: return cudaErrorNotSupported;
    default: return cudaErrorUnknown;
  }
}

// Records an error as the thread's last error (as cudart does) and returns it.
cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) t_last_error = e;
  return e;
}
cudaError_t ret(CUresult r) { return ret(to_cuda_error(r)); }

template <typename F>
bool fetch(const char* name, F& slot, int version, cuuint64_t flags) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (g_drv.GetProcAddress(name, &p, version, flags, &status) != CUDA_SUCCESS || !p) {
    std::fprintf(stderr, "simcuda runtime: driver has no entry point %s (status %d)\n", name, static_cast<int>(status));
    return false;
  }
  slot = reinterpret_cast<F>(p);
  return true;
}
template <typename F>
bool fetch(const char* name, F& slot) {
  return fetch(name, slot, kRuntimeVersion, CU_GET_PROC_ADDRESS_DEFAULT);
}
template <typename F>
bool fetch(const char* name, Pair<F>& slots) {
  return fetch(name, slots[0], kRuntimeVersion, CU_GET_PROC_ADDRESS_DEFAULT) &&
         fetch(name, slots[1], kRuntimeVersion, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
}

cudaError_t load_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return cudaErrorInsufficientDriver;
  auto gpa = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(h, "cuGetProcAddress_v2"));
  if (!gpa) return cudaErrorInsufficientDriver;
  // The self-lookup: whatever the driver (or a library interposing on it)
  // answers for "cuGetProcAddress" is what every later lookup goes through.
  void* p = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (gpa("cuGetProcAddress", &p, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS)
    g_drv.GetProcAddressV1 = reinterpret_cast<decltype(&cuGetProcAddress)>(p);
  p = nullptr;
  if (gpa("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p)
    return cudaErrorInsufficientDriver;
  g_drv.GetProcAddress = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(p);

  Driver& d = g_drv;
  bool ok = fetch("cuInit", d.Init) && fetch("cuDriverGetVersion", d.DriverGetVersion) &&
            fetch("cuDeviceGetCount", d.DeviceGetCount) && fetch("cuDeviceGet", d.DeviceGet) &&
            fetch("cuDeviceGetName", d.DeviceGetName) && fetch("cuDeviceGetAttribute", d.DeviceGetAttribute) &&
            fetch("cuDeviceTotalMem", d.DeviceTotalMem) && fetch("cuDeviceCanAccessPeer", d.DeviceCanAccessPeer) &&
            fetch("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain) &&
            fetch("cuDevicePrimaryCtxReset", d.PrimaryCtxReset) && fetch("cuCtxSetCurrent", d.CtxSetCurrent) &&
            fetch("cuCtxGetCurrent", d.CtxGetCurrent) && fetch("cuCtxSynchronize", d.CtxSynchronize) &&
            fetch("cuCtxEnablePeerAccess", d.CtxEnablePeerAccess) && fetch("cuMemAlloc", d.MemAlloc) &&
            fetch("cuMemAllocPitch", d.MemAllocPitch) && fetch("cuMemFree", d.MemFree) &&
            fetch("cuMemAllocManaged", d.MemAllocManaged) && fetch("cuMemAllocAsync", d.MemAllocAsync) &&
            fetch("cuMemFreeAsync", d.MemFreeAsync) && fetch("cuMemHostAlloc", d.MemHostAlloc) &&
            fetch("cuMemFreeHost", d.MemFreeHost) && fetch("cuMemHostRegister", d.MemHostRegister) &&
            fetch("cuMemHostUnregister", d.MemHostUnregister) &&
            fetch("cuMemHostGetDevicePointer", d.MemHostGetDevicePointer) && fetch("cuMemGetInfo", d.MemGetInfo) &&
            fetch("cuPointerGetAttributes", d.PointerGetAttributes) && fetch("cuMemcpy", d.Memcpy) &&
            fetch("cuMemcpyAsync", d.MemcpyAsync) && fetch("cuMemcpyHtoD", d.MemcpyHtoD) &&
            fetch("cuMemcpyDtoH", d.MemcpyDtoH) && fetch("cuMemcpyDtoD", d.MemcpyDtoD) &&
            fetch("cuMemcpyHtoDAsync", d.MemcpyHtoDAsync) && fetch("cuMemcpyDtoHAsync", d.MemcpyDtoHAsync) &&
            fetch("cuMemcpyDtoDAsync", d.MemcpyDtoDAsync) && fetch("cuMemcpy2D", d.Memcpy2D) &&
            fetch("cuMemcpy2DAsync", d.Memcpy2DAsync) && fetch("cuMemcpy3D", d.Memcpy3D) &&
            fetch("cuMemcpy3DAsync", d.Memcpy3DAsync) && fetch("cuMemcpyPeer", d.MemcpyPeer) &&
            fetch("cuMemcpyPeerAsync", d.MemcpyPeerAsync) && fetch("cuMemsetD8", d.MemsetD8) &&
            fetch("cuMemsetD8Async", d.MemsetD8Async) && fetch("cuMemsetD2D8", d.MemsetD2D8) &&
            fetch("cuMemsetD2D8Async", d.MemsetD2D8Async) && fetch("cuStreamCreate", d.StreamCreate) &&
            fetch("cuStreamDestroy", d.StreamDestroy) && fetch("cuStreamSynchronize", d.StreamSynchronize) &&
            fetch("cuStreamQuery", d.StreamQuery) && fetch("cuStreamWaitEvent", d.StreamWaitEvent) &&
            fetch("cuEventCreate", d.EventCreate) && fetch("cuEventRecord", d.EventRecord) &&
            fetch("cuEventSynchronize", d.EventSynchronize) && fetch("cuEventQuery", d.EventQuery) &&
            fetch("cuEventElapsedTime", d.EventElapsedTime) && fetch("cuEventDestroy", d.EventDestroy) &&
            fetch("cuLaunchHostFunc", d.LaunchHostFunc) && fetch("cuProfilerStart", d.ProfilerStart) &&
            fetch("cuProfilerStop", d.ProfilerStop);
  if (!ok) return cudaErrorInsufficientDriver;
  if (CUresult r = d.Init(0); r != CUDA_SUCCESS) return r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : to_cuda_error(r);
  if (d.DeviceGetCount(&g_device_count) != CUDA_SUCCESS || g_device_count <= 0) return cudaErrorNoDevice;
  if (g_device_count > kMaxDevices) g_device_count = kMaxDevices;
  return cudaSuccess;
}

cudaError_t ensure_init() {
  std::call_once(g_init_once, [] { g_init_error = load_driver(); });
  return g_init_error;
}

// Makes the primary context of the thread's device current, as cudart does
// lazily on the first call that needs a context.
cudaError_t ensure_ctx() {
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return e;
  DeviceCtx& dc = g_devices[t_device];
  std::call_once(dc.retained, [&] {
    CUdevice dev = 0;
    dc.retain_error = g_drv.DeviceGet(&dev, t_device);
    if (dc.retain_error == CUDA_SUCCESS) dc.retain_error = g_drv.PrimaryCtxRetain(&dc.ctx, dev);
  });
  if (dc.retain_error != CUDA_SUCCESS) return to_cuda_error(dc.retain_error);
  if (t_bound != dc.ctx) {
    if (CUresult r = g_drv.CtxSetCurrent(dc.ctx); r != CUDA_SUCCESS) return to_cuda_error(r);
    t_bound = dc.ctx;
  }
  return cudaSuccess;
}

#define RT_CTX()                                         \
  do {                                                   \
    if (cudaError_t e_ = ensure_ctx(); e_ != cudaSuccess) \
      return ret(e_);                                    \
  } while (0)

CUdeviceptr dp(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
CUstream st(cudaStream_t s) { return reinterpret_cast<CUstream>(s); }

// --- copies, shared by the legacy (pt=0) and per-thread (pt=1) entry points --
cudaError_t memcpy_impl(int pt, void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  RT_CTX();
  switch (kind) {
    case cudaMemcpyHostToDevice: return ret(g_drv.MemcpyHtoD[pt](dp(dst), src, n));
    case cudaMemcpyDeviceToHost: return ret(g_drv.MemcpyDtoH[pt](dst, dp(src), n));
    case cudaMemcpyDeviceToDevice: return ret(g_drv.MemcpyDtoD[pt](dp(dst), dp(src), n));
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: return ret(g_drv.Memcpy[pt](dp(dst), dp(src), n));
    default: return ret(cudaErrorInvalidMemcpyDirection);
  }
}

cudaError_t memcpy_async_impl(int pt, void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  RT_CTX();
  switch (kind) {
    case cudaMemcpyHostToDevice: return ret(g_drv.MemcpyHtoDAsync[pt](dp(dst), src, n, st(s)));
    case cudaMemcpyDeviceToHost: return ret(g_drv.MemcpyDtoHAsync[pt](dst, dp(src), n, st(s)));
    case cudaMemcpyDeviceToDevice: return ret(g_drv.MemcpyDtoDAsync[pt](dp(dst), dp(src), n, st(s)));
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: return ret(g_drv.MemcpyAsync[pt](dp(dst), dp(src), n, st(s)));
    default: return ret(cudaErrorInvalidMemcpyDirection);
  }
}

// Memory types of the two sides of a runtime copy, as the driver descriptor wants them.
bool kind_sides(cudaMemcpyKind kind, CUmemorytype* src, CUmemorytype* dst) {
  switch (kind) {
    case cudaMemcpyHostToHost: *src = CU_MEMORYTYPE_HOST; *dst = CU_MEMORYTYPE_HOST; return true;
    case cudaMemcpyHostToDevice: *src = CU_MEMORYTYPE_HOST; *dst = CU_MEMORYTYPE_DEVICE; return true;
    case cudaMemcpyDeviceToHost: *src = CU_MEMORYTYPE_DEVICE; *dst = CU_MEMORYTYPE_HOST; return true;
    case cudaMemcpyDeviceToDevice: *src = CU_MEMORYTYPE_DEVICE; *dst = CU_MEMORYTYPE_DEVICE; return true;
    case cudaMemcpyDefault: *src = CU_MEMORYTYPE_UNIFIED; *dst = CU_MEMORYTYPE_UNIFIED; return true;
    default: return false;
  }
}

void set_side(CUmemorytype t, const void* p, CUmemorytype& type, const void*& host, CUdeviceptr& dev) {
  type = t;
  if (t == CU_MEMORYTYPE_HOST)
    host = p;
  else
    dev = dp(p);
}

bool make_2d(CUDA_MEMCPY2D& c, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
             size_t height, cudaMemcpyKind kind) {
  CUmemorytype s, d;
  if (!kind_sides(kind, &s, &d)) return false;
  std::memset(&c, 0, sizeof c);
  set_side(s, src, c.srcMemoryType, c.srcHost, c.srcDevice);
  const void* dh = nullptr;
  set_side(d, dst, c.dstMemoryType, dh, c.dstDevice);
  c.dstHost = const_cast<void*>(dh);
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return true;
}

cudaError_t memcpy2d_impl(int pt, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t height, cudaMemcpyKind kind, cudaStream_t s, bool async) {
  RT_CTX();
  if (width > dpitch || width > spitch) return ret(cudaErrorInvalidPitchValue);
  CUDA_MEMCPY2D c;
  if (!make_2d(c, dst, dpitch, src, spitch, width, height, kind)) return ret(cudaErrorInvalidMemcpyDirection);
  return ret(async ? g_drv.Memcpy2DAsync[pt](&c, st(s)) : g_drv.Memcpy2D[pt](&c));
}

cudaError_t memcpy3d_impl(int pt, const cudaMemcpy3DParms* p, cudaStream_t s, bool async) {
  RT_CTX();
  if (!p) return ret(cudaErrorInvalidValue);
  if (p->srcArray || p->dstArray) return ret(cudaErrorNotSupported);  // arrays are not simulated
  CUmemorytype sk, dk;
  if (!kind_sides(p->kind, &sk, &dk)) return ret(cudaErrorInvalidMemcpyDirection);
  CUDA_MEMCPY3D c;
  std::memset(&c, 0, sizeof c);
  set_side(sk, p->srcPtr.ptr, c.srcMemoryType, c.srcHost, c.srcDevice);
  const void* dh = nullptr;
  set_side(dk, p->dstPtr.ptr, c.dstMemoryType, dh, c.dstDevice);
  c.dstHost = const_cast<void*>(dh);
  c.srcXInBytes = p->srcPos.x;
  c.srcY = p->srcPos.y;
  c.srcZ = p->srcPos.z;
  c.srcPitch = p->srcPtr.pitch;
  c.srcHeight = p->srcPtr.ysize;
  c.dstXInBytes = p->dstPos.x;
  c.dstY = p->dstPos.y;
  c.dstZ = p->dstPos.z;
  c.dstPitch = p->dstPtr.pitch;
  c.dstHeight = p->dstPtr.ysize;
  c.WidthInBytes = p->extent.width;
  c.Height = p->extent.height;
  c.Depth = p->extent.depth;
  return ret(async ? g_drv.Memcpy3DAsync[pt](&c, st(s)) : g_drv.Memcpy3D[pt](&c));
}

cudaError_t device_ctx(int device, CUcontext* out) {
  if (device < 0 || device >= g_device_count) return cudaErrorInvalidDevice;
  int saved = t_device;
  t_device = device;
  cudaError_t e = ensure_ctx();  // retains the device's primary context
  t_device = saved;
  if (e != cudaSuccess) return e;
  *out = g_devices[device].ctx;
  return ensure_ctx();  // and back to the caller's device
}

cudaError_t memcpy_peer_impl(int pt, void* dst, int dstDevice, const void* src, int srcDevice, size_t n,
                             cudaStream_t s, bool async) {
  RT_CTX();
  CUcontext dc = nullptr, sc = nullptr;
  if (cudaError_t e = device_ctx(dstDevice, &dc); e != cudaSuccess) return ret(e);
  if (cudaError_t e = device_ctx(srcDevice, &sc); e != cudaSuccess) return ret(e);
  return ret(async ? g_drv.MemcpyPeerAsync[pt](dp(dst), dc, dp(src), sc, n, st(s))
                   : g_drv.MemcpyPeer[pt](dp(dst), dc, dp(src), sc, n));
}

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorStubLibrary, "cudaErrorStubLibrary", "CUDA driver is a stub library"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorAlreadyMapped, "cudaErrorAlreadyMapped", "resource already mapped"},
    {cudaErrorNotMapped, "cudaErrorNotMapped", "resource not mapped"},
    {cudaErrorPeerAccessUnsupported, "cudaErrorPeerAccessUnsupported",
     "peer access is not supported between these two devices"},
    {cudaErrorOperatingSystem, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorPeerAccessNotEnabled, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {cudaErrorContextIsDestroyed, "cudaErrorContextIsDestroyed", "context is destroyed"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

}  // namespace

extern "C" {

// --- errors, versions ----------------------------------------------------------
cudaError_t CUDARTAPI cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return t_last_error; }

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  for (const auto& e : kErrors)
    if (e.code == error) return e.text;
  return "unrecognized error code";
}
const char* CUDARTAPI cudaGetErrorName(cudaError_t error) {
  for (const auto& e : kErrors)
    if (e.code == error) return e.name;
  return "cudaErrorUnknown";
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* v) {
  if (!v) return ret(cudaErrorInvalidValue);
  *v = kRuntimeVersion;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDriverGetVersion(int* v) {
  if (!v) return ret(cudaErrorInvalidValue);
  *v = 0;  // no driver: 0, as the real cudart reports
  if (ensure_init() == cudaErrorInsufficientDriver) return cudaSuccess;
  if (!g_drv.DriverGetVersion) return cudaSuccess;
  return ret(g_drv.DriverGetVersion(v));
}

// --- devices -----------------------------------------------------------------------
cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  if (!count) return ret(cudaErrorInvalidValue);
  *count = 0;
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  *count = g_device_count;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  if (device < 0 || device >= g_device_count) return ret(cudaErrorInvalidDevice);
  t_device = device;
  RT_CTX();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  if (!device) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  *device = t_device;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return ret(cudaErrorInvalidValue);
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  if (device < 0 || device >= g_device_count) return ret(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  CUdevice dev = 0;
  g_drv.DeviceGet(&dev, device);
  g_drv.DeviceGetName(prop->name, sizeof prop->name, dev);
  g_drv.DeviceTotalMem(&prop->totalGlobalMem, dev);
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    g_drv.DeviceGetAttribute(&v, a, dev);
    return v;
  };
  prop->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  prop->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  prop->multiProcessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  prop->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  prop->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  prop->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  prop->managedMemory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  prop->asyncEngineCount = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  prop->pageableMemoryAccess = attr(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
  prop->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  return ret(g_drv.DeviceCanAccessPeer(canAccessPeer, device, peerDevice));
}

cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  RT_CTX();
  CUcontext pc = nullptr;
  if (cudaError_t e = device_ctx(peerDevice, &pc); e != cudaSuccess) return ret(e);
  return ret(g_drv.CtxEnablePeerAccess(pc, flags));
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  RT_CTX();
  return ret(g_drv.CtxSynchronize());
}

cudaError_t CUDARTAPI cudaDeviceReset(void) {
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  std::lock_guard lk(g_reset_mu);
  CUdevice dev = 0;
  g_drv.DeviceGet(&dev, t_device);
  CUresult r = g_drv.PrimaryCtxReset(dev);
  // The next call re-retains the primary context. Other threads that had it
  // bound keep a stale binding, as with the real runtime after a reset.
  DeviceCtx* fresh = &g_devices[t_device];
  fresh->~DeviceCtx();
  new (fresh) DeviceCtx();
  t_bound = nullptr;
  return ret(r);
}

// As cudart: through the driver's entry-point table.
cudaError_t CUDARTAPI cudaProfilerStart(void) {
  RT_CTX();
  return ret(g_drv.ProfilerStart());
}

cudaError_t CUDARTAPI cudaProfilerStop(void) {
  RT_CTX();
  return ret(g_drv.ProfilerStop());
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) {
  RT_CTX();
  return ret(g_drv.MemGetInfo(free, total));
}

// --- allocation -------------------------------------------------------------------------
cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  RT_CTX();
  *devPtr = nullptr;
  if (size == 0) return cudaSuccess;
  CUdeviceptr p = 0;
  CUresult r = g_drv.MemAlloc(&p, size);
  if (r == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
  return ret(r);
}

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  RT_CTX();  // cudaFree(0) is the usual way to initialise the runtime
  if (!devPtr) return cudaSuccess;
  return ret(g_drv.MemFree(dp(devPtr)));
}

cudaError_t CUDARTAPI cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  if (!devPtr || !pitch) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUdeviceptr p = 0;
  CUresult r = g_drv.MemAllocPitch(&p, pitch, width, height, 4);
  if (r == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
  return ret(r);
}

cudaError_t CUDARTAPI cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUdeviceptr p = 0;
  CUresult r = g_drv.MemAllocManaged(&p, size, flags);
  if (r == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
  return ret(r);
}

static cudaError_t malloc_async(int pt, void** devPtr, size_t size, cudaStream_t s) {
  if (!devPtr) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUdeviceptr p = 0;
  CUresult r = g_drv.MemAllocAsync[pt](&p, size, st(s));
  if (r == CUDA_SUCCESS) *devPtr = reinterpret_cast<void*>(p);
  return ret(r);
}
cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t s) {
  return malloc_async(0, devPtr, size, s);
}
cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void** devPtr, size_t size, cudaStream_t s) {
  return malloc_async(1, devPtr, size, s);
}
cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.MemFreeAsync[0](dp(devPtr), st(s)));
}
cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void* devPtr, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.MemFreeAsync[1](dp(devPtr), st(s)));
}

cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  if (!pHost) return ret(cudaErrorInvalidValue);
  RT_CTX();
  // cudaHostAlloc* flag bits equal CU_MEMHOSTALLOC_* bits.
  return ret(g_drv.MemHostAlloc(pHost, size, flags));
}
cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  RT_CTX();
  if (!ptr) return cudaSuccess;
  return ret(g_drv.MemFreeHost(ptr));
}

cudaError_t CUDARTAPI cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  RT_CTX();
  // cudaHostRegister* flag bits equal CU_MEMHOSTREGISTER_* bits.
  return ret(g_drv.MemHostRegister(ptr, size, flags));
}

cudaError_t CUDARTAPI cudaHostUnregister(void* ptr) {
  RT_CTX();
  return ret(g_drv.MemHostUnregister(ptr));
}

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  if (!pDevice) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUdeviceptr p = 0;
  CUresult r = g_drv.MemHostGetDevicePointer(&p, pHost, flags);
  if (r == CUDA_SUCCESS) *pDevice = reinterpret_cast<void*>(p);
  return ret(r);
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (!attributes) return ret(cudaErrorInvalidValue);
  RT_CTX();
  unsigned mem_type = 0;
  int is_managed = 0, ordinal = -2;
  CUdeviceptr devp = 0;
  void* hostp = nullptr;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  void* data[] = {&mem_type, &is_managed, &ordinal, &devp, &hostp};
  CUresult r = g_drv.PointerGetAttributes(5, attrs, data, dp(ptr));
  if (r != CUDA_SUCCESS) return ret(r);
  std::memset(attributes, 0, sizeof *attributes);
  if (mem_type == 0) {
    // Memory CUDA does not know: success, "unregistered" (CUDA >= 11 behaviour).
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    return cudaSuccess;
  }
  attributes->type = is_managed                           ? cudaMemoryTypeManaged
                     : mem_type == CU_MEMORYTYPE_HOST     ? cudaMemoryTypeHost
                                                          : cudaMemoryTypeDevice;
  attributes->device = ordinal;
  attributes->devicePointer = reinterpret_cast<void*>(devp);
  attributes->hostPointer = hostp;
  return cudaSuccess;
}

// --- copies ------------------------------------------------------------------------------------
cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return memcpy_impl(0, dst, src, count, kind);
}
cudaError_t CUDARTAPI cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return memcpy_impl(1, dst, src, count, kind);
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                      cudaStream_t s) {
  return memcpy_async_impl(0, dst, src, count, kind, s);
}
cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                           cudaStream_t s) {
  return memcpy_async_impl(1, dst, src, count, kind, s);
}
cudaError_t CUDARTAPI cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                   size_t height, cudaMemcpyKind kind) {
  return memcpy2d_impl(0, dst, dpitch, src, spitch, width, height, kind, nullptr, false);
}
cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                        size_t height, cudaMemcpyKind kind) {
  return memcpy2d_impl(1, dst, dpitch, src, spitch, width, height, kind, nullptr, false);
}
cudaError_t CUDARTAPI cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                        size_t height, cudaMemcpyKind kind, cudaStream_t s) {
  return memcpy2d_impl(0, dst, dpitch, src, spitch, width, height, kind, s, true);
}
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch,
                                             size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t s) {
  return memcpy2d_impl(1, dst, dpitch, src, spitch, width, height, kind, s, true);
}
cudaError_t CUDARTAPI cudaMemcpy3D(const cudaMemcpy3DParms* p) { return memcpy3d_impl(0, p, nullptr, false); }
cudaError_t CUDARTAPI cudaMemcpy3D_ptds(const cudaMemcpy3DParms* p) { return memcpy3d_impl(1, p, nullptr, false); }
cudaError_t CUDARTAPI cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t s) {
  return memcpy3d_impl(0, p, s, true);
}
cudaError_t CUDARTAPI cudaMemcpy3DAsync_ptsz(const cudaMemcpy3DParms* p, cudaStream_t s) {
  return memcpy3d_impl(1, p, s, true);
}
cudaError_t CUDARTAPI cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  return memcpy_peer_impl(0, dst, dstDevice, src, srcDevice, count, nullptr, false);
}
cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                          cudaStream_t s) {
  return memcpy_peer_impl(0, dst, dstDevice, src, srcDevice, count, s, true);
}

// --- memsets -------------------------------------------------------------------------------------
cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  RT_CTX();
  return ret(g_drv.MemsetD8[0](dp(devPtr), static_cast<unsigned char>(value), count));
}
cudaError_t CUDARTAPI cudaMemset_ptds(void* devPtr, int value, size_t count) {
  RT_CTX();
  return ret(g_drv.MemsetD8[1](dp(devPtr), static_cast<unsigned char>(value), count));
}
cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.MemsetD8Async[0](dp(devPtr), static_cast<unsigned char>(value), count, st(s)));
}
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void* devPtr, int value, size_t count, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.MemsetD8Async[1](dp(devPtr), static_cast<unsigned char>(value), count, st(s)));
}
cudaError_t CUDARTAPI cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  RT_CTX();
  return ret(g_drv.MemsetD2D8[0](dp(devPtr), pitch, static_cast<unsigned char>(value), width, height));
}
cudaError_t CUDARTAPI cudaMemset2D_ptds(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  RT_CTX();
  return ret(g_drv.MemsetD2D8[1](dp(devPtr), pitch, static_cast<unsigned char>(value), width, height));
}
cudaError_t CUDARTAPI cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height,
                                        cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.MemsetD2D8Async[0](dp(devPtr), pitch, static_cast<unsigned char>(value), width, height, st(s)));
}

// --- streams and events -------------------------------------------------------------------------
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (!pStream) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUstream s = nullptr;
  CUresult r = g_drv.StreamCreate(&s, flags);  // cudaStreamNonBlocking == CU_STREAM_NON_BLOCKING
  if (r == CUDA_SUCCESS) *pStream = reinterpret_cast<cudaStream_t>(s);
  return ret(r);
}
cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.StreamDestroy(st(s)));
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.StreamSynchronize[0](st(s)));
}
cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.StreamSynchronize[1](st(s)));
}
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.StreamQuery[0](st(s)));
}
cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.StreamQuery[1](st(s)));
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  RT_CTX();
  return ret(g_drv.StreamWaitEvent[0](st(s), reinterpret_cast<CUevent>(e), flags));
}
cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  RT_CTX();
  return ret(g_drv.StreamWaitEvent[1](st(s), reinterpret_cast<CUevent>(e), flags));
}
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* userData) {
  RT_CTX();
  return ret(g_drv.LaunchHostFunc[0](st(s), fn, userData));
}
cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* userData) {
  RT_CTX();
  return ret(g_drv.LaunchHostFunc[1](st(s), fn, userData));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event) return ret(cudaErrorInvalidValue);
  RT_CTX();
  CUevent e = nullptr;
  // cudaEventBlockingSync/DisableTiming/Interprocess equal the CU_EVENT_* bits.
  CUresult r = g_drv.EventCreate(&e, flags);
  if (r == CUDA_SUCCESS) *event = reinterpret_cast<cudaEvent_t>(e);
  return ret(r);
}
cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.EventRecord[0](reinterpret_cast<CUevent>(e), st(s)));
}
cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) {
  RT_CTX();
  return ret(g_drv.EventRecord[1](reinterpret_cast<CUevent>(e), st(s)));
}
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t e) {
  RT_CTX();
  return ret(g_drv.EventSynchronize(reinterpret_cast<CUevent>(e)));
}
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t e) {
  RT_CTX();
  return ret(g_drv.EventQuery(reinterpret_cast<CUevent>(e)));
}
cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  RT_CTX();
  return ret(g_drv.EventElapsedTime(ms, reinterpret_cast<CUevent>(start), reinterpret_cast<CUevent>(end)));
}
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e) {
  RT_CTX();
  return ret(g_drv.EventDestroy(reinterpret_cast<CUevent>(e)));
}

// --- driver entry points (what PyTorch uses to reach cuMemCreate & co.) ------------------------
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       cudaDriverEntryPointQueryResult* driverStatus) {
  if (cudaError_t e = ensure_init(); e != cudaSuccess) return ret(e);
  CUdriverProcAddressQueryResult status{};
  // cudaEnable* flag bits equal CU_GET_PROC_ADDRESS_* bits.
  CUresult r = g_drv.GetProcAddress(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &status);
  if (driverStatus) *driverStatus = static_cast<cudaDriverEntryPointQueryResult>(status);
  return r == CUDA_ERROR_NOT_FOUND ? cudaSuccess : ret(r);  // not found is reported through driverStatus
}
cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                              cudaDriverEntryPointQueryResult* driverStatus) {
  return cudaGetDriverEntryPointByVersion(symbol, funcPtr, kRuntimeVersion, flags, driverStatus);
}

}  // extern "C"
