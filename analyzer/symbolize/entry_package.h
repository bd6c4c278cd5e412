// The installed package a Python process was started from. Production code is
// often installed like a framework (`pip install .`, a wheel in an image), so
// its files sit under site-packages and the path rule of frame_filter.h counts
// them as a framework's: every copy of `python -m myproj.train` would be put at
// a line of torch or CuPy, and every copy of a console script (`myproj-train`)
// at the stub's one line, `sys.exit(main())`. The package the process was
// started from is the user's own code:
//   - `python [options] -m myproj.train ...`: "myproj";
//   - `python [options] /venv/bin/myproj-train ...` where that file is the
//     console-script stub pip, uv and pipx write (a `#!...python` line,
//     `from myproj.cli import main`, `sys.exit(main())`): "myproj". The kernel
//     runs a stub with the interpreter as argv[0] and the stub as argv[1].
// Anything else (a script file of the user's, `-c`, a program that is not
// Python): empty.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuxfer::symbolize {

// The text of a file, at most `limit` bytes; nullopt when it cannot be read
// or is larger. The real one reads the analysing machine's file system.
using SmallFileReader = std::function<std::optional<std::string>(const std::string& path, size_t limit)>;
std::optional<std::string> read_small_file(const std::string& path, size_t limit);

struct EntryPackage {
  std::string package;  // top-level import name; empty: none
  std::string how;      // "python -m myproj.train", "the console script /venv/bin/myproj-train"
};

// From the process's executable and argv (trace::ProcessInfo).
EntryPackage entry_package(std::string_view exe, const std::vector<std::string>& argv,
                           const SmallFileReader& read = read_small_file);

// The pieces, pure, for tests.
// argv[0] or the executable names a CPython interpreter (python, python3, python3.12, python3.13t).
bool is_python_program(std::string_view exe, const std::vector<std::string>& argv);
// The module of `-m MOD` / `-mMOD` before the first script argument; empty if none.
std::string module_option(const std::vector<std::string>& argv);
// The script argument: the first argument that is not an interpreter option; empty if none, or with -c / -m.
std::string script_argument(const std::vector<std::string>& argv);
// The top-level package a console-script stub imports its entry function from; empty if the
// text is not such a stub.
std::string stub_package(std::string_view text);

}  // namespace cuxfer::symbolize
