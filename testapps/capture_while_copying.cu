// capture_while_copying [SECONDS=2] [S=4M]   (GPU only; nvcc, static and shared cudart)
// One thread captures CUDA graphs in global mode while another copies
// pageable memory: under `cuxfer record --rewrite=pin` the shim registers
// and unregisters that memory on the copying thread (and its staging pool
// pins buffers on its own), and none of that may invalidate the capture.
//
//   capture thread: repeatedly cudaStreamBeginCapture(global) on a stream of
//     its own, a memset and a kernel into a device buffer, EndCapture (must
//     succeed), instantiate, launch, check the buffer.
//   copy thread: in relaxed capture mode (a thread in the default mode may
//     not even synchronize a stream while another thread captures in global
//     mode: CUDA refuses it, shim or not; measured on an H100, 5,809 of 6,108
//     rounds, docs/gpu-validation.md), on a non-blocking stream of its own,
//     rounds of H2D and D2H of S bytes from reused pageable buffers (the
//     rewrite registers them) and from fresh malloc'd ones freed after use
//     (unregistrations queued and drained), every byte checked. Relaxed mode
//     lifts the restriction from the shim's own calls on this thread too:
//     what is tested is that the capturing thread's hooks, and the
//     unregistrations this thread's frees leave to be drained there, never
//     invalidate its capture.
// Prints "capture_while_copying: captures=<n> copies=<m> OK" and exits 0;
// exits 1 on any CUDA error, a failed capture or wrong data.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common.h"

namespace {

__global__ void add_one(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1;
}

std::atomic<bool> g_stop{false};

int capture_loop(size_t n) {
  cudaStream_t s;
  TA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char* d = nullptr;
  TA_CHECK(cudaMalloc(&d, n));
  std::vector<unsigned char> host(n);
  int captures = 0;
  while (!g_stop.load()) {
    const int v = captures % 200;
    cudaGraph_t graph;
    TA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    TA_CHECK(cudaMemsetAsync(d, v, n, s));
    add_one<<<64, 256, 0, s>>>(d, n);
    // Hold the capture open a little, as a real capture of many nodes does,
    // so that the other thread's copies fall inside it.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    TA_CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    TA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    TA_CHECK(cudaGraphLaunch(exec, s));
    TA_CHECK(cudaStreamSynchronize(s));
    TA_CHECK(cudaMemcpy(host.data(), d, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += 4099) TA_ASSERT(host[i] == static_cast<unsigned char>(v + 1));
    TA_CHECK(cudaGraphExecDestroy(exec));
    TA_CHECK(cudaGraphDestroy(graph));
    ++captures;
  }
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaStreamDestroy(s));
  return captures;
}

void roundtrip(cudaStream_t s, unsigned char* d, unsigned char* src, unsigned char* dst, size_t n, uint32_t seed) {
  testapp::fill(src, n, seed);
  TA_CHECK(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
  TA_CHECK(cudaMemcpyAsync(dst, d, n, cudaMemcpyDeviceToHost, s));
  TA_CHECK(cudaStreamSynchronize(s));
  TA_ASSERT(std::memcmp(src, dst, n) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  testapp::require_gpu("capture_while_copying");
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const size_t n = testapp::arg_size(argc, argv, 2, 4 << 20);
  TA_CHECK(cudaFree(nullptr));  // the context, before the threads race for it
  int captures = 0;
  std::thread capturer([&] { captures = capture_loop(n); });
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  TA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  cudaStream_t s;
  TA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char* d = nullptr;
  TA_CHECK(cudaMalloc(&d, n));
  std::vector<unsigned char> src(n), dst(n);
  long copies = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (uint32_t round = 0; std::chrono::steady_clock::now() < end; ++round) {
    roundtrip(s, d, src.data(), dst.data(), n, round);  // reused: registered by the rewrite
    auto* a = static_cast<unsigned char*>(std::malloc(n));
    auto* b = static_cast<unsigned char*>(std::malloc(n));
    TA_ASSERT(a && b);
    roundtrip(s, d, a, b, n, round + 7);
    roundtrip(s, d, a, b, n, round + 8);  // twice: a registration that free() must drop
    std::free(a);
    std::free(b);
    copies += 6;
  }
  g_stop.store(true);
  capturer.join();
  TA_ASSERT(captures > 0);
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaStreamDestroy(s));
  std::printf("capture_while_copying: captures=%d copies=%ld OK\n", captures, copies);
  return 0;
}
