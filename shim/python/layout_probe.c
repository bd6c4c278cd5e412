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

#define OFF(type, field) ((unsigned)offsetof(type, field))

int main(void) {
  unsigned ts_cframe = 0xffffffffu, cframe_current = 0xffffffffu, ts_frame = 0xffffffffu;
  unsigned f_previous, f_code, f_instr, f_owner = 0xffffffffu, f_is_entry = 0xffffffffu;
  unsigned co_code_adaptive = 0xffffffffu, co_qualname = 0xffffffffu;
  const char* model;
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
  unsigned rt_auto_interp = 0xffffffffu, rt_tss;
#if PY_VERSION_HEX >= 0x030C0000
  rt_tss = OFF(_PyRuntimeState, autoTSSkey);
#else
  rt_auto_interp = OFF(_PyRuntimeState, gilstate.autoInterpreterState);
  rt_tss = OFF(_PyRuntimeState, gilstate.autoTSSkey);
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
                          rt_auto_interp, rt_tss + OFF(Py_tss_t, _is_initialized), rt_tss + OFF(Py_tss_t, _key)};
  printf("{0x%02x%02x, FrameModel::%s", PY_MAJOR_VERSION, PY_MINOR_VERSION, model);
  for (unsigned i = 0; i < sizeof row / sizeof row[0]; ++i) {
    if (row[i] == 0xffffffffu) printf(", kNoField");
    else printf(", %u", row[i]);
  }
  printf("},\n");
  return 0;
}
