// Which frame of a captured stack is "the user's call site": the first frame,
// innermost to outermost, that is not cuxfer itself, the CUDA driver or
// runtime (shared or compiled into the executable), or the C runtime's start
// code. Pure functions over names, unit-tested.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "analyzer/symbolize/frame.h"

namespace cuxfer::symbolize {

// The object is cuxfer's shim or a CUDA driver/runtime library.
bool is_cuda_or_shim_module(std::string_view module_path);
// The function belongs to a CUDA runtime linked statically into the program.
// "cuda" prefixes are the runtime's API (cudaMemcpy), "__cuda"/"__cudart"
// its registration and obfuscated internals, "cudart::" its C++ internals.
bool is_static_cudart_function(std::string_view function);
// A frame of tests/simcuda's runtime compiled into a test program (the
// simulated static cudart keeps its internals in an anonymous namespace, not
// under the cudart:: names the real one uses).
bool is_simulated_cuda_frame(const Frame& f);
// libc/libstdc++ process start frames (_start, __libc_start_main, ...).
bool is_start_frame(const Frame& f);

// Index of the user's frame in `stack` (innermost first). When every frame is
// filtered out, the first frame outside the shim; 0 for an empty stack.
size_t choose_user_frame(const std::vector<Frame>& stack);

}  // namespace cuxfer::symbolize
