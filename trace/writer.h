// Appends framed, compressed blocks to a trace file. Used by the shim's
// background writer thread only (it allocates); never on an app's hot path.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "trace/format.h"
#include "trace/records.h"

namespace cuxfer::trace {

class TraceWriter {
 public:
  // Creates `path` exclusively (no clobbering, no following a symlink at the
  // final component) with the given permissions and writes the file header.
  // Returns null and fills `error` (one line) on failure.
  static std::unique_ptr<TraceWriter> create(const std::string& path, unsigned mode,
                                             std::string* error);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Each call writes one whole block; false after an I/O error (the writer then
  // stays failed and further calls do nothing).
  bool write_block(BlockType type, const void* data, size_t bytes);
  bool write_block(BlockType type, const std::string& payload) {
    return write_block(type, payload.data(), payload.size());
  }
  // There is no user-space buffering: once write_block returns, the block is
  // in the kernel and survives a SIGKILL of the process.
  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  TraceWriter(int fd, std::string path);
  bool write_all(const void* data, size_t bytes);

  int fd_;
  std::string path_;
  void* zstd_ctx_ = nullptr;
  std::vector<char> scratch_;
  bool failed_ = false;
  std::string error_;
  uint64_t bytes_written_ = 0;
};

}  // namespace cuxfer::trace
