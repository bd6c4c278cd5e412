// How a Python frame travels inside a call site's frame list (CallSite::frames).
// A captured stack is its native return addresses, innermost first, followed
// by the calling thread's Python frames, innermost first. A Python frame is
// one u64 with bit 63 set (user-space return addresses never have it):
//
//   bit 63      1: a Python frame
//   bit 62      1: the outermost Python frame of its interpreter-loop call
//               (the native _PyEval_EvalFrameDefault frame it ran in is the
//               next one out: the analyzer interleaves the two stacks there)
//   bits 61-32  code id (PyCode::id in the trace's PyCodes blocks)
//   bits 31-0   byte offset of the instruction running in that frame
//               (the call it made), into the code object's bytecode
#pragma once

#include <cstdint>

namespace cuxfer::trace {

inline constexpr uint64_t kPythonFrameBit = 1ull << 63;
inline constexpr uint64_t kPythonEntryBit = 1ull << 62;
inline constexpr uint32_t kMaxPythonCodeId = (1u << 30) - 1;

struct PythonFrame {
  uint32_t code_id = 0;
  uint32_t offset = 0;  // bytes
  bool entry = false;
};

inline bool is_python_frame(uint64_t f) { return (f & kPythonFrameBit) != 0; }

inline uint64_t encode_python_frame(uint32_t code_id, uint32_t offset, bool entry) {
  return kPythonFrameBit | (entry ? kPythonEntryBit : 0) | (uint64_t(code_id & kMaxPythonCodeId) << 32) | offset;
}

inline PythonFrame decode_python_frame(uint64_t f) {
  return PythonFrame{static_cast<uint32_t>((f >> 32) & kMaxPythonCodeId), static_cast<uint32_t>(f),
                     (f & kPythonEntryBit) != 0};
}

}  // namespace cuxfer::trace
