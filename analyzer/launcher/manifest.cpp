#include "analyzer/launcher/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "analyzer/text/units.h"

namespace cuxfer::launcher {

std::unique_ptr<Manifest> Manifest::create(std::string* error) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/cuxfer-record.XXXXXX";
  if (!::mkdtemp(templ.data())) {
    if (error) *error = "cannot create a temporary directory (" + templ + "): " + std::strerror(errno);
    return nullptr;
  }
  std::string path = templ + "/manifest";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (error) *error = "cannot create " + path + ": " + std::strerror(errno);
    ::rmdir(templ.c_str());
    return nullptr;
  }
  ::close(fd);
  return std::unique_ptr<Manifest>(new Manifest(templ, path));
}

Manifest::~Manifest() {
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

std::vector<ManifestEntry> Manifest::read() const {
  std::ifstream in(path_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_manifest(text);
}

std::vector<ManifestEntry> parse_manifest(const std::string& text) {
  std::vector<ManifestEntry> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a line without its newline is torn
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp + 1 >= line.size()) continue;
    uint64_t pid = 0;
    if (!text::parse_unsigned(line.substr(0, sp), pid) || pid == 0 || pid > UINT32_MAX) continue;
    out.push_back({static_cast<uint32_t>(pid), std::string(line.substr(sp + 1))});
  }
  return out;
}

}  // namespace cuxfer::launcher
