// mixed [N=2] [S=1M]
// Round trips from three kinds of host memory: pageable (malloc), pinned
// (cudaMallocHost) and registered in place (aligned_alloc + cudaHostRegister).
//
// Exact traffic:
//   cudaMalloc                             1 call   S bytes   (device)
//   cudaMallocHost                         1 call   S bytes   (host_pinned)
//   cudaHostRegister                       1 call   S bytes   (host_registered)
//   cudaMemcpy H2D  pageable -> device     N calls  N*S bytes
//   cudaMemcpy D2H  device -> pageable     N calls  N*S bytes
//   cudaMemcpy H2D  pinned -> device       N calls  N*S bytes
//   cudaMemcpy D2H  device -> pinned       N calls  N*S bytes
//   cudaMemcpy H2D  registered -> device   N calls  N*S bytes
//   cudaMemcpy D2H  device -> registered   N calls  N*S bytes
// Each buffer is filled, copied to the device, cleared, copied back and checked.
#include <cstdlib>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 2);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("mixed");
  const size_t alloc = (s + 4095) / 4096 * 4096;
  void* pageable = std::malloc(s);
  void* pinned = nullptr;
  void* registered = std::aligned_alloc(4096, alloc);
  TA_ASSERT(pageable && registered);
  std::memset(registered, 0, alloc);  // touch it before pinning, as real code does
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  TA_CHECK(cudaMallocHost(&pinned, s));
  TA_CHECK(cudaHostRegister(registered, s, cudaHostRegisterDefault));
  cudaPointerAttributes attr{};
  TA_CHECK(cudaPointerGetAttributes(&attr, static_cast<char*>(registered) + 17));
  TA_ASSERT(attr.type == cudaMemoryTypeHost);
  TA_CHECK(cudaPointerGetAttributes(&attr, pageable));
  TA_ASSERT(attr.type == cudaMemoryTypeUnregistered);
  void* bufs[3] = {pageable, pinned, registered};
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      const auto seed = static_cast<uint32_t>(i * 3 + k);
      testapp::fill(bufs[k], s, seed);
      TA_CHECK(cudaMemcpy(d, bufs[k], s, cudaMemcpyHostToDevice));
      std::memset(bufs[k], 0, s);
      TA_CHECK(cudaMemcpy(bufs[k], d, s, cudaMemcpyDeviceToHost));
      TA_ASSERT(testapp::matches(bufs[k], s, seed));
    }
  }
  TA_CHECK(cudaHostUnregister(registered));
  TA_CHECK(cudaFreeHost(pinned));
  TA_CHECK(cudaFree(d));
  std::free(registered);
  std::free(pageable);
  testapp::done("mixed");
  return 0;
}
