// redundant_copies [MODE=redundant|clean] [S=2M]
// Made for the fingerprint findings (duplicate_uploads, round_trips) and its
// clean twin, which moves the same number of bytes with new data every time.
//
// redundant: host buffer A uploaded 3 times, unchanged, to device buffer dA
//              (2 duplicate uploads); device buffer dB downloaded into H,
//              then H uploaded unchanged to dC (1 round trip)
// clean:     A refilled before each of the 3 uploads; H modified on the host
//              before it is uploaded to dC
// Exact traffic either way: cudaMalloc 3 × S; cudaMemcpy H2D pageable 5 calls
// 5·S (4 + 1 to seed dB), D2H pageable 2 calls 2·S (download + final check).
#include <string>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "redundant";
  const size_t s = testapp::arg_size(argc, argv, 2, 2 << 20);
  TA_ASSERT(mode == "redundant" || mode == "clean");
  testapp::require_gpu("redundant_copies");
  const bool clean = mode == "clean";
  std::vector<unsigned char> a(s), h(s), check(s);
  unsigned char *da = nullptr, *db = nullptr, *dc = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&da), s));
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&db), s));
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dc), s));
  testapp::fill(a.data(), s, 1);
  for (uint32_t i = 0; i < 3; ++i) {
    if (clean) testapp::fill(a.data(), s, 10 + i);
    TA_CHECK(cudaMemcpy(da, a.data(), s, cudaMemcpyHostToDevice));
  }
  testapp::fill(h.data(), s, 7);
  TA_CHECK(cudaMemcpy(db, h.data(), s, cudaMemcpyHostToDevice));  // seed dB
  std::fill(h.begin(), h.end(), 0);
  TA_CHECK(cudaMemcpy(h.data(), db, s, cudaMemcpyDeviceToHost));  // download
  TA_ASSERT(testapp::matches(h.data(), s, 7));
  if (clean) testapp::fill(h.data(), s, 8);                         // the host step changes it
  TA_CHECK(cudaMemcpy(dc, h.data(), s, cudaMemcpyHostToDevice));  // upload back
  TA_CHECK(cudaMemcpy(check.data(), dc, s, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(check.data(), s, clean ? 8 : 7));
  TA_CHECK(cudaFree(da));
  TA_CHECK(cudaFree(db));
  TA_CHECK(cudaFree(dc));
  testapp::done("redundant_copies");
  return 0;
}
