#include "trace/reader.h"

#include <zstd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

#include "trace/format.h"

namespace cuxfer::trace {
namespace {

template <typename T>
bool append_records(std::string_view payload, std::vector<T>& out) {
  if (payload.size() % sizeof(T) != 0) return false;
  size_t n = payload.size() / sizeof(T);
  size_t old = out.size();
  out.resize(old + n);
  std::memcpy(out.data() + old, payload.data(), payload.size());
  return true;
}

// One zstd context for all blocks of a file: ZSTD_decompress() would set one
// up and tear it down for every block.
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
using DCtx = std::unique_ptr<ZSTD_DCtx, DCtxDeleter>;

// Decompresses a block of fixed-size records straight onto the end of `out`:
// event blocks are most of a trace, and going through a scratch buffer would
// copy every byte once more. On failure `out` is left as it was and the zstd
// result (an error code, or a size other than `raw_size`) is returned.
template <typename T>
size_t decompress_records(ZSTD_DCtx* dctx, std::string_view stored, uint32_t raw_size, std::vector<T>& out) {
  const size_t old = out.size();
  out.resize(old + raw_size / sizeof(T));
  size_t got = ZSTD_decompressDCtx(dctx, out.data() + old, raw_size, stored.data(), stored.size());
  if (ZSTD_isError(got) || got != raw_size) out.resize(old);
  return got;
}

bool apply_block(BlockType type, std::string_view payload, Trace& t) {
  switch (type) {
    case BlockType::Process:
      t.has_process = decode(payload, t.process);
      return t.has_process;
    case BlockType::ApiNames:
      t.api_names.clear();
      return decode_strings(payload, t.api_names);
    case BlockType::Modules:
      return decode(payload, t.modules);
    case BlockType::CallSites:
      return decode(payload, t.callsites);
    case BlockType::Events:
      return append_records(payload, t.events);
    case BlockType::GpuRecords:
      return append_records(payload, t.gpu_records);
    case BlockType::Notes:
      return decode_strings(payload, t.notes);
    case BlockType::Status:
      t.has_status = decode(payload, t.status);
      return t.has_status;
    case BlockType::End:
      t.complete = true;
      return true;
  }
  return true;  // unknown block types from a compatible writer are skipped
}

// Walks the block headers once (no decompression) to size the event and GPU
// record arrays up front: a trace of millions of events would otherwise be
// copied and re-faulted at every growth of the vectors. Stops at the first
// header that does not check out; the real pass reports it.
void reserve_records(std::string_view data, size_t pos, Trace& t) {
  uint64_t event_bytes = 0, gpu_bytes = 0;
  while (data.size() - pos >= sizeof(BlockHeader)) {
    BlockHeader h;
    std::memcpy(&h, data.data() + pos, sizeof h);
    if (h.magic != kBlockMagic || h.header_check != block_header_check(h) ||
        h.raw_size > kMaxBlockBytes || h.stored_size > kMaxBlockBytes ||
        data.size() - pos - sizeof h < h.stored_size)
      break;
    if (h.type == static_cast<uint16_t>(BlockType::Events)) event_bytes += h.raw_size;
    if (h.type == static_cast<uint16_t>(BlockType::GpuRecords)) gpu_bytes += h.raw_size;
    pos += sizeof h + h.stored_size;
  }
  // Sizes come from untrusted headers: bound them by what compression can
  // plausibly achieve on this file, and treat a failed reservation as a hint
  // not taken.
  const uint64_t plausible = static_cast<uint64_t>(data.size()) * 32;
  try {
    t.events.reserve(std::min(event_bytes, plausible) / sizeof(Event));
    t.gpu_records.reserve(std::min(gpu_bytes, plausible) / sizeof(GpuRecord));
  } catch (const std::exception&) {
  }
}

// The whole file in memory, in storage that is not zeroed first (a trace may
// be hundreds of megabytes). A file of known size is read up to the size it
// had when opened, as one read(); anything else (a pipe, /proc) until its
// end. A read error ends the data there, as a cut-short file does.
struct FileBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
};

// False when the file cannot be opened; errno says why.
bool read_file(const std::string& path, FileBytes& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  size_t capacity = regular ? static_cast<size_t>(st.st_size) : 0;
  out.data.reset(new char[capacity]);
  out.size = 0;
  for (;;) {
    if (out.size == capacity) {
      if (regular) break;
      const size_t grown = std::max<size_t>(capacity * 2, 1 << 16);
      std::unique_ptr<char[]> bigger(new char[grown]);
      if (out.size) std::memcpy(bigger.get(), out.data.get(), out.size);
      out.data = std::move(bigger);
      capacity = grown;
    }
    const ssize_t n = ::read(fd, out.data.get() + out.size, capacity - out.size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.size += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

}  // namespace

ReadStatus read_trace(const std::string& path, Trace& t, std::string& error) {
  t = Trace{};
  t.path = path;
  FileBytes file;
  if (!read_file(path, file)) {
    error = path + ": cannot open: " + std::strerror(errno);
    return ReadStatus::Missing;
  }
  const std::string_view data(file.data.get(), file.size);
  if (data.empty()) {
    error = path + ": empty file (the process wrote no trace data)";
    return ReadStatus::Empty;
  }
  FileHeader fh{};
  if (data.size() < sizeof fh &&
      std::memcmp(data.data(), kFileMagic, std::min(data.size(), sizeof kFileMagic)) == 0) {
    // A writer killed while writing its first 16 bytes: a trace, with nothing in it.
    error = path + ": cut short inside the file header (" + std::to_string(data.size()) +
            " bytes): the process wrote no trace data";
    return ReadStatus::Empty;
  }
  if (data.size() < sizeof fh || std::memcmp(data.data(), kFileMagic, sizeof kFileMagic) != 0) {
    error = path + ": not a cuxfer trace";
    return ReadStatus::Foreign;
  }
  std::memcpy(&fh, data.data(), sizeof fh);
  if (fh.version == 0 || fh.header_bytes < sizeof fh) {
    error = path + ": corrupt cuxfer trace file header";
    return ReadStatus::Foreign;
  }
  if (fh.version > kFormatVersion || fh.header_bytes > data.size()) {
    error = path + ": cuxfer trace format version " + std::to_string(fh.version) +
            " is not supported by this cuxfer (reads version " + std::to_string(kFormatVersion) +
            ")";
    return ReadStatus::Unsupported;
  }

  reserve_records(data, fh.header_bytes, t);
  std::string raw;
  DCtx dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  size_t pos = fh.header_bytes;
  while (pos < data.size()) {
    BlockHeader h{};
    if (data.size() - pos < sizeof h) {
      t.cut_reason = "truncated block header at offset " + std::to_string(pos);
      break;
    }
    std::memcpy(&h, data.data() + pos, sizeof h);
    if (h.magic != kBlockMagic || h.header_check != block_header_check(h) ||
        h.raw_size > kMaxBlockBytes || h.stored_size > kMaxBlockBytes) {
      t.cut_reason = "corrupt block header at offset " + std::to_string(pos);
      break;
    }
    if (data.size() - pos - sizeof h < h.stored_size) {
      t.cut_reason = "truncated block at offset " + std::to_string(pos);
      break;
    }
    std::string_view stored(data.data() + pos + sizeof h, h.stored_size);
    std::string_view payload;
    if (h.codec == static_cast<uint16_t>(Codec::Raw)) {
      if (h.raw_size != h.stored_size) {
        t.cut_reason = "corrupt raw block at offset " + std::to_string(pos);
        break;
      }
      payload = stored;
    } else if (h.codec == static_cast<uint16_t>(Codec::Zstd)) {
      // Event and GPU record blocks go straight into their arrays; a size
      // that is no whole number of records takes the general path, which
      // reports it.
      const auto type = static_cast<BlockType>(h.type);
      size_t got = 0;
      bool direct = true;
      if (type == BlockType::Events && h.raw_size % sizeof(Event) == 0)
        got = decompress_records(dctx.get(), stored, h.raw_size, t.events);
      else if (type == BlockType::GpuRecords && h.raw_size % sizeof(GpuRecord) == 0)
        got = decompress_records(dctx.get(), stored, h.raw_size, t.gpu_records);
      else {
        direct = false;
        raw.resize(h.raw_size);
        got = ZSTD_decompressDCtx(dctx.get(), raw.data(), raw.size(), stored.data(), stored.size());
      }
      if (ZSTD_isError(got) || got != h.raw_size) {
        t.cut_reason = "corrupt compressed block at offset " + std::to_string(pos) +
                       (ZSTD_isError(got) ? std::string(" (") + ZSTD_getErrorName(got) + ")" : "");
        break;
      }
      if (direct) {
        ++t.blocks_read;
        pos += sizeof h + h.stored_size;
        continue;
      }
      payload = std::string_view(raw.data(), got);
    } else {
      t.cut_reason = "unknown block codec at offset " + std::to_string(pos);
      break;
    }
    if (!apply_block(static_cast<BlockType>(h.type), payload, t)) {
      t.cut_reason = "malformed block contents at offset " + std::to_string(pos);
      break;
    }
    ++t.blocks_read;
    pos += sizeof h + h.stored_size;
  }
  if (t.cut_reason.empty() && !t.complete)
    t.cut_reason = "no end marker: the process did not shut down cleanly (killed or crashed)";
  return ReadStatus::Ok;
}

}  // namespace cuxfer::trace
