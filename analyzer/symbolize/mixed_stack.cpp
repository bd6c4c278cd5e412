#include "analyzer/symbolize/mixed_stack.h"

#include "trace/python_lines.h"
#include "trace/python_frame.h"

namespace cuxfer::symbolize {

PyCodeIndex index_py_codes(const std::vector<trace::PyCode>& codes) {
  PyCodeIndex index;
  for (const auto& c : codes) index.try_emplace(c.id, &c);
  return index;
}

Frame python_frame(uint64_t value, const PyCodeIndex& codes) {
  const trace::PythonFrame p = trace::decode_python_frame(value);
  Frame f;
  f.python = true;
  f.address = value;
  f.offset = p.offset;
  if (auto it = codes.find(p.code_id); it != codes.end()) {
    const trace::PyCode& c = *it->second;
    f.file = c.filename;
    f.function = c.qualname;
    f.line = trace::python_line(c.version, c.first_line, c.line_table, p.offset);
  }
  return f;
}

bool is_eval_loop_frame(const Frame& f) {
  return !f.python && (f.function == "_PyEval_EvalFrameDefault" || f.function == "_PyEval_EvalFrame");
}

std::vector<Frame> mixed_stack(const std::vector<uint64_t>& frames, const std::vector<trace::ModuleInfo>& modules,
                               const PyCodeIndex& codes, Symbolizer& symbolizer) {
  std::vector<Frame> native;
  std::vector<std::vector<Frame>> groups;  // per eval-loop call, innermost first
  bool group_open = false;
  for (uint64_t v : frames) {
    if (!trace::is_python_frame(v)) {
      native.push_back(symbolizer.resolve(modules, v));
      continue;
    }
    if (!group_open) groups.emplace_back();
    groups.back().push_back(python_frame(v, codes));
    group_open = !trace::decode_python_frame(v).entry;  // an entry frame closes its group
  }
  std::vector<Frame> out;
  out.reserve(native.size() + frames.size());
  size_t next = 0;
  for (Frame& f : native) {
    if (next < groups.size() && is_eval_loop_frame(f)) {
      for (Frame& p : groups[next]) out.push_back(std::move(p));
      ++next;
      continue;
    }
    out.push_back(std::move(f));
  }
  for (; next < groups.size(); ++next)
    for (Frame& p : groups[next]) out.push_back(std::move(p));
  return out;
}

}  // namespace cuxfer::symbolize
