// trace_payloads TRACE: writes every block's payload of a cuxfer trace,
// decompressed, to stdout, one after another (nothing else). For tests that
// look for bytes a trace must not contain (run_no_user_data.py); the reader
// proper decodes blocks and would not show stray bytes.
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trace/format.h"

using namespace cuxfer::trace;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_payloads TRACE\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < sizeof(FileHeader)) {
    std::fprintf(stderr, "trace_payloads: %s: too short\n", argv[1]);
    return 1;
  }
  size_t pos = sizeof(FileHeader);
  std::vector<char> raw;
  int blocks = 0;
  while (pos + sizeof(BlockHeader) <= file.size()) {
    BlockHeader h;
    std::memcpy(&h, file.data() + pos, sizeof h);
    pos += sizeof h;
    if (h.magic != kBlockMagic || h.header_check != block_header_check(h) || h.stored_size > file.size() - pos) {
      std::fprintf(stderr, "trace_payloads: bad block at offset %zu\n", pos - sizeof h);
      return 1;
    }
    const char* payload = file.data() + pos;
    pos += h.stored_size;
    if (h.codec == static_cast<uint16_t>(Codec::Zstd)) {
      raw.resize(h.raw_size);
      size_t n = ZSTD_decompress(raw.data(), raw.size(), payload, h.stored_size);
      if (ZSTD_isError(n) || n != h.raw_size) {
        std::fprintf(stderr, "trace_payloads: block at offset %zu does not decompress\n", pos);
        return 1;
      }
      std::fwrite(raw.data(), 1, n, stdout);
    } else {
      std::fwrite(payload, 1, h.stored_size, stdout);
    }
    ++blocks;
  }
  std::fprintf(stderr, "trace_payloads: %d blocks\n", blocks);
  return blocks > 0 ? 0 : 1;
}
