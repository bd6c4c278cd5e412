// capture_range [mode=ranges|nostart]
// Copies before, inside and between profiler ranges (cudaProfilerStart/Stop),
// for `cuxfer record --capture-range=cudaProfilerApi`
// (tests/e2e/run_capture_range.py). The pinned buffer is allocated while no
// range is open: the copies from it inside a range must still be classified
// pinned. The runtime's profiler calls reach the driver's through its
// entry-point table, so the static runtime's are seen too.
//
// Exact traffic, mode "ranges" (K = 64 KiB):
//   outside any range  H2D pageable 2 x K, D2H pageable 1 x K, H2D pinned 1 x K
//   range 1            H2D pageable 3 x 2K, D2H pageable 1 x 2K
//                      (a second cudaProfilerStart inside it changes nothing)
//   range 2            H2D pinned 4 x K (2 of them from a second thread),
//                      D2H pageable 1 x K
//   after the second stop (and a redundant one): H2D pageable 2 x K
// In all 15 copies, 9 inside the ranges. Mode "nostart": the same copies,
// no profiler call.
#include <cuda_profiler_api.h>

#include <thread>

#include "common.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ranges";
  const bool ranges = mode == "ranges";
  testapp::require_gpu("capture_range");
  const size_t k = 64 << 10;
  std::vector<unsigned char> host(2 * k), back(2 * k);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, 2 * k));
  void* pinned = nullptr;
  auto h2d = [&](const void* src, size_t n, uint32_t seed) {
    testapp::fill(const_cast<void*>(src), n, seed);
    TA_CHECK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
  };
  auto d2h = [&](size_t n, uint32_t seed) {
    std::memset(back.data(), 0, n);
    TA_CHECK(cudaMemcpy(back.data(), d, n, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(back.data(), n, seed));
  };

  h2d(host.data(), k, 1);
  h2d(host.data(), k, 2);
  d2h(k, 2);
  TA_CHECK(cudaMallocHost(&pinned, k));
  h2d(pinned, k, 3);

  if (ranges) TA_CHECK(cudaProfilerStart());
  for (uint32_t i = 0; i < 3; ++i) h2d(host.data(), 2 * k, 10 + i);
  if (ranges) TA_CHECK(cudaProfilerStart());  // already started: no effect
  d2h(2 * k, 12);
  if (ranges) TA_CHECK(cudaProfilerStop());

  if (ranges) TA_CHECK(cudaProfilerStart());
  h2d(pinned, k, 20);
  std::thread worker([&] {
    void* wd = nullptr;
    TA_CHECK(cudaMalloc(&wd, k));
    for (uint32_t i = 0; i < 2; ++i) {
      testapp::fill(pinned, k, 30 + i);
      TA_CHECK(cudaMemcpy(wd, pinned, k, cudaMemcpyHostToDevice));
    }
    TA_CHECK(cudaFree(wd));
  });
  worker.join();
  h2d(pinned, k, 21);
  d2h(k, 21);
  if (ranges) TA_CHECK(cudaProfilerStop());
  if (ranges) TA_CHECK(cudaProfilerStop());  // already stopped: no effect

  h2d(host.data(), k, 40);
  h2d(host.data(), k, 41);
  TA_CHECK(cudaFreeHost(pinned));
  TA_CHECK(cudaFree(d));
  testapp::done("capture_range");
  return 0;
}
