// Writes the seed corpus of fuzz_trace_reader: small traces made with the test
// suite's SyntheticTrace (the writer the shim uses: zstd blocks), the same
// contents framed as raw (uncompressed) blocks so that mutations reach the
// record decoders directly, and a few damaged variants. Every file stays well
// under 64 KiB.
//
//   build-fuzz/fuzz/fuzz_make_trace_seeds fuzz/corpus/fuzz_trace_reader
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/unit/trace/synthetic_trace.h"
#include "trace/format.h"
#include "trace/records.h"

namespace {

using namespace cuxfer;
using trace::Direction;
using trace::MemKind;

testing::SyntheticTrace small_job(int events) {
  testing::SyntheticTrace t;
  trace::ModuleInfo m;
  m.base = 0x555555554000ull;
  m.low = m.base;
  m.high = m.base + 0x20000;
  m.path = "/opt/app/train";
  m.build_id = "0123456789abcdef0123456789abcdef01234567";
  t.modules.push_back(m);
  const uint32_t s1 = t.site(m.base + 0x1234), s2 = t.site(m.base + 0x5678);
  t.callsites[1].frames.push_back(m.base + 0x9abc);
  for (int i = 0; i < events; ++i) {
    auto& e = t.copy(i % 2 ? Direction::DtoH : Direction::HtoD, i % 3 ? MemKind::Pageable : MemKind::Pinned,
                     (1u << 20) << (i % 4), 5000 + i, i % 2, i % 2 ? s2 : s1);
    if (i % 2) t.gpu(e, 3000);
  }
  t.notes = {"cupti: unavailable (test)", "fingerprints: on"};
  t.status.simulated = true;
  return t;
}

void put_block(std::string& out, trace::BlockType type, const std::string& payload) {
  trace::BlockHeader h{};
  h.magic = trace::kBlockMagic;
  h.type = static_cast<uint16_t>(type);
  h.codec = static_cast<uint16_t>(trace::Codec::Raw);
  h.raw_size = h.stored_size = static_cast<uint32_t>(payload.size());
  h.header_check = trace::block_header_check(h);
  out.append(reinterpret_cast<const char*>(&h), sizeof h);
  out += payload;
}

// The trace of `t` with uncompressed blocks (a codec the reader accepts).
std::string raw_trace(const testing::SyntheticTrace& t, bool end) {
  std::string out;
  trace::FileHeader fh{};
  std::copy(std::begin(trace::kFileMagic), std::end(trace::kFileMagic), fh.magic);
  fh.version = trace::kFormatVersion;
  fh.header_bytes = sizeof fh;
  out.append(reinterpret_cast<const char*>(&fh), sizeof fh);
  std::string b;
  trace::encode(t.process, b);
  put_block(out, trace::BlockType::Process, b);
  b.clear();
  trace::encode_strings(t.apis, b);
  put_block(out, trace::BlockType::ApiNames, b);
  b.clear();
  trace::encode(t.modules, b);
  put_block(out, trace::BlockType::Modules, b);
  b.clear();
  trace::encode(t.callsites, b);
  put_block(out, trace::BlockType::CallSites, b);
  put_block(out, trace::BlockType::Events,
            std::string(reinterpret_cast<const char*>(t.events.data()), t.events.size() * sizeof(trace::Event)));
  put_block(out, trace::BlockType::GpuRecords,
            std::string(reinterpret_cast<const char*>(t.gpu_records.data()),
                        t.gpu_records.size() * sizeof(trace::GpuRecord)));
  b.clear();
  trace::encode_strings(t.notes, b);
  put_block(out, trace::BlockType::Notes, b);
  b.clear();
  trace::encode(t.status, b);
  put_block(out, trace::BlockType::Status, b);
  if (end) put_block(out, trace::BlockType::End, "");
  return out;
}

bool save(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  // zstd-compressed, as the shim writes them.
  for (int events : {0, 3, 40}) {
    const std::string path = dir + "/zstd-" + std::to_string(events) + "-events.trace";
    ::unlink(path.c_str());
    ok &= small_job(events).write(path);
  }
  {
    testing::SyntheticTrace killed = small_job(5);
    killed.write_end = false;
    killed.write_status = false;
    const std::string path = dir + "/zstd-killed.trace";
    ::unlink(path.c_str());
    ok &= killed.write(path);
  }
  // Raw blocks: the decoders one mutation away.
  ok &= save(dir + "/raw-3-events.trace", raw_trace(small_job(3), true));
  ok &= save(dir + "/raw-no-end.trace", raw_trace(small_job(1), false));
  // Damaged: cut inside a block, and the file header alone.
  const std::string full = slurp(dir + "/zstd-3-events.trace");
  ok &= save(dir + "/zstd-cut.trace", full.substr(0, full.size() * 2 / 3));
  ok &= save(dir + "/header-only.trace", full.substr(0, sizeof(trace::FileHeader)));
  if (!ok) std::fprintf(stderr, "fuzz_make_trace_seeds: could not write every seed\n");
  return ok ? 0 : 1;
}
