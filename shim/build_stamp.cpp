// The shim's build identity, in a section of its own that `cuxfer record`
// reads from the file before preloading it (analyzer/launcher/shim_stamp.h):
// a command and a shim from two different builds are refused with one line
// naming both, instead of a run whose trace the command may misread.
// Allocated and read-only, so stripping keeps it; `used` keeps the compiler
// and --gc-sections from dropping a variable nothing refers to.
#include <cuxfer/build_info.h>

extern "C" {
__attribute__((used, retain, section(".cuxfer_build"))) const char cuxfer_build_stamp[] = "cuxfer-build-id=" CUXFER_BUILD_ID;
}
