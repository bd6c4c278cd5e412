// overlap_pageable [N=8] [S=64M] [SPIN_MS=10]   (GPU only; built by nvcc with static and shared cudart)
// Does an async copy from PAGEABLE memory overlap a kernel? Each of N
// iterations launches a ~SPIN_MS spin kernel on stream B, then
// cudaMemcpyAsync H2D of S bytes from a malloc'd buffer on stream A, and
// measures the time until the copy call returns and the wall time of the
// iteration (both streams synchronised). Without the rewrite the driver
// stages pageable memory itself and the call returns only when the copy is
// done (~10 ms for 64 MiB on an H200, FACTS.md); with CUXFER_REWRITE=pin the
// call should return in about the time of a host memcpy of S bytes, and the
// iteration take about max(kernel, copy) instead of more.
//
// Prints one line per iteration and a summary:
//   overlap_pageable: size=S kernel_us=K copy_alone_us=C copy_alone_return_us=R
//       median_return_us=r median_iter_us=I overlap_pct=P
// overlap_pct = 100 * (K + C - I) / min(K, C): 0 = serial, 100 = fully hidden.
// Nothing is asserted about the times; the data of the last copy is verified.
//
// Exact traffic:
//   cudaMalloc                                2 calls  S + 4 bytes (device: data, spin counter)
//   cudaMemcpyAsync H2D  pageable -> device   N + 3 calls (N + 3)*S bytes (3 alone, N overlapped; stream A)
//   cudaMemcpy D2H  device -> pageable        1 call   S bytes (verification)
//   kernel launches                           N + 3 (stream B; 3 to time the kernel alone)
#include <time.h>

#include <algorithm>
#include <vector>

#include "common.h"

__global__ void spin(unsigned* counter, unsigned long long cycles) {
  unsigned long long start = clock64();
  while (clock64() - start < cycles) {
  }
  atomicAdd(counter, 1u);
}

static double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 64 << 20);
  const size_t spin_ms = testapp::arg_size(argc, argv, 3, 10);
  TA_ASSERT(n > 0 && s > 0);
  testapp::require_gpu("overlap_pageable");

  int clock_khz = 0;
  TA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const unsigned long long cycles = static_cast<unsigned long long>(clock_khz) * spin_ms;

  std::vector<unsigned char> host(s), check(s);
  unsigned char* d = nullptr;
  unsigned* counter = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), s));
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counter), sizeof(unsigned)));
  TA_CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
  cudaStream_t a = nullptr, b = nullptr;
  TA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  TA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  testapp::fill(host.data(), s, 1);

  // The kernel alone (events on stream B).
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  TA_CHECK(cudaEventCreate(&e0));
  TA_CHECK(cudaEventCreate(&e1));
  std::vector<double> kernel_us;
  for (int i = 0; i < 3; ++i) {
    TA_CHECK(cudaEventRecord(e0, b));
    spin<<<1, 1, 0, b>>>(counter, cycles);
    TA_CHECK(cudaGetLastError());
    TA_CHECK(cudaEventRecord(e1, b));
    TA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    TA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    kernel_us.push_back(ms * 1e3);
  }
  // The copy alone (the first one also warms the path up).
  std::vector<double> alone_us, alone_ret_us;
  for (int i = 0; i < 3; ++i) {
    const double t0 = now_us();
    TA_CHECK(cudaMemcpyAsync(d, host.data(), s, cudaMemcpyHostToDevice, a));
    const double t1 = now_us();
    TA_CHECK(cudaStreamSynchronize(a));
    const double t2 = now_us();
    alone_ret_us.push_back(t1 - t0);
    alone_us.push_back(t2 - t0);
  }

  std::vector<double> ret_us, iter_us;
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(i + 2);
    testapp::fill(host.data(), s, seed);
    TA_CHECK(cudaDeviceSynchronize());
    const double t0 = now_us();
    spin<<<1, 1, 0, b>>>(counter, cycles);
    TA_CHECK(cudaGetLastError());
    const double t1 = now_us();
    TA_CHECK(cudaMemcpyAsync(d, host.data(), s, cudaMemcpyHostToDevice, a));
    const double t2 = now_us();
    TA_CHECK(cudaStreamSynchronize(a));
    const double t3 = now_us();
    TA_CHECK(cudaStreamSynchronize(b));
    const double t4 = now_us();
    ret_us.push_back(t2 - t1);
    iter_us.push_back(t4 - t0);
    std::printf("iter=%zu return_us=%.1f copy_done_us=%.1f iter_us=%.1f\n", i, t2 - t1, t3 - t1, t4 - t0);
  }
  std::memset(check.data(), 0, s);
  TA_CHECK(cudaMemcpy(check.data(), d, s, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(check.data(), s, static_cast<uint32_t>(n + 1)));

  const double k = median(kernel_us), c = median(alone_us), it = median(iter_us);
  const double overlap = std::min(k, c) > 0 ? 100.0 * (k + c - it) / std::min(k, c) : 0.0;
  std::printf(
      "overlap_pageable: size=%zu kernel_us=%.1f copy_alone_us=%.1f copy_alone_return_us=%.1f "
      "median_return_us=%.1f median_iter_us=%.1f overlap_pct=%.0f\n",
      s, k, c, median(alone_ret_us), median(ret_us), it, overlap);

  TA_CHECK(cudaEventDestroy(e0));
  TA_CHECK(cudaEventDestroy(e1));
  TA_CHECK(cudaStreamDestroy(a));
  TA_CHECK(cudaStreamDestroy(b));
  TA_CHECK(cudaFree(counter));
  TA_CHECK(cudaFree(d));
  testapp::done("overlap_pageable");
  return 0;
}
