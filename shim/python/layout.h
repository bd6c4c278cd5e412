// Where CPython keeps what a stack walk reads: the thread state's current
// frame, each frame's code object, instruction and link to its caller, and
// the code object's names and line table. One PyLayout per minor version,
// 3.10-3.15, each a row of layouts.inc generated from that version's own
// headers (devtools/gen_python_layouts.sh, checked by
// python.layouts_match_headers). 3.10-3.12 are walked by their rows; 3.13+
// by the interpreter's own _Py_DebugOffsets, read at run time (a patch
// release that moved a field says so there), whose own layout differs from
// version to version: the row says where each offset sits in it
// (DebugIndex). The rows also say where _PyRuntime keeps the interpreter's
// life and the threads' state key (python/runtime_state.h), which the debug
// offsets leave out.
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

// Where, in a version's _Py_DebugOffsets (3.13+), the offsets the walk reads
// sit: byte positions of its u64 fields. size 0: the version has none.
struct DebugIndex {
  uint32_t version = 0, free_threaded = 0;
  uint32_t ts_interp = 0, ts_current_frame = 0;
  uint32_t frame_previous = 0, frame_executable = 0, frame_instr_ptr = 0, frame_owner = 0;
  uint32_t code_filename = 0, code_name = 0, code_qualname = 0, code_line_table = 0, code_first_line = 0,
           code_adaptive = 0;
  uint32_t object_type = 0, bytes_size = 0, bytes_data = 0, str_state = 0, str_length = 0, str_ascii_size = 0;
  uint32_t size = 0;
};

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
  // In _PyRuntime (the generated rows; the debug offsets do not state
  // them, layout_from_debug_offsets takes its row's): what Py_IsInitialized, _Py_IsFinalizing,
  // PyInterpreterState_Main and PyGILState_GetThisThreadState read
  // (python/runtime_state.h). rt_auto_interp: before 3.12 only; the key's
  // two: not from 3.15, whose key is a C thread-local.
  uint32_t rt_initialized, rt_finalizing, rt_main, rt_auto_interp, rt_tss_created, rt_tss_key;
  // The low bits of frame_code CPython clears to get the object (3.14+: a
  // _PyStackRef; its null is those bits alone), and the first frame owner
  // that is not a Python function's frame but an eval-loop entry (3.12+;
  // kNoField before).
  uint32_t frame_code_tag_bits, frame_owner_not_python;
};

// A row of layouts.inc: a version's layout, and for 3.13+ where its debug
// offsets state it.
struct GeneratedRow {
  PyLayout layout;
  DebugIndex debug;
};

// The layout generated for `version` (major << 8 | minor), or null.
const PyLayout* generated_layout(uint32_t version);
// Where `version`'s _Py_DebugOffsets state its fields, or null (no row, or a
// version before 3.13).
const DebugIndex* generated_debug_index(uint32_t version);

// The layout of a 3.13+ interpreter from its _Py_DebugOffsets, as it states
// them at the start of _PyRuntime (the fields this walk reads, where `version`'s
// row says they sit), the rest from that row. False, with `why`, when the
// version has no row, or the cookie, version or build does not match.
bool layout_from_debug_offsets(const void* runtime, uint32_t version, PyLayout& out, std::string& why);

}  // namespace cuxfer::shim::python
