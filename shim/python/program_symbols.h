// CPython linked into the program itself without its symbols exported: an
// application that embeds Python from libpython3.X.a and was linked without
// --export-dynamic. dlsym finds none of the interpreter's symbols there, so
// the shim would not know the process runs Python at all. CPython 3.11+
// places _PyRuntime in a section of its own, ".PyRuntime" (for debuggers),
// which says the program holds an interpreter; the program's .symtab, unless
// it was stripped, names the symbols the walk needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "symbols/file_symbols.h"

namespace cuxfer::shim::python {

enum class ProgramPython : uint8_t {
  kNone,       // no .PyRuntime section in the program (or its file could not be read)
  kSymbols,    // .PyRuntime, and .symtab names the interpreter's symbols: find() answers
  kStripped,   // .PyRuntime, but no symbol table (or none of the symbols in it)
  kDisagrees,  // .symtab's _PyRuntime is not where the .PyRuntime section is: not trusted
};

class ProgramSymbols {
 public:
  // Every name PythonStacks::resolve_interpreter() looks up.
  static constexpr const char* kNames[] = {"Py_IsInitialized",
                                           "Py_Version",
                                           "Py_GetVersion",
                                           "_Py_NegativeRefcount",
                                           "_PyRuntime",
                                           "PyGILState_GetThisThreadState",
                                           "PyInterpreterState_Main",
                                           "PyCode_Type",
                                           "PyUnicode_Type",
                                           "PyBytes_Type",
                                           "_Py_NoneStruct",
                                           "Py_IsFinalizing",
                                           "_Py_IsFinalizing"};
  static constexpr size_t kCount = sizeof kNames / sizeof kNames[0];

  // Reads the main program's file (/proc/self/exe) once: cold, a mapping
  // and a pass over its section headers; its symbol table only when it has a
  // .PyRuntime section. `path` and `bias` for tests (another file, its load
  // bias); by default the running program's.
  ProgramPython read() noexcept;
  ProgramPython read(const char* path, uint64_t bias) noexcept;

  // A name of kNames at its address in this process (bias + st_value), or
  // null: not found, not read, or read() said other than kSymbols.
  void* find(const char* name) const noexcept;

 private:
  ProgramPython state_ = ProgramPython::kNone;
  uint64_t bias_ = 0;
  FileSymbol symbols_[kCount];
};

}  // namespace cuxfer::shim::python
