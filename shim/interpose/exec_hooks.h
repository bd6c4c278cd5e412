// The exec family's hooks (interpose/exec_hooks.cpp).
#pragma once

#include <cstddef>

namespace cuxfer::shim {

// Looks up libc's execve, execv, execvp, execvpe, execveat and fexecve;
// called from the shim's constructor, before the app can exec. `recording`:
// the shim records (the hooks then finish the trace first).
void resolve_exec_hooks(bool recording);

// Whether an exec of `file` can start a program: `file` itself when it holds
// a '/' or `search` is false, else the first of `path_env`'s directories
// (":"-separated; an empty entry is the current directory; null: glibc's
// default "/bin:/usr/bin") where `runnable` says yes. Candidates longer than
// `buf_size` are skipped. Pure but for `runnable`, no allocation: a vfork
// child may run it.
bool exec_would_start(const char* file, bool search, const char* path_env, bool (*runnable)(const char* path),
                      char* buf, size_t buf_size);

}  // namespace cuxfer::shim
