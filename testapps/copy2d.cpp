// copy2d [W=1000] [H=64] [HP=1100]
// cudaMemcpy2D both ways between a pageable host image (row pitch HP) and a
// cudaMallocPitch'd device image (the device's pitch, 512-aligned on the sim).
//
// Exact traffic (bytes are the payload, W*H, not pitch*H):
//   cudaMallocPitch                         1 call   pitch*H bytes (device; pitch is the device's)
//   cudaMemcpy2D H2D  pageable -> device    1 call   W*H bytes
//   cudaMemcpy2D D2H  device -> pageable    1 call   W*H bytes
// The destination's row padding (bytes W..HP-1) must be left untouched.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t w = testapp::arg_size(argc, argv, 1, 1000);
  const size_t h = testapp::arg_size(argc, argv, 2, 64);
  const size_t hp = testapp::arg_size(argc, argv, 3, 1100);
  TA_ASSERT(hp >= w);
  testapp::require_gpu("copy2d");
  std::vector<unsigned char> src(hp * h), dst(hp * h, 0xEE);
  testapp::fill(src.data(), src.size(), 7);
  void* d = nullptr;
  size_t pitch = 0;
  TA_CHECK(cudaMallocPitch(&d, &pitch, w, h));
  TA_ASSERT(pitch >= w);
  TA_CHECK(cudaMemcpy2D(d, pitch, src.data(), hp, w, h, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy2D(dst.data(), hp, d, pitch, w, h, cudaMemcpyDeviceToHost));
  for (size_t y = 0; y < h; ++y) {
    TA_ASSERT(std::memcmp(&dst[y * hp], &src[y * hp], w) == 0);
    for (size_t x = w; x < hp; ++x) TA_ASSERT(dst[y * hp + x] == 0xEE);
  }
  TA_CHECK(cudaFree(d));
  testapp::done("copy2d");
  return 0;
}
