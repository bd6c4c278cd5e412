// zc_reread [STEPS=20] [S=64M] [R=100]   (GPU only; built by nvcc with static and shared cudart)
// The case zero-copy must lose: the kernel re-reads its whole input R times.
// Each step (1 warm-up + STEPS timed):
//   1. the host changes 1024 words of a pageable input of S bytes (positions
//      and values deterministic from the step number),
//   2. cudaMemcpy H2D of all S bytes into the device input buffer,
//   3. kernel `reread` makes R passes over the input; pass r starts at a
//      different rotation of the input (so no pass can reuse another's loads,
//      and S > the L2 cache sends every pass to memory) and adds
//      word * (2r+1) into a 64-bit total; kernel `publish` moves the total
//      into the 8-byte result buffer,
//   4. cudaMemcpy D2H of the 8-byte result, checked against the host's
//      prediction sum(words) * R^2 (mod 2^64), every step.
// Made zero-copy, the input would cross the bus R times per step instead of
// once: the step gets far slower, and `cuxfer tune` must reject that policy.
//
// Prints:
//   zc_reread: steps=STEPS S=S R=R median_step_us=<us> min_step_us=<us>
//   zc_reread: checksum=<16 hex digits>     (a fold of every step's result: the same in every run)
//
// Exact traffic (N = STEPS + 1, the warm-up included):
//   cudaMalloc                            3 calls  S + 8 + 8 bytes
//                                         (input, result, scratch: one call site each)
//   cudaMemcpy H2D  pageable -> device    N calls  N*S bytes   (into input)
//   cudaMemcpy D2H  device -> pageable    N calls  N*8 bytes   (out of result)
//   kernel launches                       2N + 1   (reread, publish per step; clear_total once)
#include <algorithm>
#include <chrono>
#include <vector>

#include "common.h"
#include "device_sum.cuh"

namespace {

constexpr int kThreads = 256;
constexpr uint32_t kChangedWordsPerStep = 1024;

__global__ void reread(const uint32_t* in, size_t n, uint32_t passes, unsigned long long* total) {
  unsigned long long acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (uint32_t r = 0; r < passes; ++r) {
    // Rotation of pass r: every word once per pass, coalesced, different order each pass.
    const size_t rotation = (uint64_t(r) * 0x9e3779b97f4a7c15ull) % n;
    const unsigned long long mult = 2ull * r + 1;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
      size_t j = i + rotation;
      if (j >= n) j -= n;
      acc += in[j] * mult;
    }
  }
  add_to_total(acc, total);
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t steps = testapp::arg_size(argc, argv, 1, 20);
  const size_t s = testapp::arg_size(argc, argv, 2, 64 << 20);
  const size_t passes = testapp::arg_size(argc, argv, 3, 100);
  TA_ASSERT(steps > 0);
  TA_ASSERT(s >= 4 && s % 4 == 0);  // whole 32-bit words
  TA_ASSERT(passes > 0 && passes < (1u << 31));
  testapp::require_gpu("zc_reread");
  const size_t n = s / 4;

  int device = 0, sms = 0;
  TA_CHECK(cudaGetDevice(&device));
  TA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = std::max(1, sms) * 8;

  std::vector<uint32_t> input(n);  // pageable
  testapp::fill(input.data(), s, 0x5eed);
  uint64_t word_sum = 0;
  for (uint32_t w : input) word_sum += w;
  uint64_t pass_weight = 0;  // sum over passes of (2r+1) = R^2
  for (uint64_t r = 0; r < passes; ++r) pass_weight += 2 * r + 1;

  // Allocation sites: each cudaMalloc below is its own call site, which is what
  // a policy names. Keep them on separate lines and out of any helper.
  uint32_t* d_input = nullptr;
  unsigned long long* d_result = nullptr;
  unsigned long long* d_scratch = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_input), s));    // site: input (S bytes, re-read R times)
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_result), 8));   // site: result scalar (8 bytes)
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_scratch), 8));  // site: device-only atomic total
  clear_total<<<1, 1>>>(d_scratch);
  TA_CHECK(cudaGetLastError());

  std::vector<uint64_t> result(1);  // pageable
  std::vector<double> step_us;
  uint64_t checksum = 0xcbf29ce484222325ull;
  for (size_t step = 0; step <= steps; ++step) {  // step 0: warm-up, not timed
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t k = 0; k < kChangedWordsPerStep; ++k) {
      const uint64_t h = mix(step * 0x9e3779b97f4a7c15ull + k + 1);
      const size_t at = (h >> 32) % n;
      word_sum -= input[at];
      input[at] = static_cast<uint32_t>(h);
      word_sum += input[at];
    }
    TA_CHECK(cudaMemcpy(d_input, input.data(), s, cudaMemcpyHostToDevice));
    reread<<<blocks, kThreads>>>(d_input, n, static_cast<uint32_t>(passes), d_scratch);
    TA_CHECK(cudaGetLastError());
    publish<<<1, 1>>>(d_scratch, d_result);
    TA_CHECK(cudaGetLastError());
    TA_CHECK(cudaMemcpy(result.data(), d_result, 8, cudaMemcpyDeviceToHost));
    const uint64_t expect = word_sum * pass_weight;
    if (result[0] != expect)
      std::fprintf(stderr, "zc_reread: step %zu: result %016llx, expected %016llx\n", step,
                   static_cast<unsigned long long>(result[0]), static_cast<unsigned long long>(expect));
    TA_ASSERT(result[0] == expect);
    checksum = fold_checksum(checksum, result[0]);
    const auto t1 = std::chrono::steady_clock::now();
    if (step > 0) step_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::printf("zc_reread: steps=%zu S=%zu R=%zu median_step_us=%.2f min_step_us=%.2f\n", steps, s, passes,
              testapp::median(step_us), *std::min_element(step_us.begin(), step_us.end()));
  std::printf("zc_reread: checksum=%016llx\n", static_cast<unsigned long long>(checksum));
  TA_CHECK(cudaFree(d_scratch));
  TA_CHECK(cudaFree(d_result));
  TA_CHECK(cudaFree(d_input));
  testapp::done("zc_reread");
  return 0;
}
