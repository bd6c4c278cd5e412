// Which frame of a captured stack is "the user's call site": for a Python
// program the innermost line of the user's own Python code; otherwise the
// first frame, innermost to outermost, that is not cuxfer itself, the CUDA
// driver or runtime (shared or compiled into the executable), or the C
// runtime's start code. Pure functions over names, unit-tested.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
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

// A Python file of the interpreter's own library (.../lib/python3.N/...),
// an installed package (site-packages, dist-packages), the interpreter itself
// (<frozen ...>) or other generated code (<eval_with_key>.N, <template>): not
// where a user's script makes its copies. Text the user typed is not
// (is_python_user_text).
bool is_python_library_file(std::string_view file);

// Code the user gave as text rather than as a file: `python -c` and exec()
// (<string>), a script on stdin or the classic REPL (<stdin>), the 3.13 REPL
// (<python-input-N>), code.interact (<console>), IPython in a terminal
// (<ipython-input-N-hash>). The user's code, but ranked below a real file:
// libraries exec() generated code as <string> too (dataclasses, namedtuple).
bool is_python_user_text(std::string_view file);

// Which Python frame names a call site: the innermost of the user's own
// files (User), or the innermost of all (All: a framework's line).
enum class PythonFrames { User, All };

// How a Python program's call sites are chosen: the mode, and installed
// packages that are the user's own code all the same (`--python-user`, and
// the package a process was started from: entry_package.h).
struct PythonSiteRule {
  PythonFrames frames = PythonFrames::User;
  std::vector<std::string> user_packages;  // top-level import names
};

// The top-level import name a file is installed under by the path rule:
// "torch" for .../site-packages/torch/cuda/__init__.py, "six" for
// .../dist-packages/six.py; empty for a file under neither.
std::string_view installed_top_level(std::string_view file);

// Index of the user's frame in `stack` (innermost first): for a stack with
// Python frames, the innermost Python frame `mode` accepts (for User: of a
// file of the user's, else of text the user gave, else the innermost Python
// frame); otherwise the innermost native frame that is not cuxfer, CUDA
// or start code. When every frame is filtered out, the first frame outside
// the shim; 0 for an empty stack. `library`, when given, names further Python
// library files (installed_packages.h: packages installed outside site-packages).
// `user`, when given, names files that are the user's whatever their path
// (an installed package of theirs): it is asked before the library tests.
using PythonFileTest = std::function<bool(std::string_view file)>;
size_t choose_user_frame(const std::vector<Frame>& stack, PythonFrames mode = PythonFrames::User,
                         const PythonFileTest& library = {}, const PythonFileTest& user = {});

}  // namespace cuxfer::symbolize
