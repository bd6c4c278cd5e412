// probe_cupti_first: where CUPTI's cost on a process's first copy lands, and
// whether anything done before it moves it out. Our own code, no cuxfer.
// One process per mode: a context, then 4 MiB pinned and device buffers, then
// the first COPIES synchronous 4 MiB H2D copies, each timed with the CPU clock.
//
//   probe_cupti_first MODE [COPIES=4]
// MODE: none | enable (cuptiActivityEnable(MEMCPY) after the context) |
// enable_warm (the same, then one 4-byte copy between two pinned buffers of
// the shim's own, untimed) | enable_flush (enable, then cuptiActivityFlushAll) |
// enable_before (enabled before the context exists) | enable_warm_d2d (the
// warm-up a device-to-device 4-byte copy)
// Prints "MODE setup_us=<enable + warm-up> copy_us=<c1>,<c2>,..."; `devtools/gpu.sh cupti-first` builds
// and runs it (docs/benchmarks.md, "Programs not written for cuxfer").
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { std::printf("FAIL %s: %s\n", #x, cudaGetErrorName(e_)); std::exit(1); } } while (0)
#define CP(x) do { CUptiResult r_ = (x); if (r_) { std::printf("FAIL %s: %d\n", #x, int(r_)); std::exit(1); } } while (0)

static void CUPTIAPI requested(uint8_t** buf, size_t* size, size_t* max) {
  *size = 8u << 20;
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max = 0;
}
static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t) { std::free(buf); }

static void enable() {
  CP(cuptiActivityRegisterCallbacks(requested, completed));
  CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  const int copies = argc > 2 ? std::atoi(argv[2]) : 4;
  int n = 0;
  if (mode == "enable_before") enable();
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::puts("no GPU"); return 77; }
  CK(cudaFree(nullptr));
  const size_t size = 4u << 20;
  void *h = nullptr, *d = nullptr;
  CK(cudaMallocHost(&h, size));
  CK(cudaMalloc(&d, size));
  const double s0 = now_us();
  if (mode.rfind("enable", 0) == 0 && mode != "enable_before") enable();
  if (mode == "enable_warm") {
    void *a = nullptr, *b = nullptr;
    CK(cudaMallocHost(&a, 64));
    CK(cudaMalloc(&b, 64));
    CK(cudaMemcpy(b, a, 4, cudaMemcpyHostToDevice));
  }
  if (mode == "enable_warm_d2d") {
    void *a = nullptr, *b = nullptr;
    CK(cudaMalloc(&a, 64));
    CK(cudaMalloc(&b, 64));
    CK(cudaMemcpy(b, a, 4, cudaMemcpyDeviceToDevice));
  }
  if (mode == "enable_flush") CP(cuptiActivityFlushAll(0));
  const double setup = now_us() - s0;
  std::printf("%s setup_us=%.1f copy_us=", mode.c_str(), setup);
  for (int i = 0; i < copies; ++i) {
    const double t0 = now_us();
    CK(cudaMemcpy(d, h, size, cudaMemcpyHostToDevice));
    std::printf("%s%.1f", i ? "," : "", now_us() - t0);
  }
  std::printf("\n");
  return 0;
}
