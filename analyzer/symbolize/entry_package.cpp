#include "analyzer/symbolize/entry_package.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

namespace cuxfer::symbolize {
namespace {

std::string_view basename_of(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool python_name(std::string_view name) {
  // python, python3, python3.12, python3.13t, python3.12d
  if (!name.starts_with("python")) return false;
  for (char c : name.substr(6))
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 't' || c == 'd')) return false;
  return true;
}

// CPython's options that take the next argument (python3 --help).
bool takes_argument(std::string_view opt) {
  return opt == "-W" || opt == "-X" || opt == "--check-hash-based-pycs";
}

std::string top_level(std::string_view module) {
  const size_t dot = module.find('.');
  return std::string(dot == std::string_view::npos ? module : module.substr(0, dot));
}

bool identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

// What ended the interpreter's options, at argument `index`.
enum class OptionsEnd {
  None,          // no script: stdin, or argv ran out
  Module,        // -m MOD: the module is argv[index]
  ModuleInline,  // -mMOD: the module is the rest of argv[index] after its 'm'
  Command,       // -c
  Script,        // a script file at argv[index]
};
struct EndOfOptions {
  size_t index;
  OptionsEnd what;
};

EndOfOptions end_of_options(const std::vector<std::string>& argv) {
  using enum OptionsEnd;
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    if (a == "-" || !a.starts_with("-")) return {i, a == "-" ? None : Script};
    if (a == "--") return {i + 1, i + 1 < argv.size() ? Script : None};
    if (a == "-m") return {i + 1, i + 1 < argv.size() ? Module : None};
    if (a == "-c") return {i, Command};
    if (takes_argument(a)) {
      ++i;
      continue;
    }
    if (a.starts_with("--")) continue;
    // Grouped short flags (-uB), possibly ending with one that takes the rest: -mMOD, -cCODE, -Wignore.
    for (size_t k = 1; k < a.size(); ++k) {
      if (a[k] == 'm') return {i, k + 1 < a.size() ? ModuleInline : None};
      if (a[k] == 'c') return {i, Command};
      if (a[k] == 'W' || a[k] == 'X') {
        if (k + 1 == a.size()) ++i;  // its value is the next argument
        break;
      }
    }
  }
  return {argv.size(), None};
}

}  // namespace

std::optional<std::string> read_small_file(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) <= limit) {
    std::string text(static_cast<size_t>(st.st_size), '\0');
    const ssize_t n = ::read(fd, text.data(), text.size());
    if (n >= 0) {
      text.resize(static_cast<size_t>(n));
      out = std::move(text);
    }
  }
  ::close(fd);
  return out;
}

bool is_python_program(std::string_view exe, const std::vector<std::string>& argv) {
  return python_name(basename_of(exe)) || (!argv.empty() && python_name(basename_of(argv[0])));
}

std::string module_option(const std::vector<std::string>& argv) {
  const auto [i, what] = end_of_options(argv);
  if (what == OptionsEnd::Module) return argv[i];
  if (what == OptionsEnd::ModuleInline) return argv[i].substr(argv[i].find('m') + 1);
  return {};
}

std::string script_argument(const std::vector<std::string>& argv) {
  const auto [i, what] = end_of_options(argv);
  return what == OptionsEnd::Script ? argv[i] : std::string();
}

std::string stub_package(std::string_view text) {
  // pip's (and uv's, pipx's) template:
  //   #!/venv/bin/python3
  //   # -*- coding: utf-8 -*-
  //   import re
  //   import sys
  //   from myproj.cli import main
  //   if __name__ == "__main__":
  //       sys.argv[0] = re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])
  //       sys.exit(main())
  if (!text.starts_with("#!") || text.substr(0, text.find('\n')).find("python") == std::string_view::npos)
    return {};
  std::string package;
  size_t lines = 0;
  for (size_t at = 0; at < text.size(); ++lines) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.starts_with("from ")) {
      const size_t imp = line.find(" import ");
      if (imp == std::string_view::npos || !package.empty()) return {};
      const std::string_view module = line.substr(5, imp - 5);
      std::string_view function = line.substr(imp + 8);
      while (!function.empty() && (function.back() == '\r' || function.back() == ' '))
        function.remove_suffix(1);
      if (!identifier(module) || !identifier(function) || function.find('.') != std::string_view::npos)
        return {};
      if (text.find("sys.exit(" + std::string(function) + "())") == std::string_view::npos) return {};
      package = top_level(module);
    }
  }
  return lines <= 16 ? package : std::string();  // a stub is a few lines, not a program
}

EntryPackage entry_package(std::string_view exe, const std::vector<std::string>& argv,
                           const SmallFileReader& read) {
  if (!is_python_program(exe, argv)) return {};
  if (std::string module = module_option(argv); !module.empty() && identifier(module))
    return {top_level(module), "python -m " + module};
  const std::string script = script_argument(argv);
  if (script.empty() || !read) return {};
  const std::optional<std::string> text = read(script, 4096);
  if (!text) return {};
  std::string package = stub_package(*text);
  if (package.empty()) return {};
  return {std::move(package), "the console script " + script};
}

}  // namespace cuxfer::symbolize
