// libctor_a.so, for ctor_order: a library whose ELF constructor allocates
// (as libcublasLt's does) and only at its very end says it has finished.
#include <cstdlib>
#include <cstring>

extern "C" {
__attribute__((visibility("default"))) volatile int ctor_a_done = 0;
// Kept so that the compiler cannot drop the malloc/free pair.
__attribute__((visibility("default"))) void* volatile ctor_a_scratch = nullptr;
}

__attribute__((constructor)) static void ctor_a_init() {
  // Under the libc hooks this is the process's first malloc (or one of the
  // first): the hooks resolve the next malloc here, inside this constructor.
  void* p = std::malloc(4096);
  if (p) std::memset(p, 0xa5, 4096);
  ctor_a_scratch = p;
  std::free(p);
  ctor_a_scratch = nullptr;
  ctor_a_done = 1;
}
