// host_wait_copy [FILL=4] [S=8M] [WATCHDOG_S=3]   (GPU only; nvcc, static and shared cudart)
// Async H2D copies issued while their stream waits for the host: a host
// function at the head of the stream spins until the app releases it, which
// it does only after its copy calls have returned. A copy call that waits for
// its stream would never return (a deadlock); a watchdog thread releases the
// stream after WATCHDOG_S seconds so that the app always ends, and the app
// says which calls returned only then.
//
//   1. B, a reused pageable buffer of S bytes, copied H2D (async + stream sync)
//      three times: under --rewrite=pin the shim registers it in place;
//   2. cudaLaunchHostFunc(stream, wait_for_release): the stream is busy;
//   3. FILL async H2D copies of fresh pageable buffers of S bytes (the rewrite
//      stages them: its pinned buffers stay in flight behind the host function,
//      so the staging pool can run out);
//   4. an async H2D of B with new contents: a registered buffer, a busy stream
//      and (with FILL large enough) no staging buffer free;
//   5. release, stream sync, every device buffer read back and checked.
// Prints
//   host_wait_copy: fill_returned=<n>/<FILL> registered_returned=<yes|no> call_ms=<max>
//   host_wait_copy: returned=<mask> checksum=<hex>
// where bit k of mask says copy k (the fills, then B) returned before the
// stream was released. The rewrite must not turn a call that returned in a
// plain run into one that waits. Exits 1 on a CUDA error or wrong data.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common.h"

namespace {

std::atomic<bool> g_released{false};

void CUDART_CB wait_for_release(void*) {
  while (!g_released.load()) std::this_thread::yield();
}

uint64_t fold(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i += 4093) h = (h ^ p[i]) * 0x100000001b3ull;
  return (h ^ p[n - 1]) * 0x100000001b3ull;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t fill = testapp::arg_size(argc, argv, 1, 4);
  const size_t n = testapp::arg_size(argc, argv, 2, 8 << 20);
  const double watchdog_s = argc > 3 ? std::atof(argv[3]) : 3.0;
  TA_ASSERT(n > 0 && fill < 60);
  testapp::require_gpu("host_wait_copy");
  cudaStream_t s;
  TA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<unsigned char*> dev(fill + 1);
  for (auto& d : dev) TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), n));
  std::vector<unsigned char> b(n), back(n);
  for (uint32_t r = 0; r < 3; ++r) {  // reused: the rewrite registers it
    testapp::fill(b.data(), n, 100 + r);
    TA_CHECK(cudaMemcpyAsync(dev[fill], b.data(), n, cudaMemcpyHostToDevice, s));
    TA_CHECK(cudaStreamSynchronize(s));
  }
  std::vector<std::vector<unsigned char>> fresh(fill, std::vector<unsigned char>(n));
  for (size_t k = 0; k < fill; ++k) testapp::fill(fresh[k].data(), n, static_cast<uint32_t>(k));
  testapp::fill(b.data(), n, 999);

  std::mutex m;
  std::condition_variable cv;
  bool issued = false, watchdog_fired = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::duration<double>(watchdog_s), [&] { return issued; })) {
      watchdog_fired = true;
      g_released.store(true);
    }
  });
  TA_CHECK(cudaLaunchHostFunc(s, wait_for_release, nullptr));
  uint64_t mask = 0;
  double max_ms = 0;
  for (size_t k = 0; k <= fill; ++k) {
    const unsigned char* src = k < fill ? fresh[k].data() : b.data();
    const auto t0 = std::chrono::steady_clock::now();
    TA_CHECK(cudaMemcpyAsync(dev[k], src, n, cudaMemcpyHostToDevice, s));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    max_ms = std::max(max_ms, ms);
    if (!g_released.load()) mask |= uint64_t{1} << k;
  }
  {
    std::lock_guard<std::mutex> lock(m);
    issued = true;
  }
  cv.notify_all();
  watchdog.join();
  g_released.store(true);
  TA_CHECK(cudaStreamSynchronize(s));
  uint64_t checksum = 0xcbf29ce484222325ull;
  for (size_t k = 0; k <= fill; ++k) {
    TA_CHECK(cudaMemcpy(back.data(), dev[k], n, cudaMemcpyDeviceToHost));
    TA_ASSERT(k < fill ? testapp::matches(back.data(), n, static_cast<uint32_t>(k)) : testapp::matches(back.data(), n, 999));
    checksum = fold(checksum, back.data(), n);
  }
  size_t fill_returned = 0;
  for (size_t k = 0; k < fill; ++k) fill_returned += (mask >> k) & 1;
  std::printf("host_wait_copy: fill_returned=%zu/%zu registered_returned=%s call_ms=%.1f watchdog=%s\n", fill_returned,
              fill, (mask >> fill) & 1 ? "yes" : "no", max_ms, watchdog_fired ? "fired" : "idle");
  std::printf("host_wait_copy: returned=%llx checksum=%016llx\n", static_cast<unsigned long long>(mask),
              static_cast<unsigned long long>(checksum));
  for (auto d : dev) TA_CHECK(cudaFree(d));
  TA_CHECK(cudaStreamDestroy(s));
  return 0;
}
