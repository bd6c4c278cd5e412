// execve and the rest of the family: the process's image is replaced, and no
// exit handler runs. A program that copies and then execs (a launcher that
// checks the GPU and execs the real job, a Python script's os.execv) lost
// what its writer had not written yet, and its trace ended without an End
// block, reported as killed or crashed. The recorder finishes the trace
// first, as for _exit (record/recorder.h, finish_before_exec), then the real
// function runs.
//
// An exec can fail and return, and the process goes on. So the trace is
// finished only for an exec that can start a program: the file (or, for the
// PATH-searching variants, one of PATH's candidates) exists and may be
// executed. Python's os.execvp tries PATH's directories one by one through
// os.execv, and the misses do not end the recording. An exec that fails
// anyway (ENOEXEC, E2BIG, ENOMEM ...) leaves the process running unrecorded,
// said once on stderr: the trace is already complete.
//
// glibc's own execv, execvp and execl* call its internal __execve, not the
// exported execve, so each variant is hooked. posix_spawn starts a new
// process (its vfork-like child execs there): nothing of this process ends.
// The real functions are looked up when the shim loads: execve is
// async-signal-safe, and a lookup at the call could wait on the loader's lock.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <alloca.h>
#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "core/export.h"
#include "interpose/exec_hooks.h"
#include "record/recorder.h"
#include "symbols/symbol_table.h"

namespace {

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using ExecveatFn = int (*)(int, const char*, char* const[], char* const[], int);
using FexecveFn = int (*)(int, char* const[], char* const[]);

ExecveFn g_execve = nullptr, g_execvpe = nullptr;
ExecvFn g_execv = nullptr, g_execvp = nullptr;
ExecveatFn g_execveat = nullptr;
FexecveFn g_fexecve = nullptr;
bool g_recording = false;

bool runnable(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

// One line on stderr without allocation: "cuxfer: " and the parts.
void say(std::initializer_list<const char*> parts) {
  char line[512];
  size_t n = 0;
  auto put = [&](const char* s) {
    for (; s && *s && n < sizeof line - 1; ++s) line[n++] = *s;
  };
  put("cuxfer: ");
  for (const char* s : parts) put(s);
  line[n++] = '\n';
  [[maybe_unused]] const ssize_t w = write(STDERR_FILENO, line, n);
}

// Finishes the trace when the exec can start a program (`starts`), and,
// should it fail all the same, says that the process goes on unrecorded.
class ExecScope {
 public:
  ExecScope(const char* what, bool starts) : what_(what) {
    if (!g_recording || !starts) return;
    const int saved = errno;
    finished_ = cuxfer::shim::Recorder::instance().finish_before_exec(what);
    errno = saved;
  }
  // The real function returned: the exec failed.
  int failed(int result) {
    if (finished_) {
      const int saved = errno;
      char number[16];
      size_t n = sizeof number - 1;
      number[n] = '\0';
      unsigned e = static_cast<unsigned>(saved);
      do {
        number[--n] = static_cast<char>('0' + e % 10);
        e /= 10;
      } while (e && n);
      say({"execve of ", what_, " failed (errno ", number + n,
           ") after cuxfer finished this process's trace; the process's later CUDA calls are not recorded"});
      errno = saved;
    }
    return result;
  }

 private:
  const char* what_;
  bool finished_ = false;
};

// Whether an exec of `file` (searching PATH when `search`) can start a program.
bool can_start(const char* file, bool search) {
  if (!g_recording || !file) return false;
  const int saved = errno;
  char buf[4096];
  const bool yes = cuxfer::shim::exec_would_start(file, search, search ? getenv("PATH") : nullptr, runnable, buf,
                                                  sizeof buf);
  errno = saved;
  return yes;
}

// execl's arguments, up to the null one, into an array on the stack;
// `after_null` reads what follows the null one (execle's environment). glibc
// declares `arg` non-null.
#define CUXFER_COLLECT_ARGS(argv, arg, after_null)                             \
  size_t count_ = 1;                                                          \
  {                                                                           \
    va_list ap_;                                                              \
    va_start(ap_, arg);                                                       \
    while (va_arg(ap_, const char*)) ++count_;                                \
    va_end(ap_);                                                              \
  }                                                                           \
  char** argv = static_cast<char**>(alloca((count_ + 1) * sizeof(char*)));    \
  {                                                                           \
    va_list ap_;                                                              \
    va_start(ap_, arg);                                                       \
    argv[0] = const_cast<char*>(arg);                                         \
    for (size_t i_ = 1; i_ <= count_; ++i_) argv[i_] = va_arg(ap_, char*);    \
    after_null;                                                               \
    va_end(ap_);                                                              \
  }

}  // namespace

namespace cuxfer::shim {

void resolve_exec_hooks(bool recording) {
  g_execve = next_function<ExecveFn>("execve");
  g_execv = next_function<ExecvFn>("execv");
  g_execvp = next_function<ExecvFn>("execvp");
  g_execvpe = next_function<ExecveFn>("execvpe");
  g_execveat = next_function<ExecveatFn>("execveat");
  g_fexecve = next_function<FexecveFn>("fexecve");
  g_recording = recording;
}

}  // namespace cuxfer::shim

namespace {

// The real function, looked up now if the constructor has not run yet.
template <typename F>
F real_or_lookup(F f, const char* name) {
  return f ? f : cuxfer::shim::next_function<F>(name);
}

int no_function() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

extern "C" CUXFER_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  ExecScope scope(path, can_start(path, false));
  auto real = real_or_lookup(g_execve, "execve");
  return scope.failed(real ? real(path, argv, envp) : no_function());
}

extern "C" CUXFER_EXPORT int execv(const char* path, char* const argv[]) {
  ExecScope scope(path, can_start(path, false));
  auto real = real_or_lookup(g_execv, "execv");
  return scope.failed(real ? real(path, argv) : no_function());
}

extern "C" CUXFER_EXPORT int execvp(const char* file, char* const argv[]) {
  ExecScope scope(file, can_start(file, true));
  auto real = real_or_lookup(g_execvp, "execvp");
  return scope.failed(real ? real(file, argv) : no_function());
}

extern "C" CUXFER_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  ExecScope scope(file, can_start(file, true));
  auto real = real_or_lookup(g_execvpe, "execvpe");
  return scope.failed(real ? real(file, argv, envp) : no_function());
}

extern "C" CUXFER_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  // Relative to a directory descriptor, or the descriptor itself (AT_EMPTY_PATH):
  // only an absolute path is checked; the others are taken as able to start.
  const bool start = g_recording && (path[0] != '/' || can_start(path, false));
  ExecScope scope(*path ? path : "(a file descriptor)", start);
  auto real = real_or_lookup(g_execveat, "execveat");
  return scope.failed(real ? real(dirfd, path, argv, envp, flags) : no_function());
}

extern "C" CUXFER_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  ExecScope scope("(a file descriptor)", g_recording);
  auto real = real_or_lookup(g_fexecve, "fexecve");
  return scope.failed(real ? real(fd, argv, envp) : no_function());
}

// The variadic ones: their arguments into an array, then the array's variant.
extern "C" CUXFER_EXPORT int execl(const char* path, const char* arg, ...) {
  CUXFER_COLLECT_ARGS(argv, arg, (void)0)
  return execv(path, argv);
}

extern "C" CUXFER_EXPORT int execlp(const char* file, const char* arg, ...) {
  CUXFER_COLLECT_ARGS(argv, arg, (void)0)
  return execvp(file, argv);
}

extern "C" CUXFER_EXPORT int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  CUXFER_COLLECT_ARGS(argv, arg, envp = va_arg(ap_, char* const*))
  return execve(path, argv, envp);
}
