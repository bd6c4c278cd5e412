#include "trace/reader.h"

#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>

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
void reserve_records(const std::string& data, size_t pos, Trace& t) {
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

}  // namespace

ReadStatus read_trace(const std::string& path, Trace& t, std::string& error) {
  t = Trace{};
  t.path = path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open: " + std::strerror(errno);
    return ReadStatus::Missing;
  }
  // One read of the whole file when its size is known (a regular file);
  // streaming otherwise (a pipe, /proc).
  std::string data;
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    data.resize(static_cast<size_t>(size));
    in.read(data.data(), size);
    data.resize(static_cast<size_t>(in.gcount()));
  } else {
    in.clear();
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
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
      raw.resize(h.raw_size);
      size_t got = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
      if (ZSTD_isError(got) || got != h.raw_size) {
        t.cut_reason = "corrupt compressed block at offset " + std::to_string(pos) +
                       (ZSTD_isError(got) ? std::string(" (") + ZSTD_getErrorName(got) + ")" : "");
        break;
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
