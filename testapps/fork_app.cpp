// fork_app                     fork before any CUDA call; both processes copy
// fork_app exec PROG [ARGS...] fork; the child execs PROG, the parent copies
// fork_app spawn PROG [ARGS...] posix_spawn PROG (no fork handlers run: the
//                              child is a new image), the parent copies
//
// The fork happens before the first CUDA call (CUDA cannot be used in a child
// forked after initialisation), so each process initialises CUDA itself and
// cuxfer must write one trace per process.
//
// Exact traffic, parent (both modes):
//   cudaMalloc                           1 call  256K bytes (device)
//   cudaMemcpy H2D  pageable -> device   5 calls 5*256K bytes
//   cudaMemcpy D2H  device -> pageable   5 calls 5*256K bytes
// Child, fork mode:
//   cudaMalloc                           1 call  128K bytes (device)
//   cudaMemcpy H2D  pageable -> device   3 calls 3*128K bytes
//   cudaMemcpy D2H  device -> pageable   3 calls 3*128K bytes
// Child, exec mode: whatever PROG does.
// The parent exits with the child's failure status if the child fails, 77 if
// either process found no GPU.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "common.h"

namespace {

void round_trips(const char* who, size_t n, size_t s, uint32_t seed0) {
  std::vector<unsigned char> src(s), dst(s);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
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

}  // namespace

int main(int argc, char** argv) {
  const bool exec_mode = argc >= 3 && std::string(argv[1]) == "exec";
  const bool spawn_mode = argc >= 3 && std::string(argv[1]) == "spawn";
  if (argc >= 2 && !exec_mode && !spawn_mode) {
    std::fprintf(stderr, "usage: fork_app | fork_app exec PROG [ARGS...] | fork_app spawn PROG [ARGS...]\n");
    return 2;
  }
  std::fflush(stdout);
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
    std::exit(0);  // exit(), not _exit(): atexit handlers (a tracer's flush) must run
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
