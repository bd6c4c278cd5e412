// cupti_cycle [CYCLES=3] [PHASE_MS=400] [THREADS=2]
// CUPTI detached and attached again under a running program (the governor,
// shim/record/cupti_governor.h), on the real CUDA: THREADS threads each
// alternate a phase of synchronous copies (the records go off and CUPTI is
// detached) with a phase of asynchronous ones (attached again, records back
// on), CYCLES times, so that detaches and
// attaches happen while other threads are inside copy calls. A pair of copies
// every 2 ms per thread (2,000 copies/s with two threads) keeps the records'
// cost under the governor's 1 % cap, so the async phases have them on. Every copy is
// checked: each thread writes its own counter to the device and reads it back.
// Prints "cycles=C calls=N" and the PASS line.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<long> g_calls{0};

void worker(int cycles, long phase_ms) {
  uint32_t* d = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), sizeof *d));
  cudaStream_t s;
  TA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint32_t value = 0, back = 0;
  for (int c = 0; c < cycles; ++c) {
    for (int async = 0; async < 2; ++async) {
      const auto end = Clock::now() + std::chrono::milliseconds(phase_ms);
      auto next = Clock::now();
      while (Clock::now() < end) {
        ++value;
        if (async) {
          TA_CHECK(cudaMemcpyAsync(d, &value, sizeof value, cudaMemcpyHostToDevice, s));
          TA_CHECK(cudaMemcpyAsync(&back, d, sizeof back, cudaMemcpyDeviceToHost, s));
          TA_CHECK(cudaStreamSynchronize(s));
        } else {
          TA_CHECK(cudaMemcpy(d, &value, sizeof value, cudaMemcpyHostToDevice));
          TA_CHECK(cudaMemcpy(&back, d, sizeof back, cudaMemcpyDeviceToHost));
        }
        TA_ASSERT(back == value);
        g_calls.fetch_add(2, std::memory_order_relaxed);
        next += std::chrono::milliseconds(2);
        std::this_thread::sleep_until(next);
      }
    }
  }
  TA_CHECK(cudaStreamDestroy(s));
  TA_CHECK(cudaFree(d));
}

}  // namespace

int main(int argc, char** argv) {
  const int cycles = argc > 1 ? std::stoi(argv[1]) : 3;
  const long phase_ms = argc > 2 ? std::stol(argv[2]) : 400;
  const int threads = argc > 3 ? std::stoi(argv[3]) : 2;
  testapp::require_gpu("cupti_cycle");
  TA_CHECK(cudaFree(nullptr));
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker, cycles, phase_ms);
  for (auto& t : ts) t.join();
  std::printf("cycles=%d calls=%ld\n", cycles, g_calls.load());
  testapp::done("cupti_cycle");
}
