// zc_legacy_order [STEPS=2000]   (GPU only; nvcc, static and shared cudart)
// Copies on an ordinary (blocking) stream that must wait for a kernel still
// running on the legacy default stream: what a zero-copy policy must keep.
// Under a zero_copy policy for its three small device buffers the shim turns
// their copies into host memcpys; one that ignored stream 0 would read the
// result before the kernel wrote it, or overwrite the parameters while the
// kernel still reads them, and the check below fails.
//
// Each step (64-byte buffers, allocation sites: params, result, snapshot):
//   1. `write_late` on stream 0: spins ~20 us, then writes result[i] = f(step, i);
//   2. cudaMemcpyAsync D2H of result on the blocking stream, stream sync:
//      must read f(step, i) (stream 0's kernel runs first);
//   3. `snapshot_late` on stream 0: spins, then copies params into snapshot;
//   4. the host rewrites its params (step + 1); cudaMemcpyAsync H2D into
//      params on the blocking stream, stream sync: must land after step 3;
//   5. cudaMemcpy D2H of snapshot: must hold step's params, not step + 1's.
// Prints "zc_legacy_order: steps=N checksum=<hex> OK"; exits 1 at the first wrong value.
//
// Exact traffic: cudaMalloc 3 x 64 B; per step (STEPS + 1, a warm-up) 64 B
// H2D async, 64 B D2H async, 64 B D2H sync (and one 64 B H2D before the loop).
#include <cstdint>

#include "common.h"

namespace {

constexpr int kWords = 8;  // 64 bytes

__host__ __device__ inline uint64_t value(uint64_t step, int i) {
  uint64_t x = step * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 31;
  return x * 0x94d049bb133111ebull;
}

__device__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void write_late(uint64_t* result, uint64_t step, long long cycles) {
  spin(cycles);
  for (int i = 0; i < kWords; ++i) result[i] = value(step, i);
}

__global__ void snapshot_late(const uint64_t* params, uint64_t* snapshot, long long cycles) {
  spin(cycles);
  for (int i = 0; i < kWords; ++i) snapshot[i] = params[i];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t steps = testapp::arg_size(argc, argv, 1, 2000);
  testapp::require_gpu("zc_legacy_order");
  int clock_khz = 0;
  TA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  TA_ASSERT(clock_khz > 0);  // else no spin, and the order checks would prove little
  const long long cycles = static_cast<long long>(clock_khz) * 20 / 1000;  // ~20 us

  // Allocation sites: one line each (a policy names them).
  uint64_t* d_params = nullptr;
  uint64_t* d_result = nullptr;
  uint64_t* d_snapshot = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_params), kWords * 8));    // site: params
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_result), kWords * 8));    // site: result
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_snapshot), kWords * 8));  // site: snapshot
  cudaStream_t s;
  TA_CHECK(cudaStreamCreate(&s));  // blocking: orders after the legacy default stream

  uint64_t params[kWords], result[kWords], snap[kWords];
  for (int i = 0; i < kWords; ++i) params[i] = value(1000003, i);
  TA_CHECK(cudaMemcpy(d_params, params, sizeof params, cudaMemcpyHostToDevice));
  uint64_t checksum = 0xcbf29ce484222325ull;
  for (uint64_t step = 0; step <= steps; ++step) {
    write_late<<<1, 1, 0, 0>>>(d_result, step, cycles);
    TA_CHECK(cudaGetLastError());
    TA_CHECK(cudaMemcpyAsync(result, d_result, sizeof result, cudaMemcpyDeviceToHost, s));
    TA_CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < kWords; ++i) {
      if (result[i] != value(step, i))
        std::fprintf(stderr, "zc_legacy_order: step %llu: result[%d] read before stream 0's kernel wrote it\n",
                     static_cast<unsigned long long>(step), i);
      TA_ASSERT(result[i] == value(step, i));
      checksum = (checksum ^ result[i]) * 0x100000001b3ull;
    }
    uint64_t expect[kWords];  // what the kernel must copy: the params before this step's upload
    for (int i = 0; i < kWords; ++i) expect[i] = params[i];
    snapshot_late<<<1, 1, 0, 0>>>(d_params, d_snapshot, cycles);
    TA_CHECK(cudaGetLastError());
    for (int i = 0; i < kWords; ++i) params[i] = value(step + 1000003 + 1, i);
    TA_CHECK(cudaMemcpyAsync(d_params, params, sizeof params, cudaMemcpyHostToDevice, s));
    TA_CHECK(cudaStreamSynchronize(s));
    TA_CHECK(cudaMemcpy(snap, d_snapshot, sizeof snap, cudaMemcpyDeviceToHost));
    for (int i = 0; i < kWords; ++i) {
      if (snap[i] != expect[i])
        std::fprintf(stderr, "zc_legacy_order: step %llu: params overwritten while stream 0's kernel read them\n",
                     static_cast<unsigned long long>(step));
      TA_ASSERT(snap[i] == expect[i]);
      checksum = (checksum ^ snap[i]) * 0x100000001b3ull;
    }
  }
  TA_CHECK(cudaStreamDestroy(s));
  TA_CHECK(cudaFree(d_snapshot));
  TA_CHECK(cudaFree(d_result));
  TA_CHECK(cudaFree(d_params));
  std::printf("zc_legacy_order: steps=%zu checksum=%016llx OK\n", steps, static_cast<unsigned long long>(checksum));
  return 0;
}
