// soak [SECONDS=10] [THREADS=4] [MAX_S=64M]
// A long-running, multi-threaded mix of pageable copies for soaking the shim
// (devtools/gpu_soak.sh runs it for >= 10 minutes under --rewrite=pin): does
// the rewrite keep every byte exact, and do its registration cache and staging
// pool stay bounded, while buffers come and go for a long time?
//
// THREADS threads, each with its own non-blocking stream and a device buffer
// of MAX_S, loop until SECONDS have elapsed. Iteration i of thread k, all of it
// a function of (k, i), so every run makes the same sequence:
//   size   cycles through 4 KiB, 16 KiB, 64 KiB, ... (x4) up to MAX_S (and MAX_S)
//   host   reused buffers (allocated once, so the rewrite may register them),
//          a freshly malloc'd source, or fresh source and destination, freed
//          after the check (so registrations end and addresses come back)
//   copy   cudaMemcpy H2D + D2H, or cudaMemcpyAsync H2D + D2H on the thread's
//          stream followed by cudaStreamSynchronize
// The source is filled with a pattern of (k, i) and every D2H result is checked
// against it; a mismatch is counted (the first few printed) and the run goes on.
//
// Every ~10 s (SECONDS/3 for runs under 30 s) one line: elapsed, iterations,
// bytes each way, failures, and the process's VmRSS, VmLck and VmPin
// (/proc/self/status). At the end the summary, then the exact traffic made,
// which is not known beforehand (tests/e2e/expectations.py reads it):
//   soak: traffic cudaMemcpy H2D pageable CALLS BYTES       (and D2H,
//   soak: traffic cudaMemcpyAsync H2D pageable CALLS BYTES   and D2H)
//   soak: allocations device THREADS THREADS*MAX_S          (cudaMalloc)
// Exit 0 only if no check failed; 1 otherwise; 77 "no GPU".
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "common.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Counters {
  std::atomic<uint64_t> iterations{0}, failures{0};
  std::atomic<uint64_t> sync_h2d_calls{0}, sync_h2d_bytes{0}, sync_d2h_calls{0}, sync_d2h_bytes{0};
  std::atomic<uint64_t> async_h2d_calls{0}, async_h2d_bytes{0}, async_d2h_calls{0}, async_d2h_bytes{0};
  uint64_t h2d_bytes() const { return sync_h2d_bytes + async_h2d_bytes; }
  uint64_t d2h_bytes() const { return sync_d2h_bytes + async_d2h_bytes; }
};

// "VmRSS:  1234 kB" -> 1234; -1 when the field is absent (VmPin is not in every kernel).
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, len, field) == 0 && line.size() > len && line[len] == ':')
      return std::atol(line.c_str() + len + 1);
  return -1;
}

void* must_malloc(size_t n) {
  void* p = std::malloc(n);
  TA_ASSERT(p);
  return p;
}

void worker(int k, size_t max_s, Clock::time_point deadline, std::barrier<>& start, Counters& c) {
  std::vector<size_t> sizes;
  for (size_t s = 4096; s < max_s; s *= 4) sizes.push_back(s);
  sizes.push_back(max_s);
  const size_t m = sizes.size();

  cudaStream_t st = nullptr;
  TA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, max_s));
  auto* keep_src = static_cast<unsigned char*>(must_malloc(max_s));
  auto* keep_dst = static_cast<unsigned char*>(must_malloc(max_s));
  start.arrive_and_wait();

  for (uint64_t i = 0; Clock::now() < deadline; ++i) {
    const size_t s = sizes[(i + k) % m];
    const unsigned host = static_cast<unsigned>((i / m + k) % 3);  // 0 reused, 1 fresh src, 2 fresh both
    const bool async = (i + i / m) % 2 == 1;
    const auto seed = static_cast<uint32_t>(k * 0x01000193u + i * 2654435761u);
    unsigned char* src = host == 0 ? keep_src : static_cast<unsigned char*>(must_malloc(s));
    unsigned char* dst = host == 2 ? static_cast<unsigned char*>(must_malloc(s)) : keep_dst;

    testapp::fill(src, s, seed);
    if (async) {
      TA_CHECK(cudaMemcpyAsync(d, src, s, cudaMemcpyHostToDevice, st));
      TA_CHECK(cudaMemcpyAsync(dst, d, s, cudaMemcpyDeviceToHost, st));
      TA_CHECK(cudaStreamSynchronize(st));
      c.async_h2d_calls += 1, c.async_h2d_bytes += s, c.async_d2h_calls += 1, c.async_d2h_bytes += s;
    } else {
      TA_CHECK(cudaMemcpy(d, src, s, cudaMemcpyHostToDevice));
      TA_CHECK(cudaMemcpy(dst, d, s, cudaMemcpyDeviceToHost));
      c.sync_h2d_calls += 1, c.sync_h2d_bytes += s, c.sync_d2h_calls += 1, c.sync_d2h_bytes += s;
    }
    // A reused destination still holds an earlier pattern: a dropped copy shows.
    if (!testapp::matches(dst, s, seed)) {
      const uint64_t f = ++c.failures;
      if (f <= 10)
        std::fprintf(stderr, "soak: thread %d iteration %llu: %s %zu B (%s host) came back wrong\n", k,
                     static_cast<unsigned long long>(i), async ? "async" : "sync", s,
                     host == 0 ? "reused" : host == 1 ? "fresh source" : "fresh");
    }
    if (src != keep_src) std::free(src);
    if (dst != keep_dst) std::free(dst);
    ++c.iterations;
  }
  std::free(keep_src);
  std::free(keep_dst);
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaStreamDestroy(st));
}

void progress(const char* what, double elapsed, const Counters& c) {
  std::printf("soak: %s t=%.1fs iterations=%llu h2d_bytes=%llu d2h_bytes=%llu failures=%llu VmRSS=%ld kB "
              "VmLck=%ld kB VmPin=%ld kB\n",
              what, elapsed, static_cast<unsigned long long>(c.iterations.load()),
              static_cast<unsigned long long>(c.h2d_bytes()), static_cast<unsigned long long>(c.d2h_bytes()),
              static_cast<unsigned long long>(c.failures.load()), status_kb("VmRSS"), status_kb("VmLck"),
              status_kb("VmPin"));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t seconds = testapp::arg_size(argc, argv, 1, 10);
  const size_t threads = testapp::arg_size(argc, argv, 2, 4);
  const size_t max_s = testapp::arg_size(argc, argv, 3, 64 << 20);
  TA_ASSERT(threads >= 1 && max_s >= 4096);
  testapp::require_gpu("soak");
  std::printf("soak: pid=%d seconds=%zu threads=%zu max_s=%zu\n", static_cast<int>(getpid()), seconds, threads,
              max_s);
  std::fflush(stdout);

  Counters c;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::seconds(seconds);
  const auto every = std::chrono::seconds(seconds >= 30 ? 10 : std::max<size_t>(1, seconds / 3));
  std::barrier start(static_cast<std::ptrdiff_t>(threads));
  std::vector<std::thread> pool;
  for (size_t k = 0; k < threads; ++k)
    pool.emplace_back(worker, static_cast<int>(k), max_s, deadline, std::ref(start), std::ref(c));
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  for (auto next = t0 + every; next < deadline; next += every) {
    std::this_thread::sleep_until(next);
    progress("progress", elapsed(), c);
  }
  for (auto& t : pool) t.join();
  progress("summary", elapsed(), c);

  auto line = [](const char* api, const char* dir, uint64_t calls, uint64_t bytes) {
    std::printf("soak: traffic %s %s pageable %llu %llu\n", api, dir, static_cast<unsigned long long>(calls),
                static_cast<unsigned long long>(bytes));
  };
  line("cudaMemcpy", "H2D", c.sync_h2d_calls, c.sync_h2d_bytes);
  line("cudaMemcpy", "D2H", c.sync_d2h_calls, c.sync_d2h_bytes);
  line("cudaMemcpyAsync", "H2D", c.async_h2d_calls, c.async_h2d_bytes);
  line("cudaMemcpyAsync", "D2H", c.async_d2h_calls, c.async_d2h_bytes);
  std::printf("soak: allocations device %zu %zu\n", threads, threads * max_s);
  if (c.failures) {
    std::printf("soak: FAILED: %llu of %llu iterations came back wrong\n",
                static_cast<unsigned long long>(c.failures.load()), static_cast<unsigned long long>(c.iterations.load()));
    return 1;
  }
  testapp::done("soak");
  return 0;
}
