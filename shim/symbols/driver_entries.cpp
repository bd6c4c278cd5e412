// Driver entry points the shim calls for itself, outside the hook list (the
// hooks' real functions are in symbol_table).
#include <atomic>
#include <cstdint>

#include "symbols/cuda_headers.h"
#include "symbols/symbol_table.h"

namespace cuxfer::shim {

int8_t current_device_ordinal() {
  static std::atomic<void*> slot{nullptr};
  auto fn = reinterpret_cast<CUresult (*)(CUdevice*)>(driver_entry(slot, "cuCtxGetDevice"));
  CUdevice dev = -1;
  if (!fn || fn(&dev) != CUDA_SUCCESS || dev < 0 || dev > 127) return -1;
  return static_cast<int8_t>(dev);
}

}  // namespace cuxfer::shim
