// user_data [N=4] [S=1M]
// Copies host data that must never reach a trace: every buffer is filled with
// a recognizable text ("cuxfer-user-data-must-not-leak <i>" repeated), which
// tests/e2e/run_no_user_data.py looks for in the trace's decompressed bytes.
// The text is built at run time, so it is not in argv or the environment.
//
// Exact traffic, per round i < N:
//   cudaMemcpy H2D  pageable -> device  1 call  S bytes
//   cudaMemcpy H2D  pageable -> device  1 call  64 bytes   (the same text every round)
//   cudaMemcpy D2H  device -> pageable  1 call  S bytes    (checked against what went up)
// plus cudaMalloc of S bytes and of 64 bytes, once.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace {

void fill_text(std::vector<char>& buf, size_t round) {
  std::string t = "cuxfer-user-data-";
  t += "must-not-leak ";
  t += std::to_string(round) + " ";
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = t[i % t.size()];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("user_data");
  std::vector<char> up(s), down(s), small(64);
  void *d = nullptr, *d_small = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  TA_CHECK(cudaMalloc(&d_small, small.size()));
  for (size_t i = 0; i < n; ++i) {
    fill_text(up, i);
    fill_text(small, 0);  // the same every round: a duplicate upload, which only fingerprints show
    TA_CHECK(cudaMemcpy(d, up.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(d_small, small.data(), small.size(), cudaMemcpyHostToDevice));
    std::memset(down.data(), 0, s);
    TA_CHECK(cudaMemcpy(down.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(std::memcmp(up.data(), down.data(), s) == 0);
  }
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaFree(d_small));
  testapp::done("user_data");
  return 0;
}
