// free_while_registering [ROUNDS=100] [S=1M] [BIG=32M] [LIMIT_US=1000] [MIN_REGISTERED_PCT=90]
//
// free() and munmap() of a buffer the pinned rewrite registered in place must
// not wait for another thread's slow cuMemHostRegister (docs/architecture.md,
// "Registration in place"; DESIGN principle 10). Run under
// `cuxfer record --rewrite=pin` with SIMCUDA_REGISTER_US_PER_MIB set, so that
// the simulated driver takes time to pin and serialises register/unregister
// on one lock as the real driver does.
//
// A background thread keeps registering: each iteration mmaps BIG bytes,
// copies them H2D twice (the second copy makes the rewrite register the
// buffer: a slow call), checks them D2H and unmaps them. The main thread, in
// ROUNDS rounds, makes an S-byte buffer (malloc on even rounds, mmap on odd
// ones), copies it twice so that it is registered, checks it D2H, waits
// until the other thread is inside its registration, and times free() (or
// munmap()). An munmap round then maps half the range again with MAP_FIXED,
// writes new bytes and checks that the device receives exactly them (a
// registration left in the driver over the old mapping would copy other
// pages; the simulated driver aborts on it).
//
// With the registrations made off the copying thread (CUXFER_REGISTER=auto,
// rewrite/background_registrar.h) a buffer may still be queued or being
// registered when it is freed: MIN_REGISTERED_PCT 0 then, and what is
// checked is that free() never waits for it and every byte still checks.
//
// Passes when every byte checks, at least half of the timed calls ran while
// the other thread was registering, and the 99th percentile of the timed
// calls is at most LIMIT_US microseconds. For scale, each round also frees an
// S-byte buffer that was never copied (so never registered) the same way,
// right after: its times are printed as the control (the munmap itself). Traffic (per round, main thread):
// H2D pageable 2·S (+ S/2 on munmap rounds), D2H pageable S (+ S/2); the
// background thread's count depends on timing (not for exact reports).
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "common.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace {

using Clock = std::chrono::steady_clock;

// simcuda can say whether a host address is registered; a GPU cannot (-1).
int registered(const void* p) {
  using Fn = int (*)(const void*);
  static auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "simcuda_is_host_registered"));
  return fn ? fn(p) != 0 : -1;
}

std::atomic<bool> g_stop{false};
std::atomic<bool> g_in_register{false};  // the background thread is in its registering copy
std::atomic<uint64_t> g_registrations{0};

void registrar(size_t big) {
  void* dev = nullptr;
  TA_CHECK(cudaMalloc(&dev, big));
  std::vector<unsigned char> back(big);
  for (uint32_t it = 0; !g_stop.load(); ++it) {
    void* m = mmap(nullptr, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TA_ASSERT(m != MAP_FAILED);
    testapp::fill(m, big, 5000 + it);
    TA_CHECK(cudaMemcpy(dev, m, big, cudaMemcpyHostToDevice));
    g_in_register.store(true);
    TA_CHECK(cudaMemcpy(dev, m, big, cudaMemcpyHostToDevice));  // registers m (slow), then copies
    g_in_register.store(false);
    g_registrations.fetch_add(1);
    TA_CHECK(cudaMemcpy(back.data(), dev, big, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(back.data(), big, 5000 + it));
    TA_ASSERT(munmap(m, big) == 0);
  }
  TA_CHECK(cudaFree(dev));
}

// Waits (up to 2 s) until the background thread is inside a registration
// that started at least 2 ms ago; returns its registration count then.
uint64_t wait_for_registration() {
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline) {
    if (g_in_register.load()) {
      const uint64_t n = g_registrations.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (g_in_register.load() && g_registrations.load() == n) return n;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return UINT64_MAX;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = static_cast<int>(testapp::arg_size(argc, argv, 1, 100));
  const size_t s = testapp::arg_size(argc, argv, 2, 1u << 20);
  const size_t big = testapp::arg_size(argc, argv, 3, 32u << 20);
  const double limit_us = static_cast<double>(testapp::arg_size(argc, argv, 4, 1000));
  const size_t min_registered_pct = testapp::arg_size(argc, argv, 5, 90);
  testapp::require_gpu("free_while_registering");
  // Every malloc of S bytes is its own mapping: no neighbour shares its pages,
  // so each buffer is registered on its own.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);

  void* dev = nullptr;
  TA_CHECK(cudaMalloc(&dev, s));
  std::vector<unsigned char> out(s);
  auto round_trip = [&](const void* h, size_t n, uint32_t seed) {
    TA_CHECK(cudaMemcpy(dev, h, n, cudaMemcpyHostToDevice));
    std::memset(out.data(), 0, n);
    TA_CHECK(cudaMemcpy(out.data(), dev, n, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(out.data(), n, seed));
  };

  std::thread bg(registrar, big);
  std::vector<double> us, control_us;
  int overlapped = 0, was_registered = 0, checkable = 0, remapped = 0;
  for (int r = 0; r < rounds; ++r) {
    const uint32_t seed = 100 + 2 * r;
    const bool use_mmap = r % 2;
    auto make = [&] {
      void* m = use_mmap ? mmap(nullptr, s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : std::malloc(s);
      TA_ASSERT(m && m != MAP_FAILED);
      return m;
    };
    void* p = make();
    void* control = make();
    std::memset(control, 1, s);
    testapp::fill(p, s, seed);
    TA_CHECK(cudaMemcpy(dev, p, s, cudaMemcpyHostToDevice));
    round_trip(p, s, seed);  // the second H2D registers p
    const int reg = registered(p);
    if (reg >= 0) {
      ++checkable;
      was_registered += reg;
    }
    const uint64_t n = wait_for_registration();
    const auto t0 = Clock::now();
    if (use_mmap) TA_ASSERT(munmap(p, s) == 0);
    else std::free(p);
    const auto t1 = Clock::now();
    if (use_mmap) TA_ASSERT(munmap(control, s) == 0);
    else std::free(control);
    const auto t2 = Clock::now();
    if (n != UINT64_MAX && g_in_register.load() && g_registrations.load() == n) ++overlapped;
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    control_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    if (use_mmap) {
      // Half the range mapped again, new bytes: the device must get these.
      // (NOREPLACE: another thread may have been given the hole meanwhile.)
      void* q = mmap(p, s / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      TA_ASSERT(q != MAP_FAILED || errno == EEXIST);
      if (q != MAP_FAILED) {
        TA_ASSERT(q == p);
        ++remapped;
        testapp::fill(q, s / 2, seed + 1);
        round_trip(q, s / 2, seed + 1);
        TA_ASSERT(munmap(q, s / 2) == 0);
      }
    }
  }
  g_stop.store(true);
  bg.join();
  TA_CHECK(cudaFree(dev));

  auto p99_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(0.99 * static_cast<double>(v.size() - 1))];
  };
  const double p99 = p99_of(us);
  const double worst = *std::max_element(us.begin(), us.end());
  std::printf("free_while_registering: %d rounds, %d timed while another thread registered, "
              "registered before free %d/%d, remapped %d, background registrations %llu; free/munmap us: median %.1f p99 %.1f "
              "max %.1f (limit %.0f); never-registered control: median %.1f p99 %.1f\n",
              rounds, overlapped, was_registered, checkable, remapped, static_cast<unsigned long long>(g_registrations.load()),
              testapp::median(us), p99, worst, limit_us, testapp::median(control_us), p99_of(control_us));
  // The slowest timed calls, by round: a failure says when they came.
  std::vector<int> order(us.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return us[a] > us[b]; });
  std::printf("free_while_registering: slowest rounds:");
  for (size_t i = 0; i < std::min<size_t>(4, order.size()); ++i)
    std::printf(" #%d %.1f us (control %.1f)", order[i], us[order[i]], control_us[order[i]]);
  std::printf("\n");
  TA_ASSERT(overlapped * 2 >= rounds);
  TA_ASSERT(checkable == 0 || static_cast<size_t>(was_registered) * 100 >= static_cast<size_t>(checkable) * min_registered_pct);
  // What the shim adds must stay under the limit: the same free/munmap of
  // memory never registered, in the same rounds, measures what the machine
  // itself takes (a loaded 2-core CI runner schedules a syscall out for ms).
  // Before the cache stopped waiting, p99 was ~30 ms: far over either bound.
  TA_ASSERT(p99 <= limit_us + p99_of(control_us));
  testapp::done("free_while_registering");
  return 0;
}
