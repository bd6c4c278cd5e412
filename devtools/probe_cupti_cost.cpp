// probe_cupti_cost: what CUPTI's activity tracing adds to one synchronous copy,
// per CUPTI setting, without cuxfer. Our own code. Pinned (cudaMallocHost) and
// registered (malloc + cudaHostRegister) host buffers, H2D and D2H, sizes 4 B
// to 32 MiB; per cell the median of ITERS calls timed with the CPU clock
// around cudaMemcpy (the caller's view). `devtools/gpu.sh cupti-cost` builds and
// runs it.
//
//   probe_cupti_cost MODE [ITERS]
// MODE: none | memcpy | memcpy_memset | memcpy_ts (+ a timestamp callback, as
// the shim registers) | memcpy_hostbuf (records written to pinned host memory,
// not device memory) | memcpy_sharedbuf (one activity buffer, not per thread)
// | memcpy_flushperiod (periodic flush, 10 ms) | disabled (memcpy records on
// for a few copies, then cuptiActivityDisable: what CUPTI costs while the
// governor has them off) | finalized (the same, then cuptiFinalize: CUPTI
// detached)
// Then what CUPTI adds to the asynchronous calls a training step is made of
// (issued, not waited for; the stream is synchronized every 32 calls, outside
// the timing): an empty kernel's launch (cuLaunchKernel, the kernel JIT-built
// from PTX, no nvcc), a 4-byte cudaMemsetAsync and a 4-byte pinned
// cudaMemcpyAsync H2D, each on its own stream.
// Prints one line per cell: "MODE kind dir size median_us" (the launch's size: 0).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static uint64_t CUPTIAPI ts_now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + t.tv_nsec;
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { std::printf("FAIL %s: %s\n", #x, cudaGetErrorName(e_)); std::exit(1); } } while (0)
#define CP(x) do { CUptiResult r_ = (x); if (r_) { std::printf("FAIL %s: %d\n", #x, int(r_)); std::exit(1); } } while (0)

static size_t g_records = 0;
static void CUPTIAPI requested(uint8_t** buf, size_t* size, size_t* max) {
  *size = 8u << 20;
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max = 0;
}
static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) ++g_records;
  std::free(buf);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::puts("no GPU"); return 77; }
  CK(cudaFree(nullptr));
  if (mode != "none") {
    if (mode == "memcpy_ts") CP(cuptiActivityRegisterTimestampCallback(ts_now));
    if (mode == "memcpy_sharedbuf") {
      uint8_t v = 0;
      size_t sz = sizeof v;
      CP(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &sz, &v));
    }
    CP(cuptiActivityRegisterCallbacks(requested, completed));
    if (mode == "memcpy_hostbuf") {
      uint8_t v = 1;
      size_t sz = sizeof v;
      CP(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &sz, &v));
    }
    if (mode == "memcpy_nodevbuf") {
      uint8_t v = 0;
      size_t sz = sizeof v;
      CP(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &sz, &v));
    }
    CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    if (mode == "memcpy_memset") CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    if (mode == "memcpy_flushperiod") CP(cuptiActivityFlushPeriod(10));
  }
  if (mode == "disabled" || mode == "finalized") {
    void *dh = nullptr, *hh = nullptr;
    CK(cudaMalloc(&dh, 64));
    CK(cudaMallocHost(&hh, 64));
    for (int i = 0; i < 100; ++i) CK(cudaMemcpy(dh, hh, 4, cudaMemcpyHostToDevice));
    CP(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CP(cuptiActivityFlushAll(1));
    if (mode == "finalized") CP(cuptiFinalize());
    CK(cudaFree(dh));
    CK(cudaFreeHost(hh));
  }
  const size_t sizes[] = {4, 64u << 10, 1u << 20, 4u << 20, 32u << 20};
  const size_t kMax = 32u << 20;
  void* pinned = nullptr;
  CK(cudaMallocHost(&pinned, kMax));
  void* reg = std::aligned_alloc(4096, kMax);
  std::memset(reg, 1, kMax);
  std::memset(pinned, 1, kMax);
  CK(cudaHostRegister(reg, kMax, 0));
  void* d = nullptr;
  CK(cudaMalloc(&d, kMax));
  for (int kind = 0; kind < 2; ++kind)
    for (int dir = 0; dir < 2; ++dir)
      for (size_t size : sizes) {
        char* h = static_cast<char*>(kind ? reg : pinned);
        std::vector<double> t(iters);
        for (int i = 0; i < iters; ++i) {
          const double t0 = now_us();
          if (dir == 0) CK(cudaMemcpy(d, h, size, cudaMemcpyHostToDevice));
          else CK(cudaMemcpy(h, d, size, cudaMemcpyDeviceToHost));
          t[i] = now_us() - t0;
        }
        std::sort(t.begin(), t.end());
        std::printf("%s %s %s %zu %.2f\n", mode.c_str(), kind ? "registered" : "pinned", dir ? "D2H" : "H2D", size,
                    t[t.size() / 2]);
      }
  // The asynchronous calls.
  {
    static const char kPtx[] =
        ".version 7.0\n.target sm_50\n.address_size 64\n.visible .entry cuxfer_probe_empty()\n{\n ret;\n}\n";
    CUmodule module = nullptr;
    CUfunction empty = nullptr;
    const bool have_kernel = cuModuleLoadData(&module, kPtx) == CUDA_SUCCESS &&
                             cuModuleGetFunction(&empty, module, "cuxfer_probe_empty") == CUDA_SUCCESS;
    if (!have_kernel) std::printf("%s kernel launch 0 FAIL (PTX not loaded)\n", mode.c_str());
    cudaStream_t stream = nullptr;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto timed = [&](const char* kind, const char* dir, int size, auto&& call) {
      std::vector<double> t(iters);
      for (int i = 0; i < iters; ++i) {
        if (i % 32 == 0) CK(cudaStreamSynchronize(stream));
        const double t0 = now_us();
        call();
        t[i] = now_us() - t0;
      }
      CK(cudaStreamSynchronize(stream));
      std::sort(t.begin(), t.end());
      std::printf("%s %s %s %d %.2f\n", mode.c_str(), kind, dir, size, t[t.size() / 2]);
    };
    if (have_kernel)
      timed("kernel", "launch", 0, [&] {
        if (cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream), nullptr, nullptr) !=
            CUDA_SUCCESS) {
          std::printf("FAIL cuLaunchKernel\n");
          std::exit(1);
        }
      });
    timed("memset", "async", 4, [&] { CK(cudaMemsetAsync(d, 0, 4, stream)); });
    timed("pinned", "H2Dasync", 4, [&] { CK(cudaMemcpyAsync(d, pinned, 4, cudaMemcpyHostToDevice, stream)); });
    CK(cudaStreamDestroy(stream));
    if (module) cuModuleUnload(module);
  }
  if (mode != "none" && mode != "finalized") {
    CP(cuptiActivityFlushAll(1));
    std::printf("%s records %zu\n", mode.c_str(), g_records);
  }
  CK(cudaHostUnregister(reg));
  CK(cudaFreeHost(pinned));
  CK(cudaFree(d));
  std::free(reg);
  return 0;
}
