// zc_params [STEPS=2000] [P=256]   (GPU only; built by nvcc with static and shared cudart)
// The case zero-copy is for: a loop that updates a small parameter buffer and
// reads back one scalar every step. Each step (1 warm-up + STEPS timed):
//   1. the host rewrites all P bytes of a pageable parameter vector
//      (deterministic from the step number),
//   2. cudaMemcpy H2D of the P bytes into the device parameter buffer,
//   3. kernel `compute` (64 blocks of 256 threads): each block reads the
//      parameters once into shared memory, writes work[i] for all of a 1 Mi
//      float work array, and adds an integer checksum of what it wrote into a
//      device scratch word; kernel `publish` (1 thread) moves the total into
//      the 8-byte result buffer,
//   4. cudaMemcpy D2H of the 8-byte result into pageable memory, checked
//      against the value the host predicts from the parameters (every step).
// With the parameter and result allocations made zero-copy (policy path
// zero_copy), steps 2 and 4 become host memcpys and the kernel reads the P
// bytes over the bus: the median step time must drop. The app prints it, so
// runs with and without a policy can be compared per step.
//
// Prints:
//   zc_params: steps=STEPS P=P work=1048576 floats median_step_us=<us> min_step_us=<us>
//   zc_params: checksum=<16 hex digits>     (a fold of every step's result: the same in every run)
//
// Exact traffic (N = STEPS + 1, the warm-up included):
//   cudaMalloc                            4 calls  P + 8 + 4 MiB + 8 bytes
//                                         (params, result, work, scratch: one call site each)
//   cudaMemcpy H2D  pageable -> device    N calls  N*P bytes   (into params)
//   cudaMemcpy D2H  device -> pageable    N calls  N*8 bytes   (out of result)
//   kernel launches                       2N + 1   (compute, publish per step; clear_total once)
#include <algorithm>
#include <chrono>
#include <vector>

#include "common.h"
#include "device_sum.cuh"

namespace {

constexpr size_t kWorkFloats = size_t(1) << 20;
constexpr int kBlocks = 64;
constexpr int kThreads = 256;

// The value written to work[i] and its weight in the checksum. Integers below
// 2^24, so the float store is exact.
__host__ __device__ inline uint32_t work_value(uint32_t param, uint32_t i) {
  return param * (i & 0xff) + (i & 0xfff);
}
__host__ __device__ inline uint32_t weight(uint32_t i) { return i % 7 + 1; }

__global__ void compute(const unsigned char* params, uint32_t p, float* work, uint32_t n,
                        unsigned long long* total) {
  extern __shared__ unsigned char shared_params[];
  for (uint32_t b = threadIdx.x; b < p; b += blockDim.x) shared_params[b] = params[b];  // the one read
  __syncthreads();
  unsigned long long acc = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t v = work_value(shared_params[i % p], i);
    work[i] = static_cast<float>(v);
    acc += static_cast<unsigned long long>(v) * weight(i);
  }
  add_to_total(acc, total);
}

unsigned char param_byte(uint64_t step, uint32_t b) {
  uint64_t x = step * 0x9e3779b97f4a7c15ull + b * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return static_cast<unsigned char>(x);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t steps = testapp::arg_size(argc, argv, 1, 2000);
  const size_t p = testapp::arg_size(argc, argv, 2, 256);
  TA_ASSERT(steps > 0);
  TA_ASSERT(p > 0 && p <= 32 * 1024);  // the kernel keeps the parameters in shared memory
  testapp::require_gpu("zc_params");

  // The host's prediction: result = sum_i work_value(param[i % P], i) * weight(i)
  //   = sum_b param[b] * per_param[b] + base, with per_param and base fixed for the run.
  std::vector<uint64_t> per_param(p, 0);
  uint64_t base = 0;
  for (uint32_t i = 0; i < kWorkFloats; ++i) {
    per_param[i % p] += uint64_t(i & 0xff) * weight(i);
    base += uint64_t(i & 0xfff) * weight(i);
  }

  // Allocation sites: each cudaMalloc below is its own call site, which is what
  // a policy names. Keep them on separate lines and out of any helper.
  unsigned char* d_params = nullptr;
  unsigned long long* d_result = nullptr;
  float* d_work = nullptr;
  unsigned long long* d_scratch = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_params), p));  // site: parameter buffer (P bytes)
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_result), 8));  // site: result scalar (8 bytes)
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_work), kWorkFloats * sizeof(float)));  // site: work array
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_scratch), 8));  // site: device-only atomic total
  clear_total<<<1, 1>>>(d_scratch);
  TA_CHECK(cudaGetLastError());

  std::vector<unsigned char> params(p);  // pageable
  std::vector<uint64_t> result(1);       // pageable
  std::vector<double> step_us;
  uint64_t checksum = 0xcbf29ce484222325ull;
  for (size_t step = 0; step <= steps; ++step) {  // step 0: warm-up, not timed
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t expect = base;
    for (uint32_t b = 0; b < p; ++b) {
      params[b] = param_byte(step, b);
      expect += params[b] * per_param[b];
    }
    TA_CHECK(cudaMemcpy(d_params, params.data(), p, cudaMemcpyHostToDevice));
    compute<<<kBlocks, kThreads, p>>>(d_params, static_cast<uint32_t>(p), d_work, kWorkFloats, d_scratch);
    TA_CHECK(cudaGetLastError());
    publish<<<1, 1>>>(d_scratch, d_result);
    TA_CHECK(cudaGetLastError());
    TA_CHECK(cudaMemcpy(result.data(), d_result, 8, cudaMemcpyDeviceToHost));
    if (result[0] != expect)
      std::fprintf(stderr, "zc_params: step %zu: result %016llx, expected %016llx\n", step,
                   static_cast<unsigned long long>(result[0]), static_cast<unsigned long long>(expect));
    TA_ASSERT(result[0] == expect);
    checksum = fold_checksum(checksum, result[0]);
    const auto t1 = std::chrono::steady_clock::now();
    if (step > 0) step_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::printf("zc_params: steps=%zu P=%zu work=%zu floats median_step_us=%.2f min_step_us=%.2f\n", steps, p,
              kWorkFloats, testapp::median(step_us), *std::min_element(step_us.begin(), step_us.end()));
  std::printf("zc_params: checksum=%016llx\n", static_cast<unsigned long long>(checksum));
  TA_CHECK(cudaFree(d_scratch));
  TA_CHECK(cudaFree(d_work));
  TA_CHECK(cudaFree(d_result));
  TA_CHECK(cudaFree(d_params));
  testapp::done("zc_params");
  return 0;
}
