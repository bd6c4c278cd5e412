// A plugin with its own libcudart (testapps/CMakeLists.txt builds it beside
// a copy of the simulated runtime in each of three folders, found through the
// plugin's RUNPATH): runtime_plugins_host.cpp loads it with dlopen's default,
// RTLD_LOCAL, so that the runtime it links stays outside the global scope
// and every runtime call it makes belongs to that runtime alone.
//
//   runtime_plugin_roundtrip(tag)     cudaMalloc, a 64 KiB H2D and D2H round
//                                     trip checked byte for byte, cudaFree;
//                                     prints "<tag>: roundtrip ok"
//   runtime_plugin_invalid_copy(tag)  a copy with an invalid direction, then
//                                     cudaGetLastError(): both must say
//                                     cudaErrorInvalidMemcpyDirection, since
//                                     the error belongs to this runtime
//   runtime_plugin_last_error()       this runtime's cudaGetLastError()
// Each returns 0 when its checks passed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <vector>

#define PLUGIN_API extern "C" __attribute__((visibility("default")))

PLUGIN_API int runtime_plugin_roundtrip(const char* tag) {
  constexpr size_t kBytes = 64 << 10;
  std::vector<unsigned char> src(kBytes), dst(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  void* d = nullptr;
  cudaError_t e = cudaMalloc(&d, kBytes);
  if (e == cudaSuccess) e = cudaMemcpy(d, src.data(), kBytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dst.data(), d, kBytes, cudaMemcpyDeviceToHost);
  if (d && e == cudaSuccess) e = cudaFree(d);
  if (e != cudaSuccess) {
    std::printf("%s: roundtrip failed: %s\n", tag, cudaGetErrorName(e));
    return 1;
  }
  if (std::memcmp(src.data(), dst.data(), kBytes) != 0) {
    std::printf("%s: roundtrip moved the wrong bytes\n", tag);
    return 1;
  }
  std::printf("%s: roundtrip ok\n", tag);
  return 0;
}

PLUGIN_API int runtime_plugin_invalid_copy(const char* tag) {
  char a[16] = {}, b[16] = {};
  const cudaError_t returned = cudaMemcpy(a, b, sizeof a, static_cast<cudaMemcpyKind>(99));
  const cudaError_t last = cudaGetLastError();
  std::printf("%s: invalid copy returned %s, last error %s\n", tag, cudaGetErrorName(returned),
              cudaGetErrorName(last));
  return returned == cudaErrorInvalidMemcpyDirection && last == returned ? 0 : 1;
}

PLUGIN_API int runtime_plugin_last_error() { return static_cast<int>(cudaGetLastError()); }
