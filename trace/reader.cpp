#include "trace/reader.h"

#include <zstd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

#include "trace/format.h"
#include "trace/prefault.h"

namespace cuxfer::trace {
namespace {

template <typename T>
bool append_records(std::string_view payload, std::vector<T>& out) {
  if (payload.size() % sizeof(T) != 0) return false;
  // An empty block adds nothing; memcpy to the null data() of an empty vector
  // would be undefined even for 0 bytes (found by fuzz/fuzz_trace_reader).
  if (payload.empty()) return true;
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
  // Only the block about to be written, not the whole reservation: the
  // reservation comes from headers that a corrupt file may have inflated.
  if (out.capacity() - old >= raw_size / sizeof(T)) prefault_for_write(out.data() + old, raw_size);
  out.resize(old + raw_size / sizeof(T));
  size_t got = ZSTD_decompressDCtx(dctx, out.data() + old, raw_size, stored.data(), stored.size());
  if (ZSTD_isError(got) || got != raw_size) out.resize(old);
  return got;
}

// Version 1 events held a 32-bit `result` where version 2 has a 16-bit one
// and the rewrite's passthrough reason: same size, same other fields. Each
// event read from a version 1 file is brought to the current layout (its
// code saturated, as a version 2 writer stores it; no reason recorded).
void upgrade_v1_events(Event* e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int32_t result;
    std::memcpy(&result, reinterpret_cast<const char*>(&e[i]) + offsetof(Event, result), sizeof result);
    e[i].result = record_result(result);
    e[i].passthrough = static_cast<uint8_t>(PassthroughReason::None);
    e[i].reserved = 0;
  }
}
static_assert(offsetof(Event, result) == 60 && offsetof(Event, passthrough) == 62 && sizeof(Event) == 64,
              "version 1's int32 result spans result, passthrough and reserved");

constexpr const char* kStoppedByReader = "the reader stopped here";

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
    case BlockType::CuptiHandover:
      t.has_cupti_handover = decode(payload, t.cupti_handover);
      return t.has_cupti_handover;
    case BlockType::PyCodes:
      return decode(payload, t.py_codes);
    case BlockType::RunModes:
      t.has_modes = decode(payload, t.modes);
      return t.has_modes;
    case BlockType::CuptiGate:
      return decode(payload, t.cupti_gate);
    case BlockType::NvtxNames:
      return decode(payload, t.nvtx_names);
    case BlockType::NvtxStacks:
      return decode(payload, t.nvtx_stacks);
    case BlockType::End:
      t.complete = true;
      return true;
  }
  return true;  // unknown block types from a compatible writer are skipped
}

// A trace file read front to back through one reused block buffer. Slurping
// the whole file instead would cost a fresh buffer as large as the file (a
// page fault per 4 KiB of it) and a second trip of every byte through memory.
// A regular file is read up to the size it had when opened (a live writer may
// still be appending); anything else (a pipe, /proc) until its end. A read
// error ends the data there, as a cut-short file does.
class TraceFile {
 public:
  // False when the file cannot be opened; errno says why.
  bool open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return false;
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
      size_ = static_cast<uint64_t>(st.st_size);
    return true;
  }
  ~TraceFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  // The size at open for a regular file, or 0 where it is not known.
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }

  // Copies up to `n` bytes to `dst`; fewer only at the end of the data.
  size_t read(void* dst, size_t n) {
    if (size_) n = static_cast<size_t>(std::min<uint64_t>(n, size_ - std::min(size_, pos_)));
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, static_cast<char*>(dst) + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    pos_ += got;
    return got;
  }

  // Reads `n` bytes into the reused block buffer; null if the data ends first.
  const char* read_block(size_t n) {
    // A size from a corrupt header that the file cannot hold allocates nothing.
    if (size_ && n > size_ - std::min(size_, pos_)) return nullptr;
    // An empty payload is there, not missing: before any block allocated the
    // buffer its pointer is null, which would read as "truncated" (found by
    // fuzz/fuzz_trace_reader: an End block right after the file header).
    if (n == 0) return "";
    if (n > capacity_) {
      buffer_.reset(new char[n]);  // not zeroed: read() fills it
      capacity_ = n;
    }
    return read(buffer_.get(), n) == n ? buffer_.get() : nullptr;
  }

  // Passes over `n` bytes; false if the data ends first.
  bool skip(uint64_t n) {
    char sink[4096];
    while (n > 0) {
      const size_t step = static_cast<size_t>(std::min<uint64_t>(n, sizeof sink));
      if (read(sink, step) != step) return false;
      n -= step;
    }
    return true;
  }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

// Walks the block headers of a regular file once (pread, no payloads) to size
// the event and GPU record arrays up front: a trace of millions of events
// would otherwise be copied and re-faulted at every growth of the vectors.
// Stops at the first header that does not check out; the real pass reports it.
void reserve_records(const TraceFile& file, uint64_t pos, Trace& t, bool keep_gpu_records) {
  if (file.size() == 0) return;  // a stream: the vectors grow as blocks arrive
  uint64_t event_bytes = 0, gpu_bytes = 0;
  while (file.size() - pos >= sizeof(BlockHeader)) {
    BlockHeader h;
    if (::pread(file.fd(), &h, sizeof h, static_cast<off_t>(pos)) != static_cast<ssize_t>(sizeof h)) break;
    if (h.magic != kBlockMagic || h.header_check != block_header_check(h) ||
        h.raw_size > kMaxBlockBytes || h.stored_size > kMaxBlockBytes ||
        file.size() - pos - sizeof h < h.stored_size)
      break;
    if (h.type == static_cast<uint16_t>(BlockType::Events)) event_bytes += h.raw_size;
    if (h.type == static_cast<uint16_t>(BlockType::GpuRecords)) gpu_bytes += h.raw_size;
    pos += sizeof h + h.stored_size;
  }
  // Sizes come from untrusted headers: bound them by what compression can
  // plausibly achieve on this file, and treat a failed reservation as a hint
  // not taken.
  const uint64_t plausible = file.size() * 32;
  try {
    t.events.reserve(std::min(event_bytes, plausible) / sizeof(Event));
    if (keep_gpu_records) t.gpu_records.reserve(std::min(gpu_bytes, plausible) / sizeof(GpuRecord));
  } catch (const std::exception&) {
  }
}

}  // namespace

bool trace_ends_cleanly(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  BlockHeader h{};
  const bool read = ::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof h) &&
                    ::pread(fd, &h, sizeof h, st.st_size - static_cast<off_t>(sizeof h)) == static_cast<ssize_t>(sizeof h);
  ::close(fd);
  return read && h.magic == kBlockMagic && h.type == static_cast<uint16_t>(BlockType::End) && h.stored_size == 0 &&
         h.header_check == block_header_check(h);
}

ReadStatus read_trace(const std::string& path, Trace& t, std::string& error) {
  return read_trace(path, t, error, EventBlocks{});
}

ReadStatus read_trace(const std::string& path, Trace& t, std::string& error, const EventBlocks& event_blocks) {
  const bool streaming = event_blocks.skip || event_blocks.sink;
  t = Trace{};
  t.path = path;
  TraceFile file;
  if (!file.open(path)) {
    error = path + ": cannot open: " + std::strerror(errno);
    return ReadStatus::Missing;
  }
  FileHeader fh{};
  const size_t head = file.read(&fh, sizeof fh);
  if (head == 0) {
    error = path + ": empty file (the process wrote no trace data)";
    return ReadStatus::Empty;
  }
  if (head < sizeof fh && std::memcmp(fh.magic, kFileMagic, std::min(head, sizeof kFileMagic)) == 0) {
    // A writer killed while writing its first 16 bytes: a trace, with nothing in it.
    error = path + ": cut short inside the file header (" + std::to_string(head) +
            " bytes): the process wrote no trace data";
    return ReadStatus::Empty;
  }
  if (head < sizeof fh || std::memcmp(fh.magic, kFileMagic, sizeof kFileMagic) != 0) {
    error = path + ": not a cuxfer trace";
    return ReadStatus::Foreign;
  }
  if (fh.version == 0 || fh.header_bytes < sizeof fh) {
    error = path + ": corrupt cuxfer trace file header";
    return ReadStatus::Foreign;
  }
  // A later version's longer file header: skipped, unless the file ends inside it.
  if (fh.version > kFormatVersion || !file.skip(fh.header_bytes - sizeof fh)) {
    error = path + ": cuxfer trace format version " + std::to_string(fh.version) +
            " is not supported by this cuxfer (reads version " + std::to_string(kFormatVersion) +
            "): it was written by a newer cuxfer; upgrade this one (pip install -U cuxfer)";
    return ReadStatus::Unsupported;
  }

  t.format_version = fh.version;
  // GPU records are passed by or handed over whether or not the events are
  // (EventBlocks): never kept in Trace::gpu_records then.
  const bool gpu_passed = event_blocks.skip_gpu_records || event_blocks.gpu_sink;
  if (!streaming) reserve_records(file, fh.header_bytes, t, !gpu_passed);
  // Each block is at most kMaxBlockBytes, but a file of many tiny blocks that
  // decompress to that much each would make the reader allocate thousands of
  // times the file's size. Real traces expand 3-20x (docs/benchmarks.md:
  // ~19.5 bytes an event on disk for 64 in memory); past 1024x the file is
  // not a plausible trace, and reading stops there with a reason.
  const uint64_t expansion_limit = std::max<uint64_t>(uint64_t{256} << 20, uint64_t{file.size()} * 1024);
  uint64_t expanded = 0;
  std::string raw;
  std::unique_ptr<Event[]> block_events;  // streaming: one block's events
  size_t block_capacity = 0;
  std::vector<GpuRecord> block_gpu;  // streaming: one block's GPU records, when not kept
  // A block of GPU records not kept: counted or handed over; false when the sink stops the read.
  auto pass_gpu = [&](std::span<GpuRecord> records) {
    if (event_blocks.gpu_sink) return event_blocks.gpu_sink(records);
    t.gpu_records_passed.records += records.size();
    for (const GpuRecord& r : records) {
      const auto kind = static_cast<GpuRecordKind>(r.kind);
      if (kind == GpuRecordKind::UnifiedMemory)
        ++t.gpu_records_passed.unified_memory;
      else if (r.correlation_id != 0 ||
               (kind != GpuRecordKind::Memcpy && kind != GpuRecordKind::Memset && kind != GpuRecordKind::Kernel))
        ++t.gpu_records_passed.not_joined_by_time;
      else if (kind == GpuRecordKind::Kernel)
        ++t.gpu_records_passed.kernels;
    }
    return true;
  };
  DCtx dctx(ZSTD_createDCtx());
  if (!dctx) throw std::bad_alloc();
  for (uint64_t pos = fh.header_bytes;;) {
    BlockHeader h{};
    const size_t got_header = file.read(&h, sizeof h);
    if (got_header == 0) break;  // the end of the data, between blocks
    if (got_header < sizeof h) {
      t.cut_reason = "truncated block header at offset " + std::to_string(pos);
      break;
    }
    if (h.magic != kBlockMagic || h.header_check != block_header_check(h) ||
        h.raw_size > kMaxBlockBytes || h.stored_size > kMaxBlockBytes) {
      t.cut_reason = "corrupt block header at offset " + std::to_string(pos);
      break;
    }
    expanded += h.raw_size;
    if (file.size() != 0 && expanded > expansion_limit) {
      t.cut_reason = "block at offset " + std::to_string(pos) + " would expand the trace past 1024 times its " +
                     "size on disk: not a plausible trace, read no further";
      break;
    }
    const char* stored_data = file.read_block(h.stored_size);
    if (!stored_data) {
      t.cut_reason = "truncated block at offset " + std::to_string(pos);
      break;
    }
    std::string_view stored(stored_data, h.stored_size);
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
      if (streaming && type == BlockType::Events && h.raw_size % sizeof(Event) == 0) {
        if (event_blocks.skip) {
          ++t.blocks_read;
          pos += sizeof h + h.stored_size;
          continue;
        }
        // The events pass through one array reused from block to block and
        // never zeroed: the decompression fills what the sink sees.
        const size_t n = h.raw_size / sizeof(Event);
        if (n > block_capacity) {
          block_events = std::make_unique_for_overwrite<Event[]>(n);
          block_capacity = n;
        }
        got = ZSTD_decompressDCtx(dctx.get(), block_events.get(), h.raw_size, stored.data(), stored.size());
        if (!ZSTD_isError(got) && got == h.raw_size) {
          if (fh.version < 2) upgrade_v1_events(block_events.get(), n);
          if (!event_blocks.sink(std::span<Event>(block_events.get(), n))) {
            t.cut_reason = kStoppedByReader;
            break;
          }
        }
      } else if (gpu_passed && type == BlockType::GpuRecords && h.raw_size % sizeof(GpuRecord) == 0) {
        block_gpu.clear();
        got = decompress_records(dctx.get(), stored, h.raw_size, block_gpu);
        if (!ZSTD_isError(got) && got == h.raw_size && !pass_gpu(block_gpu)) {
          t.cut_reason = kStoppedByReader;
          break;
        }
      } else if (type == BlockType::Events && h.raw_size % sizeof(Event) == 0)
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
    if (streaming && static_cast<BlockType>(h.type) == BlockType::Events) {
      // A raw events block, or a compressed one of no whole number of
      // events: checked as read_trace checks it, then handed over.
      t.events.clear();
      if (!append_records(payload, t.events)) {
        t.cut_reason = "malformed block contents at offset " + std::to_string(pos);
        break;
      }
      if (!event_blocks.skip) {
        if (fh.version < 2) upgrade_v1_events(t.events.data(), t.events.size());
        if (!event_blocks.sink(t.events)) {
          t.cut_reason = kStoppedByReader;
          break;
        }
      }
      ++t.blocks_read;
      pos += sizeof h + h.stored_size;
      continue;
    }
    if (!apply_block(static_cast<BlockType>(h.type), payload, t)) {
      t.cut_reason = "malformed block contents at offset " + std::to_string(pos);
      break;
    }
    if (gpu_passed && static_cast<BlockType>(h.type) == BlockType::GpuRecords) {
      // A raw GPU records block, checked as above, then passed on.
      const bool go_on = pass_gpu(t.gpu_records);
      t.gpu_records.clear();
      if (!go_on) {
        t.cut_reason = kStoppedByReader;
        break;
      }
    }
    ++t.blocks_read;
    pos += sizeof h + h.stored_size;
  }
  if (t.cut_reason.empty() && !t.complete)
    t.cut_reason = "no end marker: the process did not shut down cleanly (killed or crashed)";
  if (streaming) {
    t.events.clear();
    t.events.shrink_to_fit();
    return ReadStatus::Ok;
  }
  if (fh.version < 2) upgrade_v1_events(t.events.data(), t.events.size());
  return ReadStatus::Ok;
}

}  // namespace cuxfer::trace
