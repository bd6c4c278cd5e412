// ctor_order [N=4] [S=2M]
//
// Linked against libctor_b.so and libctor_a.so (libctor_b depends on
// libctor_a): libctor_a's constructor calls malloc, libctor_b's aborts unless
// libctor_a's has finished -- the shape of libcublasLt/libcublas, which
// crashed under `cuxfer record --rewrite=pin` when the libc hooks' first
// RTLD_NEXT lookup (inside libcublasLt's constructor) dlopen()ed libcublas
// and so ran its constructors too early. Exit 0 means both constructors ran
// in order before main; the copies then check the rewrite still works.
//
// Whether a dlopen that finds an object loaded but not yet initialised runs
// its constructors there depends on the glibc (the one the crash was seen
// with does; 2.36 does not, and returns the handle without running them). So
// that the test fails wherever the shim does that, this executable exports a
// dlopen (every dlopen in the process binds to it: the executable comes first
// in the global scope) that aborts when libctor_b.so is opened before its
// constructor ran, and otherwise forwards to glibc's.
//
// Exact traffic:
//   cudaMalloc                          1 call   S bytes          (device)
//   cudaMemcpy H2D  pageable -> device  N calls  N*S bytes
//   cudaMemcpy D2H  device -> pageable  N calls  N*S bytes
#include <dlfcn.h>

#include <vector>

#include "common.h"

extern "C" {
extern volatile int ctor_a_done;
extern volatile int ctor_b_done;

__attribute__((visibility("default"))) void* dlopen(const char* file, int mode) {
  if (file && !ctor_b_done) {
    const char* base = std::strrchr(file, '/');
    base = base ? base + 1 : file;
    if (std::strcmp(base, "libctor_b.so") == 0) {
      std::fprintf(stderr,
                   "ctor_order: dlopen(\"%s\", 0x%x) before libctor_b's constructor ran (a glibc that runs "
                   "it from here runs it out of dependency order)\n",
                   file, static_cast<unsigned>(mode));
      std::abort();
    }
  }
  using Fn = void* (*)(const char*, int);
  auto real = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34"));
  if (!real) real = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5"));
  return real ? real(file, mode) : nullptr;
}
}

int main(int argc, char** argv) {
  TA_ASSERT(ctor_a_done == 1);
  TA_ASSERT(ctor_b_done == 1);
  const size_t n = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 2 << 20);
  testapp::require_gpu("ctor_order");
  std::vector<unsigned char> src(s), dst(s);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, static_cast<uint32_t>(i));
    std::memset(dst.data(), 0, s);
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst.data(), s, static_cast<uint32_t>(i)));
  }
  TA_CHECK(cudaFree(d));
  testapp::done("ctor_order");
  return 0;
}
