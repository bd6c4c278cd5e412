// passthrough_reasons [N=3] [SMALL=64K] [BIG=8M]
// Pageable copies that the pinned rewrite (cuxfer record --rewrite=pin) leaves
// as made, each for a known reason, beside copies it stages. Run under the
// rewrite with registration off (CUXFER_REGISTER=off) and a staging pool of one
// 8 MiB buffer (CUXFER_PINNED_BUDGET=16M: the pool takes half), on the
// simulated CUDA with SIMCUDA_EVENTS_PENDING=1 (an async copy's DMA counts as
// in flight until the app synchronises), its copies meet these reasons
// (e2e.rewrite.passthrough_reasons.*, run_passthrough_reasons.py):
//   below the H2D staging threshold (8 MiB)  cudaMemcpy H2D of SMALL          N calls
//   below the D2H staging threshold (256 KiB) cudaMemcpy D2H of SMALL/2       N calls
//   2D copy                                   cudaMemcpy2D H2D and D2H        1 call each
//   no staging buffer free                    the second of two cudaMemcpyAsync
//                                             H2D of BIG on one stream: the first
//                                             holds the pool's one buffer    N calls
// and the rewrite stages the first async H2D of each round and the D2H copies
// of BIG that check both (3N calls).
//
// Exact traffic:
//   cudaMalloc                               3 calls  2*BIG + SMALL bytes (device)
//   cudaMallocPitch                          1 call   (device; pitch is the device's)
//   cudaMemcpy      H2D pageable -> device   N calls  N*SMALL bytes
//   cudaMemcpy      D2H device -> pageable   N calls  N*SMALL/2 bytes
//   cudaMemcpy2D    H2D pageable -> device   1 call   W*H bytes (W=1000, H=64)
//   cudaMemcpy2D    D2H device -> pageable   1 call   W*H bytes
//   cudaMemcpyAsync H2D pageable -> device   2N calls 2N*BIG bytes
//   cudaMemcpy      D2H device -> pageable   2N calls 2N*BIG bytes
// Every byte moved is checked.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 3);
  const size_t small = testapp::arg_size(argc, argv, 2, 64 << 10);
  const size_t big = testapp::arg_size(argc, argv, 3, 8 << 20);
  constexpr size_t kW = 1000, kH = 64, kHostPitch = 1100;
  TA_ASSERT(small >= 2);
  testapp::require_gpu("passthrough_reasons");
  void *d_small = nullptr, *d_a = nullptr, *d_b = nullptr, *d_image = nullptr;
  size_t pitch = 0;
  TA_CHECK(cudaMalloc(&d_small, small));
  TA_CHECK(cudaMalloc(&d_a, big));
  TA_CHECK(cudaMalloc(&d_b, big));
  TA_CHECK(cudaMallocPitch(&d_image, &pitch, kW, kH));
  cudaStream_t stream = nullptr;
  TA_CHECK(cudaStreamCreate(&stream));

  // Small copies: under both staging thresholds.
  std::vector<unsigned char> s_src(small), s_dst(small / 2);
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(i + 1);
    testapp::fill(s_src.data(), small, seed);
    TA_CHECK(cudaMemcpy(d_small, s_src.data(), small, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(s_dst.data(), d_small, small / 2, cudaMemcpyDeviceToHost));
    TA_ASSERT(std::memcmp(s_dst.data(), s_src.data(), small / 2) == 0);
  }

  // A 2D round trip: the rewrite takes 1D copies only.
  std::vector<unsigned char> image(kHostPitch * kH), back(kHostPitch * kH, 0xEE);
  testapp::fill(image.data(), image.size(), 7);
  TA_CHECK(cudaMemcpy2D(d_image, pitch, image.data(), kHostPitch, kW, kH, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy2D(back.data(), kHostPitch, d_image, pitch, kW, kH, cudaMemcpyDeviceToHost));
  for (size_t y = 0; y < kH; ++y) TA_ASSERT(std::memcmp(&back[y * kHostPitch], &image[y * kHostPitch], kW) == 0);

  // Two async H2D copies back to back on one stream: the first is staged
  // through the pool's one buffer, whose DMA is still in flight when the
  // second comes, so the second finds no buffer free.
  std::vector<unsigned char> a(big), b(big), check(big);
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(100 + 2 * i);
    testapp::fill(a.data(), big, seed);
    testapp::fill(b.data(), big, seed + 1);
    TA_CHECK(cudaMemcpyAsync(d_a, a.data(), big, cudaMemcpyHostToDevice, stream));
    TA_CHECK(cudaMemcpyAsync(d_b, b.data(), big, cudaMemcpyHostToDevice, stream));
    TA_CHECK(cudaStreamSynchronize(stream));
    TA_CHECK(cudaMemcpy(check.data(), d_a, big, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(check.data(), big, seed));
    TA_CHECK(cudaMemcpy(check.data(), d_b, big, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(check.data(), big, seed + 1));
  }

  TA_CHECK(cudaStreamDestroy(stream));
  TA_CHECK(cudaFree(d_image));
  TA_CHECK(cudaFree(d_b));
  TA_CHECK(cudaFree(d_a));
  TA_CHECK(cudaFree(d_small));
  testapp::done("passthrough_reasons");
  return 0;
}
