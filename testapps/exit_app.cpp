// exit_app exit CODE | signal [SIGNUM=15] | _exit CODE | _Exit CODE | handler_exit CODE | two_exits CODE |
//          abort | thread_exit CODE
// One known copy, then: exit(CODE); raise(SIGNUM); _exit(CODE) or _Exit(CODE)
// at once (no exit handler runs: the tracer must finish its trace there);
// _exit(CODE) from a SIGUSR1 handler; _exit(CODE) from a second thread 1 ms
// after main's (the second must not cut the first's finish); abort() after 200 ms (four flush
// periods: the copy's event is on disk, though nothing else runs); or
// exit(CODE) called from another thread while main waits for it. Checks that
// a tracer passes the app's exit status or death by signal through unchanged,
// and what each way of ending leaves in the trace.
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

namespace {
volatile sig_atomic_t g_code = 0;  // handler_exit's status, read by the handler
}  // namespace

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "";
  if (how != "exit" && how != "signal" && how != "_exit" && how != "_Exit" && how != "handler_exit" &&
      how != "two_exits" && how != "abort" && how != "thread_exit") {
    std::fprintf(stderr,
                 "usage: exit_app exit CODE | signal [SIGNUM] | _exit CODE | _Exit CODE | handler_exit CODE | "
                 "two_exits CODE | abort | thread_exit CODE\n");
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
  if (how == "_exit") _exit(code);
  if (how == "_Exit") std::_Exit(code);
  if (how == "two_exits") {
    std::thread([code] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      _exit(code);
    }).detach();
    _exit(code);
  }
  if (how == "handler_exit") {
    g_code = code;
    struct sigaction sa {};
    sa.sa_handler = [](int) { _exit(g_code); };
    sigemptyset(&sa.sa_mask);
    TA_ASSERT(sigaction(SIGUSR1, &sa, nullptr) == 0);
    std::raise(SIGUSR1);
    return 1;  // not reached
  }
  if (how == "abort") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::abort();
  }
  if (how == "thread_exit") {
    std::thread t([code] { std::exit(code); });
    t.join();  // never returns: exit runs the handlers and ends the process from the other thread
  }
  std::raise(argc > 2 ? std::atoi(argv[2]) : SIGTERM);
  return 1;  // not reached unless the signal is ignored
}
