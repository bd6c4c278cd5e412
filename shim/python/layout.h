// Where CPython keeps what a stack walk reads: the thread state's current
// frame, each frame's code object, instruction and link to its caller, and
// the code object's names and line table. One PyLayout per minor version:
// 3.10-3.12 from layouts.inc, generated from each version's own headers
// (devtools/gen_python_layouts.sh, checked by python.layouts_match_headers);
// 3.13 from the interpreter's own _Py_DebugOffsets, read at run time. The
// generated rows (3.10-3.13) also say where _PyRuntime keeps the
// interpreter's life and the threads' state key (python/runtime_state.h):
// 3.13's debug offsets leave those out, so its row gives them.
// Pure data and pure functions: unit-tested without an interpreter.
#pragma once

#include <cstdint>
#include <string>

namespace cuxfer::shim::python {

enum class FrameModel : uint8_t {
  Legacy310,  // PyFrameObject chain from tstate->frame; f_lasti an instruction index
  Interp311,  // _PyInterpreterFrame chain from tstate->cframe->current_frame; is_entry flag
  Interp312,  // as 3.11; eval-loop entries are frames owned by the C stack
  Interp313,  // chain from tstate->current_frame; f_executable, instr_ptr
};

inline constexpr uint32_t kNoField = 0xffffffffu;

// Offsets in bytes. Field order is layout_probe.c's output order.
struct PyLayout {
  uint32_t version;  // major << 8 | minor
  FrameModel model;
  uint32_t ts_cframe, cframe_current_frame, ts_frame, ts_interp;
  uint32_t frame_previous, frame_code, frame_instr, frame_owner, frame_is_entry;
  uint32_t code_filename, code_name, code_qualname, code_first_line, code_line_table, code_bytecode;
  uint32_t object_type;
  uint32_t str_length, str_state, str_ascii_size, str_compact_size;
  uint32_t bytes_size, bytes_data;
  // In _PyRuntime (the generated rows; 3.13's debug offsets do not state
  // them, layout_from_debug_offsets takes its row's): what Py_IsInitialized, _Py_IsFinalizing,
  // PyInterpreterState_Main and PyGILState_GetThisThreadState read
  // (python/runtime_state.h). rt_auto_interp: before 3.12 only.
  uint32_t rt_initialized, rt_finalizing, rt_main, rt_auto_interp, rt_tss_created, rt_tss_key;
};

// The layout generated for `version` (major << 8 | minor), or null.
const PyLayout* generated_layout(uint32_t version);

// 3.13's _Py_DebugOffsets, as the interpreter states it at the start of
// _PyRuntime (the fields this walk reads; the struct is that version's).
// False, with `why`, when the cookie, version or build does not match.
bool layout_from_debug_offsets(const void* runtime, uint32_t version, PyLayout& out, std::string& why);

// Frame owners (3.11+): a frame owned by the C stack is an eval-loop entry
// marker (3.12+), not a Python function.
inline constexpr uint8_t kOwnedByCStack = 3;

}  // namespace cuxfer::shim::python
