// Whether an exec can start a program (interpose/exec_hooks.h): apart from the
// hooks, so that the unit tests can drive it with their own `runnable`.
#include <cstring>

#include "interpose/exec_hooks.h"

namespace cuxfer::shim {

bool exec_would_start(const char* file, bool search, const char* path_env, bool (*runnable_fn)(const char*),
                      char* buf, size_t buf_size) {
  if (!file || !*file) return false;
  if (!search || std::strchr(file, '/')) return runnable_fn(file);
  const char* dirs = path_env ? path_env : "/bin:/usr/bin";
  const size_t file_len = std::strlen(file);
  for (const char* p = dirs;;) {
    const char* end = std::strchr(p, ':');
    const size_t dir_len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    // dir + "/" + file + NUL; an empty entry is the current directory.
    const size_t need = (dir_len ? dir_len + 1 : 0) + file_len + 1;
    if (need <= buf_size) {
      size_t n = 0;
      if (dir_len) {
        std::memcpy(buf, p, dir_len);
        buf[dir_len] = '/';
        n = dir_len + 1;
      }
      std::memcpy(buf + n, file, file_len + 1);
      if (runnable_fn(buf)) return true;
    }
    if (!end) return false;
    p = end + 1;
  }
}

}  // namespace cuxfer::shim
