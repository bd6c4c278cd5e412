#include "analyzer/cli/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cuxfer::cli {

namespace {

// ".<name>.XXXXXX" beside `path`: the same file system, so rename is atomic.
std::string temp_template(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".XXXXXX";
}

// mkstemp creates 0600; the output gets what a plain create would (0666 less
// the umask), like the file it replaces would have had.
void give_default_mode(int fd) {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
}

bool write_all(int fd, const std::string& text, std::string& error) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::strerror(n < 0 ? errno : EIO);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool fail(const std::string& path, const std::string& reason, const char* command) {
  std::fprintf(stderr, "%s: cannot write %s: %s\n", command, path.c_str(), reason.c_str());
  return false;
}

}  // namespace

bool replace_file_with(const std::string& path, const FileWriter& write, const char* command) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return fail(path, "Is a directory", command);
  std::string temp = temp_template(path);
  // mkstemp opens with O_CREAT|O_EXCL: an existing name, a symlink included,
  // is never opened.
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return fail(path, std::strerror(errno), command);
  give_default_mode(fd);
  std::string error;
  bool ok = write(fd, temp, error);
  if (::close(fd) != 0 && ok) {
    error = std::strerror(errno);
    ok = false;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    return fail(path, error, command);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return fail(path, std::strerror(err), command);
  }
  return true;
}

bool replace_file(const std::string& path, const std::string& text, const char* command) {
  return replace_file_with(
      path, [&](int fd, const std::string&, std::string& error) { return write_all(fd, text, error); }, command);
}

}  // namespace cuxfer::cli
