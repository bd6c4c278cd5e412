// exit_app exit CODE | signal [SIGNUM=15] | _exit CODE | abort | thread_exit CODE
// One known copy, then: exit(CODE); raise(SIGNUM); _exit(CODE) or abort()
// after 200 ms (four flush periods: the copy's event is on disk, though no
// exit handler runs); or exit(CODE) called from another thread while main
// waits for it. Checks that a tracer passes the app's exit status or death by
// signal through unchanged, and what each way of ending leaves in the trace.
//
// Exact traffic:
//   cudaMalloc                           1 call  4096 bytes (device)
//   cudaMemcpy H2D  pageable -> device   1 call  4096 bytes
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "";
  if (how != "exit" && how != "signal" && how != "_exit" && how != "abort" && how != "thread_exit") {
    std::fprintf(stderr, "usage: exit_app exit CODE | signal [SIGNUM] | _exit CODE | abort | thread_exit CODE\n");
    return 2;
  }
  testapp::require_gpu("exit_app");
  std::vector<unsigned char> src(4096);
  testapp::fill(src.data(), src.size(), 3);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, src.size()));
  TA_CHECK(cudaMemcpy(d, src.data(), src.size(), cudaMemcpyHostToDevice));
  std::fflush(stdout);
  const int code = argc > 2 ? std::atoi(argv[2]) : 3;
  if (how == "exit") std::exit(code);
  if (how == "_exit" || how == "abort") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (how == "abort") std::abort();
    _exit(code);
  }
  if (how == "thread_exit") {
    std::thread t([code] { std::exit(code); });
    t.join();  // never returns: exit runs the handlers and ends the process from the other thread
  }
  std::raise(argc > 2 ? std::atoi(argv[2]) : SIGTERM);
  return 1;  // not reached unless the signal is ignored
}
