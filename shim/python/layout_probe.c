/* layout_probe.c: prints one CPython version's frame, code and string layouts
 * as a row of shim/python/layouts.inc. Compiled against that version's own
 * headers, internal ones included (Py_BUILD_CORE), by
 * devtools/gen_python_layouts.sh; the test python.layouts_match_headers
 * compiles it again against every interpreter it finds and checks that the
 * committed row is what the headers say. Never linked into the shim. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "frameobject.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_code.h"
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_stackref.h"
#endif

#define OFF(type, field) ((unsigned)offsetof(type, field))
#define NO 0xffffffffu

static void print_row(const unsigned* row, unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    if (row[i] == NO) printf(", kNoField");
    else printf(", %u", row[i]);
  }
}

int main(void) {
  unsigned ts_cframe = NO, cframe_current = NO, ts_frame = NO;
  unsigned f_previous, f_code, f_instr, f_owner = NO, f_is_entry = NO;
  unsigned co_code_adaptive = NO, co_qualname = NO;
  const char* model;
  /* The bits of f_executable (a _PyStackRef from 3.14) that CPython clears
   * to get the object (BITS_TO_PTR_MASKED), and the first owner that is not
   * a Python function's frame: from 3.12 the eval loop's entry frame
   * (FRAME_OWNED_BY_CSTACK, 3.14+ FRAME_OWNED_BY_INTERPRETER, where 3.14's
   * CSTACK follows). */
  unsigned f_code_tag_bits = 0, f_owner_not_python = NO;
#if PY_VERSION_HEX >= 0x030E0000
  f_code_tag_bits = (unsigned)Py_TAG_REFCNT;
  f_owner_not_python = FRAME_OWNED_BY_INTERPRETER;
#elif PY_VERSION_HEX >= 0x030C0000
  f_owner_not_python = FRAME_OWNED_BY_CSTACK;
#endif
#if PY_VERSION_HEX >= 0x030D0000
  model = "Interp313";
  ts_frame = OFF(PyThreadState, current_frame);
  f_previous = OFF(_PyInterpreterFrame, previous);
  f_code = OFF(_PyInterpreterFrame, f_executable);
  f_instr = OFF(_PyInterpreterFrame, instr_ptr);
  f_owner = OFF(_PyInterpreterFrame, owner);
#elif PY_VERSION_HEX >= 0x030B0000
  model = PY_VERSION_HEX >= 0x030C0000 ? "Interp312" : "Interp311";
  ts_cframe = OFF(PyThreadState, cframe);
  cframe_current = OFF(_PyCFrame, current_frame);
  f_previous = OFF(_PyInterpreterFrame, previous);
  f_code = OFF(_PyInterpreterFrame, f_code);
  f_instr = OFF(_PyInterpreterFrame, prev_instr);
  f_owner = OFF(_PyInterpreterFrame, owner);
#if PY_VERSION_HEX < 0x030C0000
  f_is_entry = OFF(_PyInterpreterFrame, is_entry);
#endif
#else
  model = "Legacy310";
  ts_frame = OFF(PyThreadState, frame);
  f_previous = OFF(PyFrameObject, f_back);
  f_code = OFF(PyFrameObject, f_code);
  f_instr = OFF(PyFrameObject, f_lasti);
#endif
  /* _PyRuntime's fields behind Py_IsInitialized, _Py_IsFinalizing,
   * PyInterpreterState_Main and PyGILState_GetThisThreadState, which the
   * shim reads itself (python_stack.cpp, "the thread's state"). */
  unsigned rt_auto_interp = NO, rt_tss_created = NO, rt_tss_key = NO;
#if PY_VERSION_HEX >= 0x030F0000
  /* 3.15 keeps the GIL state's thread state in a C thread-local, which the
   * shim cannot name: the C API it is. */
#elif PY_VERSION_HEX >= 0x030C0000
  rt_tss_created = OFF(_PyRuntimeState, autoTSSkey) + OFF(Py_tss_t, _is_initialized);
  rt_tss_key = OFF(_PyRuntimeState, autoTSSkey) + OFF(Py_tss_t, _key);
#else
  rt_auto_interp = OFF(_PyRuntimeState, gilstate.autoInterpreterState);
  rt_tss_created = OFF(_PyRuntimeState, gilstate.autoTSSkey) + OFF(Py_tss_t, _is_initialized);
  rt_tss_key = OFF(_PyRuntimeState, gilstate.autoTSSkey) + OFF(Py_tss_t, _key);
#endif
#if PY_VERSION_HEX >= 0x030B0000
  co_code_adaptive = OFF(PyCodeObject, co_code_adaptive);
  co_qualname = OFF(PyCodeObject, co_qualname);
#endif
  const unsigned row[] = {ts_cframe, cframe_current, ts_frame, OFF(PyThreadState, interp), f_previous, f_code,
                          f_instr, f_owner, f_is_entry, OFF(PyCodeObject, co_filename), OFF(PyCodeObject, co_name),
                          co_qualname, OFF(PyCodeObject, co_firstlineno), OFF(PyCodeObject, co_linetable),
                          co_code_adaptive, OFF(PyObject, ob_type), OFF(PyASCIIObject, length),
                          OFF(PyASCIIObject, state), (unsigned)sizeof(PyASCIIObject),
                          (unsigned)sizeof(PyCompactUnicodeObject), OFF(PyVarObject, ob_size),
                          OFF(PyBytesObject, ob_sval), OFF(_PyRuntimeState, initialized),
                          OFF(_PyRuntimeState, _finalizing), OFF(_PyRuntimeState, interpreters.main),
                          rt_auto_interp, rt_tss_created, rt_tss_key, f_code_tag_bits, f_owner_not_python};
  printf("{{0x%02x%02x, FrameModel::%s", PY_MAJOR_VERSION, PY_MINOR_VERSION, model);
  print_row(row, sizeof row / sizeof row[0]);
  printf("}");
  /* Where 3.13+ state, in their _Py_DebugOffsets, the offsets the walk reads
   * (layout.h, GeneratedRow): the struct differs from version to version. */
  printf(", {");
#if PY_VERSION_HEX >= 0x030D0000
#define DBG(field) ((unsigned)offsetof(_Py_DebugOffsets, field))
  const unsigned dbg[] = {DBG(version), DBG(free_threaded), DBG(thread_state.interp),
                          DBG(thread_state.current_frame), DBG(interpreter_frame.previous),
                          DBG(interpreter_frame.executable), DBG(interpreter_frame.instr_ptr),
                          DBG(interpreter_frame.owner), DBG(code_object.filename), DBG(code_object.name),
                          DBG(code_object.qualname), DBG(code_object.linetable), DBG(code_object.firstlineno),
                          DBG(code_object.co_code_adaptive), DBG(pyobject.ob_type), DBG(bytes_object.ob_size),
                          DBG(bytes_object.ob_sval), DBG(unicode_object.state), DBG(unicode_object.length),
                          DBG(unicode_object.asciiobject_size), (unsigned)sizeof(_Py_DebugOffsets)};
  printf("%u", dbg[0]);
  print_row(dbg + 1, sizeof dbg / sizeof dbg[0] - 1);
#endif
  printf("}},\n");
  return 0;
}
