// fork_app                     fork before any CUDA call; both processes copy
// fork_app _exit               the same, the child ending through _exit (as a
//                              fork child of Python's multiprocessing does):
//                              no exit handler runs there
// fork_app vfork               the parent copies, vforks a child that ends at
//                              once through _exit (in the parent's memory), and
//                              copies on: the parent's trace is the parent's
// fork_app exec PROG [ARGS...] fork; the child execs PROG, the parent copies
// fork_app spawn PROG [ARGS...] posix_spawn PROG (no fork handlers run: the
//                              child is a new image), the parent copies
//
// The fork happens before the first CUDA call (CUDA cannot be used in a child
// forked after initialisation), so each process initialises CUDA itself and
// cuxfer must write one trace per process.
//
// Exact traffic, parent (every mode):
//   cudaMalloc                           1 call  256K bytes (device)
//   cudaMemcpy H2D  pageable -> device   5 calls 5*256K bytes
//   cudaMemcpy D2H  device -> pageable   5 calls 5*256K bytes
// Child, fork and _exit modes:
//   cudaMalloc                           1 call  128K bytes (device)
//   cudaMemcpy H2D  pageable -> device   3 calls 3*128K bytes
//   cudaMemcpy D2H  device -> pageable   3 calls 3*128K bytes
// Child, exec mode: whatever PROG does. vfork mode: no child process copies.
// The parent exits with the child's failure status if the child fails, 77 if
// either process found no GPU.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "common.h"

namespace {

// `midway`, if given, runs after the first round trip.
void round_trips(const char* who, size_t n, size_t s, uint32_t seed0, void (*midway)() = nullptr) {
  std::vector<unsigned char> src(s), dst(s);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    if (i == 1 && midway) midway();
    const auto seed = static_cast<uint32_t>(seed0 + i);
    testapp::fill(src.data(), s, seed);
    std::memset(dst.data(), 0, s);
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst.data(), s, seed));
  }
  TA_CHECK(cudaFree(d));
  std::printf("fork_app %s (pid %d): %zu round trips of %zu bytes\n", who, static_cast<int>(getpid()), n, s);
}

// A vfork child shares the parent's memory (the tracer's state too) until it
// ends: it may only call _exit or exec.
void vfork_child_exits() {
  const pid_t child = vfork();
  if (child == 0) _exit(0);
  TA_ASSERT(child > 0);
  int status = 0;
  TA_ASSERT(waitpid(child, &status, 0) == child);
  TA_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  const bool exec_mode = argc >= 3 && mode == "exec";
  const bool spawn_mode = argc >= 3 && mode == "spawn";
  if (argc >= 2 && !exec_mode && !spawn_mode && mode != "_exit" && mode != "vfork") {
    std::fprintf(stderr,
                 "usage: fork_app [_exit | vfork] | fork_app exec PROG [ARGS...] | fork_app spawn PROG [ARGS...]\n");
    return 2;
  }
  std::fflush(stdout);
  if (mode == "vfork") {
    testapp::require_gpu("fork_app parent");
    round_trips("parent", 5, 256 << 10, 2000, vfork_child_exits);
    testapp::done("fork_app");
    return 0;
  }
  pid_t child = -1;
  if (spawn_mode) {
    TA_ASSERT(posix_spawn(&child, argv[2], nullptr, nullptr, argv + 2, environ) == 0);
  } else {
    child = fork();
  }
  TA_ASSERT(child >= 0);
  if (child == 0) {
    if (exec_mode) {
      execv(argv[2], argv + 2);
      std::perror("execv");
      _exit(127);
    }
    testapp::require_gpu("fork_app child");
    round_trips("child", 3, 128 << 10, 1000);
    std::fflush(stdout);
    if (mode == "_exit") _exit(0);  // no exit handler runs: the tracer must finish its trace here
    std::exit(0);
  }
  testapp::require_gpu("fork_app parent");
  round_trips("parent", 5, 256 << 10, 2000);
  int status = 0;
  TA_ASSERT(waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "fork_app: child died of signal %d\n", WTERMSIG(status));
    return 1;
  }
  if (WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fork_app: child exited %d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status) == testapp::kSkip ? testapp::kSkip : 1;
  }
  testapp::done("fork_app");
  return 0;
}
