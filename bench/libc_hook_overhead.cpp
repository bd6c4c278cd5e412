// Per-call cost of the shim's libc hooks (interpose/libc_hooks.cpp), which
// every malloc/free/mmap of a preloaded process goes through. No CUDA.
//
//   libc_hook_overhead [N=2000000] [ROUNDS=5]
//
// Cases, each timed as N calls (or pairs) after a warm-up, median of ROUNDS:
//   malloc_free_64     malloc(64) + free          (the common case: forwarded)
//   malloc_free_4k     malloc(4096) + free
//   malloc_free_2m     malloc(2 MiB) + free       (tracked when registration is on)
//   calloc_free_256    calloc(1, 256) + free
//   realloc_grow       realloc 64 -> 128 -> free
//   mmap_munmap_2m     anonymous mmap(2 MiB) + munmap (tracked when registration is on)
// Prints "case=<name> ns_per_op=<median> label=<label>"; run it with and
// without LD_PRELOAD=libcuxfer.so (bench/run_libc_hook_overhead.sh).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

volatile unsigned long g_sink;

template <typename F>
double ns_per_op(long n, F&& f) {
  for (long i = 0; i < n / 10; ++i) f();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) f();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 2000000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const char* label = std::getenv("BENCH_LABEL") ? std::getenv("BENCH_LABEL") : "";
  struct Case {
    const char* name;
    long n;
    double (*run)(long);
  };
  const Case cases[] = {
      {"malloc_free_64", n, [](long k) {
         return ns_per_op(k, [] {
           void* p = std::malloc(64);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           std::free(p);
         });
       }},
      {"malloc_free_4k", n, [](long k) {
         return ns_per_op(k, [] {
           void* p = std::malloc(4096);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           std::free(p);
         });
       }},
      {"calloc_free_256", n, [](long k) {
         return ns_per_op(k, [] {
           void* p = std::calloc(1, 256);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           std::free(p);
         });
       }},
      {"realloc_grow", n, [](long k) {
         return ns_per_op(k, [] {
           void* p = std::malloc(64);
           p = std::realloc(p, 128);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           std::free(p);
         });
       }},
      {"malloc_free_2m", n / 20, [](long k) {
         return ns_per_op(k, [] {
           void* p = std::malloc(2 << 20);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           std::free(p);
         });
       }},
      {"mmap_munmap_2m", n / 20, [](long k) {
         return ns_per_op(k, [] {
           void* p = mmap(nullptr, 2 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
           g_sink = g_sink + reinterpret_cast<unsigned long>(p);
           munmap(p, 2 << 20);
         });
       }},
  };
  for (const Case& c : cases) {
    std::vector<double> v;
    for (int r = 0; r < rounds; ++r) v.push_back(c.run(c.n));
    std::sort(v.begin(), v.end());
    std::printf("case=%s ns_per_op=%.2f label=%s\n", c.name, v[v.size() / 2], label);
  }
  return 0;
}
