// exit_app exit CODE | exit_app signal [SIGNUM=15]
// One known copy, then exit(CODE) or raise(SIGNUM): checks that a tracer
// passes the app's exit status or death by signal through unchanged.
//
// Exact traffic:
//   cudaMalloc                           1 call  4096 bytes (device)
//   cudaMemcpy H2D  pageable -> device   1 call  4096 bytes
#include <csignal>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  if (argc < 2 || (std::string(argv[1]) != "exit" && std::string(argv[1]) != "signal")) {
    std::fprintf(stderr, "usage: exit_app exit CODE | exit_app signal [SIGNUM]\n");
    return 2;
  }
  testapp::require_gpu("exit_app");
  std::vector<unsigned char> src(4096);
  testapp::fill(src.data(), src.size(), 3);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, src.size()));
  TA_CHECK(cudaMemcpy(d, src.data(), src.size(), cudaMemcpyHostToDevice));
  std::fflush(stdout);
  if (std::string(argv[1]) == "exit") std::exit(argc > 2 ? std::atoi(argv[2]) : 3);
  std::raise(argc > 2 ? std::atoi(argv[2]) : SIGTERM);
  return 1;  // not reached unless the signal is ignored
}
