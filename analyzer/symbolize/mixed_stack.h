// One captured stack as the report shows it: native frames symbolized, and
// the thread's Python frames (trace/python_frame.h) named from the trace's
// code objects and put where they ran, in call order. Each group of Python
// frames that one interpreter-loop call ran takes the place of that call's
// native frame (_PyEval_EvalFrameDefault), as py-spy --native shows them;
// groups the captured native frames did not reach (native depth is capped)
// follow the native frames.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analyzer/symbolize/frame.h"
#include "analyzer/symbolize/symbolizer.h"
#include "trace/records.h"

namespace cuxfer::symbolize {

using PyCodeIndex = std::unordered_map<uint32_t, const trace::PyCode*>;
PyCodeIndex index_py_codes(const std::vector<trace::PyCode>& codes);

// A Python frame's value (trace/python_frame.h) as a Frame; a code id the
// trace does not name gives "<unknown>".
Frame python_frame(uint64_t value, const PyCodeIndex& codes);

// Is this native frame the interpreter's eval loop (where Python frames ran)?
bool is_eval_loop_frame(const Frame& f);

// `frames`: a call site's captured values, innermost first.
std::vector<Frame> mixed_stack(const std::vector<uint64_t>& frames, const std::vector<trace::ModuleInfo>& modules,
                               const PyCodeIndex& codes, Symbolizer& symbolizer);

}  // namespace cuxfer::symbolize
