#include "analyzer/symbolize/frame_filter.h"

#include <fmt/format.h>

namespace cuxfer::symbolize {
namespace {

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_shim_module(std::string_view module_path) {
  return basename_of(module_path).starts_with("libcuxfer.so");
}

}  // namespace

namespace {

std::string python_display(const Frame& f, std::string_view file) {
  std::string where = file.empty() ? std::string("<unknown>") : std::string(file);
  if (f.line > 0) where += fmt::format(":{}", f.line);
  return f.function.empty() ? where : where + " in " + f.function;
}

}  // namespace

std::string Frame::display() const {
  if (python) return python_display(*this, file);
  std::string s;
  if (!function.empty())
    s = function;
  else if (has_module())
    s = fmt::format("{}+0x{:x}", basename_of(module), offset);
  else
    s = fmt::format("0x{:x}", address);
  if (!file.empty()) s += fmt::format(" ({}:{})", file, line);
  return s;
}

// "ns::f<int>(int, char) const [clone .part.0]" -> "ns::f<int>".
std::string short_function(std::string_view f) {
  if (size_t clone = f.find(" [clone "); clone != std::string_view::npos) f = f.substr(0, clone);
  // Drop the trailing parameter list: the last top-level "(...)" (and any
  // cv-qualifiers after it). "(anonymous namespace)" is not a parameter list.
  int depth = 0;
  for (size_t i = f.size(); i-- > 0;) {
    if (f[i] == ')') ++depth;
    if (f[i] == '(' && --depth == 0) {
      if (i > 0 && f.substr(i).starts_with("(anonymous namespace)")) break;
      if (i > 0) return std::string(f.substr(0, i));
      break;
    }
  }
  return std::string(f);
}

std::string Frame::short_display() const {
  if (python) return python_display(*this, basename_of(file));
  if (function.empty()) return display();
  std::string s = short_function(function);
  // Namespaces of no name add width and no information in a table.
  for (size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;)
    s.erase(at, sizeof("(anonymous namespace)::") - 1);
  if (!file.empty()) s += fmt::format(" ({}:{})", basename_of(file), line);
  return s;
}

bool is_cuda_or_shim_module(std::string_view module_path) {
  std::string_view base = basename_of(module_path);
  return is_shim_module(module_path) || base.starts_with("libcuda.so") || base.starts_with("libcudart") ||
         base.starts_with("libcuda_") || base.starts_with("libnvidia-");
}

bool is_static_cudart_function(std::string_view f) {
  for (std::string_view prefix : {"cuda", "__cuda", "cudart::", "__cudart", "libcudart"})
    if (f.starts_with(prefix)) return true;
  return false;
}

bool is_start_frame(const Frame& f) {
  for (std::string_view name : {"_start", "__libc_start_main", "__libc_start_call_main",
                                "__libc_start_main_impl", "start_thread", "clone", "clone3"})
    if (f.function == name) return true;
  std::string_view base = basename_of(f.module);
  // Unnamed frames in libc are start code or thread trampolines in practice.
  return f.function.empty() && (base.starts_with("libc.so") || base.starts_with("libc-"));
}

bool is_simulated_cuda_frame(const Frame& f) { return f.file.find("/tests/simcuda/") != std::string::npos; }

bool is_python_user_text(std::string_view file) {
  if (file == "<string>" || file == "<stdin>" || file == "<console>") return true;
  return file.starts_with("<python-input-") || file.starts_with("<ipython-input-");
}

bool is_python_library_file(std::string_view file) {
  if (file.empty()) return true;
  if (file.starts_with("<")) return !is_python_user_text(file);  // <frozen ...>, generated code
  if (file.find("/site-packages/") != std::string_view::npos || file.find("/dist-packages/") != std::string_view::npos)
    return true;
  // The standard library: .../lib/python3.N/<module>.py (or lib64).
  for (std::string_view lib : {"/lib/python3.", "/lib64/python3."}) {
    for (size_t at = file.find(lib); at != std::string_view::npos; at = file.find(lib, at + 1)) {
      size_t i = at + lib.size(), digits = 0;  // "3." then the minor version, then '/'
      while (i < file.size() && file[i] >= '0' && file[i] <= '9') ++i, ++digits;
      if (digits && i < file.size() && file[i] == '/') return true;
    }
  }
  return false;
}

std::string_view installed_top_level(std::string_view file) {
  size_t at = std::string_view::npos, len = 0;
  for (std::string_view dir : {"/site-packages/", "/dist-packages/"}) {
    const size_t found = file.rfind(dir);
    if (found != std::string_view::npos && (at == std::string_view::npos || found > at))
      at = found, len = dir.size();
  }
  if (at == std::string_view::npos) return {};
  std::string_view rest = file.substr(at + len);
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) return rest.substr(0, slash);
  const size_t dot =
      rest.find('.');  // a single module: six.py, _cffi_backend.cpython-312-x86_64-linux-gnu.so
  return dot == std::string_view::npos ? rest : rest.substr(0, dot);
}

size_t choose_user_frame(const std::vector<Frame>& stack, PythonFrames mode, const PythonFileTest& library,
                         const PythonFileTest& user) {
  // A Python program's site is a line of its own code: the innermost Python
  // frame outside the interpreter's library and the installed frameworks
  // (with PythonFrames::All, the innermost Python frame).
  // Text the user gave (python -c, stdin, a REPL) counts when no file of theirs is on the stack:
  // a library's exec'd <string> between the user's file and the copy must not hide the file.
  size_t first_python = stack.size(), first_text = stack.size();
  for (size_t i = 0; i < stack.size(); ++i) {
    if (!stack[i].python) continue;
    if (first_python == stack.size()) first_python = i;
    if (mode == PythonFrames::All) return i;
    if (user && user(stack[i].file)) return i;
    if (is_python_library_file(stack[i].file) || (library && library(stack[i].file))) continue;
    if (!is_python_user_text(stack[i].file)) return i;
    if (first_text == stack.size()) first_text = i;
  }
  if (first_text < stack.size()) return first_text;
  if (first_python < stack.size()) return first_python;
  for (size_t i = 0; i < stack.size(); ++i) {
    const Frame& f = stack[i];
    if (is_cuda_or_shim_module(f.module) || is_static_cudart_function(f.function) ||
        is_simulated_cuda_frame(f) || is_start_frame(f))
      continue;
    return i;
  }
  for (size_t i = 0; i < stack.size(); ++i)
    if (!is_shim_module(stack[i].module)) return i;
  return 0;
}

}  // namespace cuxfer::symbolize
