// Before launching: find the program the way a shell would, and make sure the
// dynamic loader will honour LD_PRELOAD for it (a static executable has no
// loader; a set-id one runs in secure mode, which ignores LD_PRELOAD).
#pragma once

#include <string>
#include <vector>

namespace cuxfer::launcher {

struct ResolvedProgram {
  enum class Result { Found, NotFound, NotExecutable } result = Result::NotFound;
  std::string path;  // the file to exec when Found (or the last candidate when NotExecutable)
};

// Looks `name` up like execvp: a name with a '/' is taken as is; otherwise each
// directory of `path_env` (":"-separated, empty entry = current directory;
// default "/usr/local/bin:/usr/bin:/bin" when null) is tried in order.
ResolvedProgram resolve_program(const std::string& name, const char* path_env);

struct PreloadCheck {
  bool ok = true;
  std::string reason;  // why not, one clause: "is statically linked ..."
};

// Reads the file's ELF program headers (PT_INTERP present = dynamically
// linked) and mode bits. Scripts ("#!") pass: their interpreter inherits
// LD_PRELOAD. Files that cannot be read or parsed pass too: exec decides.
PreloadCheck check_preloadable(const std::string& path);

// The executables COMMAND may run, as base names, the way the traces will name
// them (a process's executable is its real path): for each word of the command
// line (the program and every argument, so that `mpirun -n 2 ./train` and `env
// X=1 train` name `train`), its own base name, and when it is a file (found as
// exec would for a bare name), the base name of its real path and, for a "#!"
// script, of its interpreter's (`python3 train.py` and a script starting with
// "#!/usr/bin/env python3" name `python3.12` where python3 links to it). A
// program started only by a script the command runs is not among them.
std::vector<std::string> programs_named(const std::vector<std::string>& command, const char* path_env);

// The libraries a 64-bit ELF program names in its dynamic section (DT_NEEDED),
// in order; empty for a script, a static program or a file that cannot be read.
std::vector<std::string> needed_libraries(const std::string& path);

// Of the libraries a program needs, the sanitizer runtime that insists on
// being the first library loaded (AddressSanitizer's and HWASan's check the
// initial library list and abort the program otherwise: GCC links libasan.so
// by default), or "" when there is none.
std::string runtime_needing_first_place(const std::vector<std::string>& needed);

}  // namespace cuxfer::launcher
