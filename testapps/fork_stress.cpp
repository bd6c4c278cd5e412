// fork_stress nvtx [NAMES=400000]
//   One thread pushes and pops NVTX ranges with a new name each time (the
//   shim interns every one: its name table grows and frees storage of a MiB
//   and more); the main thread forks and waits for each child in a loop until
//   the namer is done. Each child ends at once through _exit.
// fork_stress all [ROUNDS=40]
//   Every shim path at once while a thread that is not the main one forks:
//   copiers (pageable round trips of reused 2 MiB buffers, which
//   --rewrite=pin registers in place, and staged 256 KiB ones), an NVTX namer,
//   an allocator (malloc/free, mmap/munmap and madvise of large blocks: the
//   libc hooks' paths), a registrar (cudaHostRegister/Unregister). Each fork
//   child allocates, frees and pushes a range, then ends through _exit.
//
// Under `cuxfer record --rewrite=pin` the fork handlers take the shim's locks
// while these threads hold and nest them: a fork must never wait for ever.
// Exact traffic (all): 2 copier threads, each
//   cudaMalloc                            1 call    2 MiB (device)
//   cudaMemcpy H2D pageable -> device     ROUNDS*2 calls: ROUNDS of 2 MiB, ROUNDS of 256 KiB
//   cudaMemcpy D2H device -> pageable     ROUNDS*2 calls: the same
// plus the registrar's ROUNDS cudaHostRegister/Unregister pairs (no copies).
// Every copy's data is checked. Prints "forks=F names=N copies=C".
#include <nvtx3/nvToolsExt.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_names{0};

// Opens and closes a range with a name never used before, `n` times.
void new_names(uint64_t n, uint64_t first) {
  char name[48];
  for (uint64_t i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "step %llu", static_cast<unsigned long long>(first + i));
    nvtxRangePushA(name);
    nvtxRangePop();
    g_names.fetch_add(1, std::memory_order_relaxed);
  }
}

// Forks until `done` says stop; each child ends at once (after `in_child`).
// Returns how many forks were made.
uint64_t fork_until(const std::atomic<bool>& done, void (*in_child)()) {
  uint64_t forks = 0;
  while (!done.load()) {
    const pid_t child = fork();
    TA_ASSERT(child >= 0);
    if (child == 0) {
      if (in_child) in_child();
      _exit(0);
    }
    int status = 0;
    TA_ASSERT(waitpid(child, &status, 0) == child);
    TA_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ++forks;
  }
  return forks;
}

int nvtx_mode(uint64_t names) {
  std::atomic<bool> done{false};
  std::thread namer([&] {
    new_names(names, 0);
    done.store(true);
  });
  const uint64_t forks = fork_until(done, nullptr);
  namer.join();
  std::printf("fork_stress nvtx: forks=%llu names=%llu\n", static_cast<unsigned long long>(forks),
              static_cast<unsigned long long>(g_names.load()));
  testapp::done("fork_stress");
  return 0;
}

// `rounds` round trips of a reused 2 MiB buffer (registered in place under
// --rewrite=pin from its second use) and of a 256 KiB one (staged).
void copier(int rounds, uint32_t seed0, std::atomic<uint64_t>& copies) {
  const size_t big = 2u << 20, small = 256u << 10;
  std::vector<unsigned char> src(big), dst(big);
  void* dev = nullptr;
  TA_CHECK(cudaMalloc(&dev, big));
  for (int r = 0; r < rounds; ++r) {
    for (size_t n : {big, small}) {
      const auto seed = static_cast<uint32_t>(seed0 + 2 * r + (n == small));
      testapp::fill(src.data(), n, seed);
      std::memset(dst.data(), 0, n);
      TA_CHECK(cudaMemcpy(dev, src.data(), n, cudaMemcpyHostToDevice));
      TA_CHECK(cudaMemcpy(dst.data(), dev, n, cudaMemcpyDeviceToHost));
      TA_ASSERT(testapp::matches(dst.data(), n, seed));
      copies.fetch_add(2);
    }
  }
  TA_CHECK(cudaFree(dev));
}

// The libc hooks' paths: large blocks made and dropped every way they know.
void allocator() {
  for (uint32_t i = 0; !g_stop.load(); ++i) {
    const size_t n = (2u << 20) + (i % 7) * 4096;
    void* p = std::malloc(n);
    TA_ASSERT(p);
    std::memset(p, 1, 4096);
    p = std::realloc(p, n + (1u << 20));
    TA_ASSERT(p);
    std::free(p);
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TA_ASSERT(m != MAP_FAILED);
    std::memset(m, 2, 4096);
    TA_ASSERT(madvise(m, n, MADV_DONTNEED) == 0);
    TA_ASSERT(munmap(m, n) == 0);
  }
}

void registrar(int rounds) {
  const size_t n = 1u << 20;
  for (int r = 0; r < rounds; ++r) {
    void* p = std::malloc(n);
    TA_ASSERT(p);
    TA_CHECK(cudaHostRegister(p, n, cudaHostRegisterDefault));
    TA_CHECK(cudaHostUnregister(p));
    std::free(p);
  }
}

void child_work() {
  void* p = std::malloc(4u << 20);
  if (p) std::memset(p, 3, 4096);
  std::free(p);
  nvtxRangePushA("child");
  nvtxRangePop();
}

int all_mode(int rounds) {
  testapp::require_gpu("fork_stress");
  std::atomic<uint64_t> copies{0};
  std::atomic<bool> done{false};
  uint64_t forks = 0;
  // NVTX loads its injection library (the shim) once, under a once-flag of
  // its own that a fork child would find taken for ever if another thread
  // were inside it: the first range before any thread forks.
  nvtxRangePushA("start");
  nvtxRangePop();
  std::thread forker([&] { forks = fork_until(done, child_work); });
  std::thread namer([] {
    for (uint64_t first = 0; !g_stop.load(); first += 1000) new_names(1000, first);
  });
  std::thread alloc(allocator);
  std::vector<std::thread> work;
  work.emplace_back(copier, rounds, 1000u, std::ref(copies));
  work.emplace_back(copier, rounds, 900000u, std::ref(copies));
  work.emplace_back(registrar, rounds);
  for (auto& t : work) t.join();
  g_stop.store(true);
  namer.join();
  alloc.join();
  done.store(true);
  forker.join();
  TA_ASSERT(forks > 0);
  std::printf("fork_stress all: forks=%llu names=%llu copies=%llu\n", static_cast<unsigned long long>(forks),
              static_cast<unsigned long long>(g_names.load()), static_cast<unsigned long long>(copies.load()));
  testapp::done("fork_stress");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "nvtx") return nvtx_mode(testapp::arg_size(argc, argv, 2, 400000));
  if (mode == "all") return all_mode(static_cast<int>(testapp::arg_size(argc, argv, 2, 40)));
  std::fprintf(stderr, "usage: fork_stress nvtx [NAMES] | fork_stress all [ROUNDS]\n");
  return 2;
}
