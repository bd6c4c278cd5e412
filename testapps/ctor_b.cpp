// libctor_b.so, for ctor_order: depends on libctor_a.so, so the loader runs
// libctor_a's constructor to its end before this one (libcublas.so after
// libcublasLt.so). If something made the loader run this constructor early
// (a dlopen of this library from inside libctor_a's constructor), libctor_a
// has not finished: say so and abort, as libcublas crashes there.
#include <cstdio>
#include <cstdlib>

extern "C" {
extern volatile int ctor_a_done;
__attribute__((visibility("default"))) volatile int ctor_b_done = 0;
}

__attribute__((constructor)) static void ctor_b_init() {
  if (!ctor_a_done) {
    std::fprintf(stderr,
                 "libctor_b: constructor runs before libctor_a's has finished: initialisers run out of "
                 "dependency order (someone dlopen()ed libctor_b.so inside libctor_a's constructor)\n");
    std::abort();
  }
  ctor_b_done = 1;
}
