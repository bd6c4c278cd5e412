// zero_copy_primitives [STEPS=2000]   (GPU only; no shim)
// What the zero-copy path can gain at best on a small-parameter loop, and
// what each piece costs on this machine, measured side by side:
//   h2d_256_pageable   cudaMemcpy H2D of 256 B from pageable memory, GPU idle
//   stream_query       cudaStreamQuery(legacy), GPU idle (the shim's "nothing pending" test)
//   event_roundtrip    cudaEventRecord + cudaEventSynchronize on the legacy stream, GPU idle
//   memcpy_mapped_256  memcpy of 256 B into mapped pinned memory + fence
//   kernel_device / kernel_mapped   the zc_params kernel shape (64 x 256 threads, 1 Mi floats,
//                      parameters read once per block) with the parameters in device / mapped memory
//   step_device / step_zero_copy    a whole step: parameters up, kernel, 8-byte result back;
//                      device buffers and cudaMemcpy, or mapped buffers and host memcpys
// Prints one line per measurement: name, median microseconds (of STEPS), then
// the zero-copy step's ratio to the device step.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kBlocks = 64, kThreads = 256, kParams = 256;
constexpr unsigned kWork = 1u << 20;

__global__ void compute(const unsigned char* params, float* work, unsigned long long* total) {
  __shared__ unsigned char p[kParams];
  for (int b = threadIdx.x; b < kParams; b += blockDim.x) p[b] = params[b];
  __syncthreads();
  unsigned long long acc = 0;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < kWork; i += gridDim.x * blockDim.x) {
    unsigned v = p[i % kParams] * 2654435761u + i;
    work[i] = static_cast<float>(v & 0xffff);
    acc += v & 0xffff;
  }
  atomicAdd(total, acc);
}

__global__ void publish(unsigned long long* total, unsigned long long* result) {
  *result = *total;
  *total = 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("zero_copy_primitives: no GPU: skipping\n");
    return 77;
  }
  std::vector<unsigned char> host_params(kParams, 1);
  unsigned long long host_result = 0;
  unsigned char* d_params;
  unsigned long long *d_result, *d_total;
  float* d_work;
  CHECK(cudaMalloc(&d_params, kParams));
  CHECK(cudaMalloc(&d_result, 8));
  CHECK(cudaMalloc(&d_total, 8));
  CHECK(cudaMemset(d_total, 0, 8));
  CHECK(cudaMalloc(&d_work, kWork * sizeof(float)));
  unsigned char* m_params;
  unsigned long long* m_result;
  CHECK(cudaHostAlloc(&m_params, kParams, cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostAlloc(&m_result, 8, cudaHostAllocMapped | cudaHostAllocPortable));
  cudaEvent_t ev, k0, k1;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CHECK(cudaEventCreate(&k0));
  CHECK(cudaEventCreate(&k1));
  CHECK(cudaDeviceSynchronize());

  auto run = [&](const char* name, auto&& body) -> double {
    std::vector<double> t;
    for (int i = 0; i < steps + 10; ++i) {
      auto t0 = Clock::now();
      if (body(i) != 0) return -1;
      if (i >= 10) t.push_back(us_since(t0));
    }
    double m = median(t);
    std::printf("%-20s %8.2f us\n", name, m);
    return m;
  };
  run("h2d_256_pageable", [&](int) { return cudaMemcpy(d_params, host_params.data(), kParams, cudaMemcpyHostToDevice) != cudaSuccess; });
  run("stream_query", [&](int) { return cudaStreamQuery(0) != cudaSuccess; });
  run("event_roundtrip", [&](int) { return cudaEventRecord(ev, 0) != cudaSuccess || cudaEventSynchronize(ev) != cudaSuccess; });
  run("memcpy_mapped_256", [&](int i) {
    host_params[0] = static_cast<unsigned char>(i);
    std::memcpy(m_params, host_params.data(), kParams);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return 0;
  });
  // Kernel durations (GPU time, events around the launch).
  for (int mapped = 0; mapped < 2; ++mapped) {
    std::vector<double> t;
    for (int i = 0; i < steps / 4 + 10; ++i) {
      cudaEventRecord(k0, 0);
      compute<<<kBlocks, kThreads>>>(mapped ? m_params : d_params, d_work, d_total);
      cudaEventRecord(k1, 0);
      cudaEventSynchronize(k1);
      float ms = 0;
      cudaEventElapsedTime(&ms, k0, k1);
      if (i >= 10) t.push_back(ms * 1000.0);
    }
    std::printf("%-20s %8.2f us\n", mapped ? "kernel_mapped" : "kernel_device", median(t));
  }
  const double dev = run("step_device", [&](int i) {
    host_params[0] = static_cast<unsigned char>(i);
    if (cudaMemcpy(d_params, host_params.data(), kParams, cudaMemcpyHostToDevice) != cudaSuccess) return 1;
    compute<<<kBlocks, kThreads>>>(d_params, d_work, d_total);
    publish<<<1, 1>>>(d_total, d_result);
    return cudaMemcpy(&host_result, d_result, 8, cudaMemcpyDeviceToHost) != cudaSuccess ? 1 : 0;
  });
  const double zc = run("step_zero_copy", [&](int i) {
    host_params[0] = static_cast<unsigned char>(i);
    if (cudaStreamQuery(0) != cudaSuccess) return 1;  // the shim's idle test
    std::memcpy(m_params, host_params.data(), kParams);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    compute<<<kBlocks, kThreads>>>(m_params, d_work, d_total);
    publish<<<1, 1>>>(d_total, m_result);
    if (cudaEventRecord(ev, 0) != cudaSuccess || cudaEventSynchronize(ev) != cudaSuccess) return 1;
    host_result = *m_result;
    return 0;
  });
  const double zc_dev_params = run("step_zc_result_only", [&](int i) {
    host_params[0] = static_cast<unsigned char>(i);
    if (cudaMemcpy(d_params, host_params.data(), kParams, cudaMemcpyHostToDevice) != cudaSuccess) return 1;
    compute<<<kBlocks, kThreads>>>(d_params, d_work, d_total);
    publish<<<1, 1>>>(d_total, m_result);
    if (cudaEventRecord(ev, 0) != cudaSuccess || cudaEventSynchronize(ev) != cudaSuccess) return 1;
    host_result = *m_result;
    return 0;
  });
  std::printf("zero_copy_primitives: step ratio zero_copy/device %.3f, result-only %.3f\n", zc / dev,
              zc_dev_params / dev);
  return 0;
}
