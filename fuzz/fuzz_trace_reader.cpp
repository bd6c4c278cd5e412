// Fuzzes the trace reader with arbitrary bytes as a trace file, and the record
// decoders of trace/records.h with the same bytes as a block payload. A trace
// is untrusted input (a file cut short by a kill, a foreign file, a corrupt
// disk): the reader must never crash, hang or allocate without bound, and it
// answers every input with a ReadStatus.
//
// The reader takes a path, so the bytes go into one memfd, reopened through
// /proc/self/fd: a regular file of exactly the input's size, as a trace on
// disk is (that keeps the header pre-pass, which sizes arrays from a regular
// file's block headers, in play).
//
// Block headers carry a checksum that random mutations almost always break,
// which would stop every input at its first block. So each input is read a
// second time with the checksums repaired (sizes, types and codecs kept as the
// mutator made them), letting the fuzzer reach the block contents.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "trace/format.h"
#include "trace/reader.h"
#include "trace/records.h"

namespace {

using namespace cuxfer::trace;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_trace_reader: invariant broken: %s\n", what);
    std::abort();
  }
}

// One memfd for the whole run, rewritten for every input.
const std::string& memfd_path() {
  static const std::string path = [] {
    const int fd = ::memfd_create("cuxfer-fuzz-trace", MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void read_as_file(const uint8_t* data, size_t size) {
  const std::string& path = memfd_path();
  const int fd = std::atoi(path.c_str() + sizeof "/proc/self/fd/" - 1);
  check(::ftruncate(fd, 0) == 0, "ftruncate");
  for (size_t done = 0; done < size;) {
    const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    check(w > 0, "pwrite to the memfd");
    done += static_cast<size_t>(w);
  }
  Trace t;
  std::string error;
  const ReadStatus st = read_trace(path, t, error);
  if (st != ReadStatus::Ok) {
    check(!error.empty(), "a refused trace says why");
    return;
  }
  // Whatever was read is self-consistent and no larger than the input allows:
  // every record comes from at most 64 MiB of payload per block.
  check(t.complete || !t.cut_reason.empty(), "an incomplete trace says why");
  check(t.blocks_read <= size / sizeof(BlockHeader), "blocks read fit in the file");
  check(t.events.size() <= t.blocks_read * (kMaxBlockBytes / sizeof(Event)), "events bounded by blocks");
  for (const Event& e : t.events) (void)t.api_name(e.api);
}

// The same bytes with every block header's checksum recomputed.
std::vector<uint8_t> with_repaired_headers(const uint8_t* data, size_t size) {
  std::vector<uint8_t> out(data, data + size);
  if (size < sizeof(FileHeader)) return out;
  FileHeader fh;
  std::memcpy(&fh, out.data(), sizeof fh);
  uint64_t pos = fh.header_bytes < sizeof fh ? sizeof fh : fh.header_bytes;
  while (pos <= size && size - pos >= sizeof(BlockHeader)) {
    BlockHeader h;
    std::memcpy(&h, out.data() + pos, sizeof h);
    h.magic = kBlockMagic;
    h.header_check = block_header_check(h);
    std::memcpy(out.data() + pos, &h, sizeof h);
    pos += sizeof h + h.stored_size;
  }
  return out;
}

// Decoders on raw bytes; where the encoding is canonical, decode + encode
// gives the input back.
void decode_payload(std::string_view in) {
  ProcessInfo p;
  if (decode(in, p)) {
    std::string again;
    encode(p, again);
    check(again == in, "ProcessInfo round trip");
  }
  std::vector<ModuleInfo> modules;
  if (decode(in, modules)) {
    std::string again;
    encode(modules, again);
    check(again == in, "ModuleInfo round trip");
  }
  std::vector<CallSite> sites;
  if (decode(in, sites)) {
    std::string again;
    encode(sites, again);
    check(again == in, "CallSite round trip");
  }
  Status s;
  if (decode(in, s)) {
    std::string again;
    encode(s, again);  // not byte-exact: any nonzero "simulated" byte reads as 1
    Status s2;
    check(decode(again, s2) && s2.simulated == s.simulated && s2.cupti == s.cupti &&
              s2.cupti_reason == s.cupti_reason && s2.events_dropped == s.events_dropped,
          "Status round trip");
  }
  std::vector<std::string> strings;
  if (decode_strings(in, strings)) {
    std::string again;
    encode_strings(strings, again);
    check(again == in, "strings round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_payload(std::string_view(reinterpret_cast<const char*>(data), size));
  read_as_file(data, size);
  const std::vector<uint8_t> repaired = with_repaired_headers(data, size);
  read_as_file(repaired.data(), repaired.size());
  return 0;
}
