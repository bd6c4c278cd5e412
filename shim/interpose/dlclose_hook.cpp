// dlclose: passed through. Before it, the modules loaded since the last
// write cycle go to the trace (the copies of what goes stay symbolized), and
// an interpreter the Python stacks wait for is forgotten, since it may be
// what goes; after it, the fast unwinder's rules are retired if an object
// was unmapped, since another one may be loaded at its addresses
// (unwind/fast_unwind.h), and an interpreter being read whose library went
// is no longer read (python/python_stack.h), and the runtime functions
// remembered per calling object are forgotten, since they may lie in what
// went (symbols/symbol_table.h). The shim's own dlclose calls come here too,
// except the symbol table's (real_dlclose).
#include <dlfcn.h>

#include "core/export.h"
#include "python/python_stack.h"
#include "record/recorder.h"
#include "symbols/elf_lookup.h"
#include "symbols/symbol_table.h"
#include "unwind/fast_unwind.h"

extern "C" CUXFER_EXPORT int dlclose(void* handle) {
  using Fn = int (*)(void*);
  static const Fn real = reinterpret_cast<Fn>(cuxfer::shim::real_dlsym(RTLD_NEXT, "dlclose"));
  if (!real) return -1;  // no libc dlclose to forward to: nothing was closed
  cuxfer::shim::python::PythonStacks::instance().before_dlclose();
  if (auto* recorder = cuxfer::shim::g_hot_line.recorder.load(std::memory_order_acquire))
    recorder->before_dlclose();
  const uint64_t unloads = cuxfer::shim::loader_unloads();
  const int r = real(handle);
  // Most dlcloses only drop a reference; only an unload costs the runtime
  // hooks a lookup again.
  if (cuxfer::shim::loader_unloads() != unloads) cuxfer::shim::forget_unloaded_definitions();
  cuxfer::shim::python::PythonStacks::instance().after_dlclose();
  cuxfer::shim::unwind::after_dlclose();
  return r;
}
