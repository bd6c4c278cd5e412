// The list of traces a recorded job wrote. Every process the shim runs in
// appends one line "<pid> <trace path>\n" (O_APPEND, so lines from concurrent
// processes do not interleave) to the file named by CUXFER_MANIFEST. The file
// lives in a private directory made for one `cuxfer record` and removed after.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cuxfer::launcher {

struct ManifestEntry {
  uint32_t pid = 0;
  std::string trace_path;
};

class Manifest {
 public:
  // Makes a 0700 directory under $TMPDIR (else /tmp) and an empty 0600
  // manifest file in it. Null and one line in `error` on failure.
  static std::unique_ptr<Manifest> create(std::string* error);
  ~Manifest();  // removes the file and the directory
  Manifest(const Manifest&) = delete;
  Manifest& operator=(const Manifest&) = delete;

  const std::string& path() const { return path_; }
  std::vector<ManifestEntry> read() const;

 private:
  Manifest(std::string dir, std::string path) : dir_(std::move(dir)), path_(std::move(path)) {}
  std::string dir_, path_;
};

// Parses manifest text; malformed lines (a torn write) are skipped.
std::vector<ManifestEntry> parse_manifest(const std::string& text);

}  // namespace cuxfer::launcher
