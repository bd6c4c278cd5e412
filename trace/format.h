// Framing of a trace file (docs/trace-format.md is the prose version).
//
//   file   := FileHeader Block*
//   Block  := BlockHeader payload[stored_size]
//
// Each block is self-contained and compressed on its own, so a file cut short
// by a killed process reads up to its last complete block. Payload integrity
// comes from zstd's frame checksum; header integrity from the magic, a header
// checksum and size limits.
#pragma once

#include <cstdint>

namespace cuxfer::trace {

inline constexpr char kFileMagic[8] = {'C', 'U', 'X', 'F', 'E', 'R', 'T', 'R'};
// 2: Event::result is 16 bits, followed by Event::passthrough (the rewrite's
// reason for leaving a copy as made). Readers read version 1 too.
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kBlockMagic = 0x4B424358;  // "XCBK" little-endian
inline constexpr uint32_t kMaxBlockBytes = 64u << 20;  // refuse anything larger

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(FileHeader); lets later versions grow it
};
static_assert(sizeof(FileHeader) == 16);

enum class BlockType : uint16_t {
  Process = 1,    // who wrote this trace: pid, exe, argv, host, clock anchor, config
  ApiNames = 2,   // Event::api index -> name
  Modules = 3,    // loaded objects: path, load address, build id (for offline symbolization)
  CallSites = 4,  // call-site id -> return addresses
  Events = 5,     // Event[]
  GpuRecords = 6, // GpuRecord[]
  Notes = 7,      // human-readable messages (fallbacks, warnings), one per entry
  Status = 8,     // CUPTI state, simulated flag, dropped counts (repeated; last wins)
  End = 9,        // written at clean shutdown; its absence means the trace was cut short
  CuptiHandover = 10,  // the app's own profiler took CUPTI over: GPU records end at that time
  PyCodes = 11,   // Python code objects named by the call sites' Python frames (trace/python_frame.h)
  RunModes = 12,  // how the shim ran: rewrite, policy, registration, Python frames
  CuptiGate = 13, // when the shim turned CUPTI's copy records on and off, and why (CuptiGateChange[])
  NvtxNames = 14, // NVTX range names (NvtxName[]), each sent once
  NvtxStacks = 15, // NVTX range stacks, outermost first, by name id (CallSite encoding), each sent once
};

enum class Codec : uint16_t { Raw = 0, Zstd = 1 };

struct BlockHeader {
  uint32_t magic;        // kBlockMagic
  uint16_t type;         // BlockType
  uint16_t codec;        // Codec
  uint32_t raw_size;     // payload bytes after decompression
  uint32_t stored_size;  // payload bytes in the file
  uint32_t header_check; // block_header_check() of the fields above
  uint32_t reserved;
};
static_assert(sizeof(BlockHeader) == 24);

// FNV-1a over the first 16 bytes of the header: catches torn or garbage headers.
inline uint32_t block_header_check(const BlockHeader& h) {
  const auto* p = reinterpret_cast<const unsigned char*>(&h);
  uint32_t x = 2166136261u;
  for (int i = 0; i < 16; ++i) x = (x ^ p[i]) * 16777619u;
  return x;
}

}  // namespace cuxfer::trace
