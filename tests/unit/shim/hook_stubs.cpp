// cuxfer_shim_core's symbol table takes the address of every hook, but the
// hooks themselves are defined in libcuxfer.so (shim/interpose/*_hooks.cpp),
// not in the core archive. These empty definitions stand in for them so that
// the core links into a test executable. They are never called: this process
// loads no CUDA library, and the tests never go through a hook.
//
// Deliberately no CUDA header here: the names are declared without their
// prototypes, exactly as shim/symbols/symbol_table.cpp declares them.
extern "C" {
#define CUXFER_DRIVER(n) \
  void n() {}
#define CUXFER_RUNTIME(n) \
  void n() {}
#include "symbols/hook_list.def"
#undef CUXFER_DRIVER
#undef CUXFER_RUNTIME
}
