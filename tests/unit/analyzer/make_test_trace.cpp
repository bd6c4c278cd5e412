// Writes a synthetic trace for the command-line tests:
//   make_test_trace busy|clean|gpu|truncated|cut-empty OUT
// cut-empty: a process cut short before any event was written.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/unit/trace/synthetic_trace.h"

using cuxfer::testing::SyntheticTrace;
using cuxfer::trace::Direction;
using cuxfer::trace::MemKind;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_test_trace busy|clean|gpu|truncated|cut-empty OUT\n");
    return 2;
  }
  std::string kind = argv[1], out = argv[2];
  constexpr uint64_t MiB = 1 << 20;
  SyntheticTrace t;
  t.events_per_block = 64;
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  uint32_t a = t.site(0x401000), b = t.site(0x402000);
  if (kind == "cut-empty") {
    // no events: the cut below leaves only the metadata blocks
  } else if (kind == "clean") {
    for (int i = 0; i < 10; ++i) t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 320'000, true, a);
  } else {
    for (int i = 0; i < 1200; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, a);
    for (int i = 0; i < 4; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, true, b);
    t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'300'000, false, b);
  }
  if (kind == "gpu") {
    t.status.cupti = cuxfer::trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    for (const auto& e : t.events) t.gpu(e, (e.t_exit_ns - e.t_enter_ns) / 2);
  } else {
    t.status.simulated = true;
    t.status.cupti_reason = "simulated CUDA";
  }
  std::string error;
  ::unlink(out.c_str());
  if (!t.write(out, &error)) {
    std::fprintf(stderr, "make_test_trace: %s\n", error.c_str());
    return 1;
  }
  if (kind == "truncated") {
    // Cut in the middle of the event blocks, as a SIGKILL would.
    FILE* f = std::fopen(out.c_str(), "rb");
    std::fseek(f, 0, SEEK_END);
    long size = std::ftell(f);
    std::fclose(f);
    if (::truncate(out.c_str(), size / 2) != 0) return 1;
  } else if (kind == "cut-empty") {
    FILE* f = std::fopen(out.c_str(), "rb");
    std::fseek(f, 0, SEEK_END);
    long size = std::ftell(f);
    std::fclose(f);
    if (::truncate(out.c_str(), size - 3) != 0) return 1;  // inside the last block
  }
  return 0;
}
