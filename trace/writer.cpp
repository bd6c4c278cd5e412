#include "trace/writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

namespace cuxfer::trace {

std::unique_ptr<TraceWriter> TraceWriter::create(const std::string& path, unsigned mode,
                                                 std::string* error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (error) *error = "cannot create trace file " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(fd, path));
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, sizeof h.magic);
  h.version = kFormatVersion;
  h.header_bytes = sizeof h;
  if (!w->write_all(&h, sizeof h)) {
    if (error) *error = w->error_;
    return nullptr;
  }
  return w;
}

TraceWriter::TraceWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  auto* ctx = ZSTD_createCCtx();
  if (ctx) {
    // Level -1: the writer thread shares the app's cores, and the analyzer
    // spends most of its reading time decompressing. Against level 1 it
    // stores literals without Huffman coding: on event blocks (timestamps, addresses)
    // that costs ~2 % in size and makes both compressing and decompressing
    // ~10 % faster (docs/benchmarks.md, "Analyzer throughput").
    ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, -1);
    ZSTD_CCtx_setParameter(ctx, ZSTD_c_checksumFlag, 1);
  }
  zstd_ctx_ = ctx;
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_ctx_));
}

bool TraceWriter::write_all(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      error_ = "cannot write trace file " + path_ + ": " + std::strerror(n < 0 ? errno : ENOSPC);
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
  return true;
}

bool TraceWriter::write_block(BlockType type, const void* data, size_t bytes) {
  if (failed_) return false;
  if (bytes > kMaxBlockBytes) {
    failed_ = true;
    error_ = "internal: trace block too large";
    return false;
  }
  BlockHeader h{};
  h.magic = kBlockMagic;
  h.type = static_cast<uint16_t>(type);
  h.raw_size = static_cast<uint32_t>(bytes);
  const void* payload = data;
  size_t stored = bytes;
  h.codec = static_cast<uint16_t>(Codec::Raw);
  if (zstd_ctx_ && bytes > 0) {
    scratch_.resize(ZSTD_compressBound(bytes));
    size_t z = ZSTD_compress2(static_cast<ZSTD_CCtx*>(zstd_ctx_), scratch_.data(), scratch_.size(),
                              data, bytes);
    if (!ZSTD_isError(z)) {
      h.codec = static_cast<uint16_t>(Codec::Zstd);
      payload = scratch_.data();
      stored = z;
    }
  }
  h.stored_size = static_cast<uint32_t>(stored);
  h.header_check = block_header_check(h);
  // One write per block where possible, so a concurrent kill rarely tears it.
  std::string buf(reinterpret_cast<const char*>(&h), sizeof h);
  buf.append(static_cast<const char*>(payload), stored);
  return write_all(buf.data(), buf.size());
}

}  // namespace cuxfer::trace
