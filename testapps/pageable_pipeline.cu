// pageable_pipeline [STEPS=8] [S=256M] [CHUNK=32M]   (GPU only; built by nvcc with static and shared cudart)
// A chunked pipeline over a large PAGEABLE input: the case where pinning
// (register) or staging must win. The input is one std::vector of S bytes,
// filled once and reused every step. Each step (1 warm-up + STEPS timed), on
// one created stream, for each of C = ceil(S/CHUNK) chunks:
//   cudaMemcpyAsync H2D of the chunk from the pageable input,
//   kernel `transform` on the chunk, in place,
//   cudaMemcpyAsync D2H of the chunk into a pageable output vector;
// then cudaStreamSynchronize. The timed part of a step is from the first copy
// to the synchronize's return. After it the host checks every output byte
// (the transform depends on the byte, its position and the step, so a stale,
// misplaced or dropped chunk fails) and folds the output into the checksum.
//
// Prints:
//   pageable_pipeline: steps=STEPS S=S CHUNK=CHUNK chunks=C median_step_us=<us> min_step_us=<us>
//       GBps=<2*S / median step, both directions>
//   pageable_pipeline: checksum=<16 hex digits>     (of every step's output: the same in every run)
//
// Exact traffic (N = STEPS + 1, the warm-up included; C chunks of CHUNK bytes,
// the last one S - (C-1)*CHUNK):
//   cudaMalloc                                 1 call     S bytes
//   cudaMemcpyAsync H2D  pageable -> device    N*C calls  N*S bytes   (created stream)
//   cudaMemcpyAsync D2H  device -> pageable    N*C calls  N*S bytes   (created stream)
//   kernel launches                            N*C
#include <algorithm>
#include <chrono>
#include <vector>

#include "common.h"

namespace {

constexpr int kThreads = 256;

__host__ __device__ inline unsigned char transformed(unsigned char b, size_t at, unsigned char key) {
  return static_cast<unsigned char>((b ^ key) + static_cast<unsigned char>(at) +
                                    static_cast<unsigned char>(at >> 11));
}

// `chunk` starts at byte `base` of the whole buffer.
__global__ void transform(unsigned char* chunk, size_t len, size_t base, unsigned char key) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < len; i += size_t(gridDim.x) * blockDim.x)
    chunk[i] = transformed(chunk[i], base + i, key);
}

unsigned char key_of(size_t step) { return static_cast<unsigned char>(step * 37 + 11); }

}  // namespace

int main(int argc, char** argv) {
  const size_t steps = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 256 << 20);
  const size_t chunk = testapp::arg_size(argc, argv, 3, 32 << 20);
  TA_ASSERT(steps > 0 && s > 0 && chunk > 0);
  testapp::require_gpu("pageable_pipeline");
  const size_t chunks = (s + chunk - 1) / chunk;

  int device = 0, sms = 0;
  TA_CHECK(cudaGetDevice(&device));
  TA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = std::max(1, sms) * 8;

  std::vector<unsigned char> input(s), output(s);  // pageable, both
  testapp::fill(input.data(), s, 0x9a9e);
  unsigned char* d_buf = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_buf), s));  // site: device buffer (S bytes)
  cudaStream_t stream;
  TA_CHECK(cudaStreamCreate(&stream));

  std::vector<double> step_us;
  uint64_t checksum = 0xcbf29ce484222325ull;
  for (size_t step = 0; step <= steps; ++step) {  // step 0: warm-up, not timed
    const unsigned char key = key_of(step);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t at = 0; at < s; at += chunk) {
      const size_t len = std::min(chunk, s - at);
      TA_CHECK(cudaMemcpyAsync(d_buf + at, input.data() + at, len, cudaMemcpyHostToDevice, stream));
      transform<<<blocks, kThreads, 0, stream>>>(d_buf + at, len, at, key);
      TA_CHECK(cudaGetLastError());
      TA_CHECK(cudaMemcpyAsync(output.data() + at, d_buf + at, len, cudaMemcpyDeviceToHost, stream));
    }
    TA_CHECK(cudaStreamSynchronize(stream));
    const auto t1 = std::chrono::steady_clock::now();
    if (step > 0) step_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());

    for (size_t k = 0; k < s; ++k) {
      if (output[k] != transformed(input[k], k, key)) {
        std::fprintf(stderr, "pageable_pipeline: step %zu: byte %zu of %zu is %u, expected %u\n", step, k, s,
                     output[k], transformed(input[k], k, key));
        testapp::fail("output matches the transform of the input", __FILE__, __LINE__);
      }
    }
    // FNV-1a over 8-byte words (and the tail byte by byte): cheap next to the check above.
    size_t k = 0;
    for (; k + 8 <= s; k += 8) {
      uint64_t w;
      std::memcpy(&w, output.data() + k, 8);
      checksum = (checksum ^ w) * 0x100000001b3ull;
    }
    for (; k < s; ++k) checksum = (checksum ^ output[k]) * 0x100000001b3ull;
  }
  const double med = testapp::median(step_us);
  std::printf(
      "pageable_pipeline: steps=%zu S=%zu CHUNK=%zu chunks=%zu median_step_us=%.1f min_step_us=%.1f "
      "GBps=%.2f\n",
      steps, s, chunk, chunks, med, *std::min_element(step_us.begin(), step_us.end()),
      2.0 * static_cast<double>(s) / (med * 1e3));
  std::printf("pageable_pipeline: checksum=%016llx\n", static_cast<unsigned long long>(checksum));
  TA_CHECK(cudaStreamDestroy(stream));
  TA_CHECK(cudaFree(d_buf));
  testapp::done("pageable_pipeline");
  return 0;
}
