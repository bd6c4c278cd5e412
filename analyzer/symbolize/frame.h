// One resolved stack frame, as the report shows it.
#pragma once

#include <cstdint>
#include <string>

namespace cuxfer::symbolize {

struct Frame {
  uint64_t address = 0;  // return address as captured in the process
  std::string module;    // path of the loaded object, empty if no module contains the address
  uint64_t offset = 0;   // address - module load bias: what addr2line -e <module> takes
  std::string function;  // demangled; empty when unknown
  std::string file;      // source file; empty when no line info
  int line = 0;          // 0 when no line info
  // A Python frame (trace/python_frame.h): function is the code object's
  // qualified name, file its co_filename, module empty; address the frame's
  // encoded value.
  bool python = false;

  bool has_module() const { return !module.empty(); }
  // "function (file:line)", or "module+0xoffset" when the symbol is unknown;
  // a Python frame "file:line in function".
  std::string display() const;
  // For narrow columns: the function without its parameter list and clone
  // suffix, and the file's base name: "ns::load_batch (load.cpp:42)"; a
  // Python frame "train.py:42 in load_batch".
  std::string short_display() const;
};

}  // namespace cuxfer::symbolize
