// multi_device [N=2] [S=1M]
// Host<->device copies on two GPUs (needs 2 devices; run the simulation with
// SIMCUDA_DEVICE_COUNT=2; with fewer it prints "no GPU" and exits 77). A
// tracer must put each copy on the device current at the call, and the pinned
// rewrite must keep every byte exact while the app switches contexts under it
// (its staging pool belongs to one context; registrations are portable).
//
//   1. One thread, switching: N rounds of, on device 0 and then device 1,
//      cudaSetDevice, an H2D of S bytes from that device's pageable host
//      buffer (reused, refilled every round: the rewrite registers it), and a
//      D2H into a freshly malloc'd pageable buffer (first use: staged),
//      checked and freed.
//   2. Two threads at once, thread k pinned to device k with cudaSetDevice(k)
//      (each thread has its own current context): N round trips each, the
//      same way.
//
// Exact traffic:
//   cudaMalloc                          4 calls   4*S bytes (2 in phase 1, one per thread in phase 2)
//   cudaMemcpy H2D  pageable -> device  4N calls  4N*S bytes
//   cudaMemcpy D2H  device -> pageable  4N calls  4N*S bytes
//   per device (0 and 1 alike): H2D 2N calls 2N*S bytes, D2H 2N calls 2N*S bytes
#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#include "common.h"

namespace {

// H2D from `src` (filled with `seed`), D2H into fresh memory, checked. False on a data mismatch.
bool round_trip(void* d, std::vector<unsigned char>& src, size_t s, uint32_t seed) {
  testapp::fill(src.data(), s, seed);
  TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
  // Fresh, never-touched pageable memory (malloc, not a reused vector): the
  // rewrite sees a new address every time.
  std::unique_ptr<unsigned char, decltype(&std::free)> dst(static_cast<unsigned char*>(std::malloc(s)), &std::free);
  TA_ASSERT(dst);
  TA_CHECK(cudaMemcpy(dst.get(), d, s, cudaMemcpyDeviceToHost));
  return testapp::matches(dst.get(), s, seed);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 2);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("multi_device", 2);
  int failures = 0;

  // Phase 1: one thread, cudaSetDevice before every copy pair.
  {
    void* d[2] = {nullptr, nullptr};
    std::vector<unsigned char> src[2] = {std::vector<unsigned char>(s), std::vector<unsigned char>(s)};
    for (int dev = 0; dev < 2; ++dev) {
      TA_CHECK(cudaSetDevice(dev));
      TA_CHECK(cudaMalloc(&d[dev], s));
    }
    for (size_t r = 0; r < n; ++r)
      for (int dev = 0; dev < 2; ++dev) {
        TA_CHECK(cudaSetDevice(dev));
        int current = -1;
        TA_CHECK(cudaGetDevice(&current));
        TA_ASSERT(current == dev);
        if (!round_trip(d[dev], src[dev], s, static_cast<uint32_t>(1000 * (r + 1) + dev))) ++failures;
      }
    for (int dev = 0; dev < 2; ++dev) {
      TA_CHECK(cudaSetDevice(dev));
      TA_CHECK(cudaFree(d[dev]));
    }
  }

  // Phase 2: two threads at once, each bound to its own device (and context).
  std::atomic<int> thread_failures{0};
  std::barrier start(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      TA_CHECK(cudaSetDevice(k));
      std::vector<unsigned char> src(s);
      void* d = nullptr;
      TA_CHECK(cudaMalloc(&d, s));
      start.arrive_and_wait();  // both devices busy at the same time
      for (size_t i = 0; i < n; ++i) {
        int current = -1;
        TA_CHECK(cudaGetDevice(&current));
        TA_ASSERT(current == k);
        if (!round_trip(d, src, s, static_cast<uint32_t>(50000 + 1000 * k + i))) ++thread_failures;
      }
      TA_CHECK(cudaFree(d));
    });
  for (auto& t : threads) t.join();
  failures += thread_failures.load();
  TA_ASSERT(failures == 0);
  testapp::done("multi_device");
  return 0;
}
