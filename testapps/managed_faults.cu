// managed_faults [faults|prefetch] [N=6] [S=256M]   (GPU only; built by nvcc)
// Unified memory moved by page faults, and its clean twin that prefetches.
//
// Each of N steps: the host writes all of a cudaMallocManaged buffer of S
// bytes, a kernel adds 1 to every byte, the host checks every byte.
//   faults    pages move when touched: GPU page faults migrate them H2D, the
//             host's reads fault them back D2H (finding "managed_migrations")
//   prefetch  cudaMemPrefetchAsync to the GPU before the kernel and back to the
//             host before the check: the same bytes move, none on demand
// Prints the median step time, so the two modes can be compared.
//
// Exact API traffic: 1 cudaMallocManaged of S bytes; prefetch mode adds 2*N
// cudaMemPrefetchAsync calls. No cudaMemcpy.
#include <algorithm>
#include <chrono>
#include <vector>

#include "common.h"

__global__ void add_one(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "faults";
  TA_ASSERT(mode == "faults" || mode == "prefetch");
  const size_t n = testapp::arg_size(argc, argv, 2, 6);
  const size_t s = testapp::arg_size(argc, argv, 3, 256 << 20);
  testapp::require_gpu("managed_faults");
  int device = 0, concurrent = 0;
  TA_CHECK(cudaGetDevice(&device));
  TA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  if (!concurrent) {
    std::printf("managed_faults: SKIP: device %d has no concurrent managed access (no on-demand migration)\n", device);
    return 77;
  }
  unsigned char* m = nullptr;
  TA_CHECK(cudaMallocManaged(reinterpret_cast<void**>(&m), s, cudaMemAttachGlobal));
  cudaStream_t stream;
  TA_CHECK(cudaStreamCreate(&stream));
  cudaMemLocation gpu{}, cpu{};
  gpu.type = cudaMemLocationTypeDevice;
  gpu.id = device;
  cpu.type = cudaMemLocationTypeHost;
  std::vector<double> ms;
  for (size_t i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    testapp::fill(m, s, static_cast<uint32_t>(i));
    if (mode == "prefetch") TA_CHECK(cudaMemPrefetchAsync(m, s, gpu, 0, stream));
    add_one<<<264, 256, 0, stream>>>(m, s);
    TA_CHECK(cudaGetLastError());
    if (mode == "prefetch") TA_CHECK(cudaMemPrefetchAsync(m, s, cpu, 0, stream));
    TA_CHECK(cudaStreamSynchronize(stream));
    // The fill's pattern plus one, byte by byte.
    std::vector<unsigned char> expect(s);
    testapp::fill(expect.data(), s, static_cast<uint32_t>(i));
    for (size_t k = 0; k < s; ++k) TA_ASSERT(m[k] == static_cast<unsigned char>(expect[k] + 1));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("managed_faults: mode %s, %zu steps of %zu bytes, median step %.2f ms\n", mode.c_str(), n, s,
              ms[ms.size() / 2]);
  TA_CHECK(cudaStreamDestroy(stream));
  TA_CHECK(cudaFree(m));
  testapp::done("managed_faults");
  return 0;
}
