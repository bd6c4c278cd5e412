// Writes a synthetic trace for the command-line tests:
//   make_test_trace busy|clean|gpu|truncated|cut-empty|python|nvtx|nvtx-cpu|fingerprints OUT
// cut-empty: a process cut short before any event was written.
// python: a Python program's: sites with Python frames, and copies from
// threads that ran no Python (a site with native frames only).
// nvtx: NVTX ranges, nested, on two threads whose events interleave, with
// findings' copies inside them, failed copies, and copies in no range; CUPTI's
// GPU records without correlation ids (joined by time), written after the
// events. nvtx-cpu: the same without CUPTI.
// fingerprints: copies with the shim's content fingerprints, some uploads
// repeating what their device buffer holds and some sending back what a
// download brought (duplicate_uploads, round_trips), a failed copy and a
// fingerprint of no copy among them; CUPTI's GPU records without
// correlation ids (joined by time), written after the events.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/unit/trace/synthetic_trace.h"
#include "trace/python_frame.h"
#include "trace/shim_names.h"

using cuxfer::testing::SyntheticTrace;
using cuxfer::trace::Direction;
using cuxfer::trace::MemKind;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(
        stderr,
        "usage: make_test_trace busy|clean|gpu|truncated|cut-empty|python|nvtx|nvtx-cpu|fingerprints OUT\n");
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
  } else if (kind == "python") {
    t.process.exe = "/usr/bin/python3";
    t.process.argv = {"python3", "/work/train.py"};
    t.py_codes.push_back({1, 0x030b, 10, "/work/train.py", "step", ""});
    t.py_codes.push_back({2, 0x030b, 40, "/work/train.py", "evaluate", ""});
    const uint32_t step = t.site({0x401000, cuxfer::trace::encode_python_frame(1, 0, true)});
    const uint32_t evaluate = t.site({0x401000, cuxfer::trace::encode_python_frame(2, 0, true)});
    for (int i = 0; i < 600; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, step);
    for (int i = 0; i < 4; ++i)
      t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, true, evaluate);
    // The autograd engine's and a transfer thread's copies: native sites only.
    for (uint32_t thread : {7, 8, 8})
      t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'300'000, false, b).thread_id = thread;
    t.copy(Direction::DtoH, MemKind::Pageable, 4 * MiB, 900'000, false, a).thread_id = 7;
  } else if (kind == "nvtx" || kind == "nvtx-cpu") {
    using cuxfer::trace::Event;
    const uint32_t c = t.site(0x403000);
    const uint32_t main_thread = t.process.pid, loader = t.process.pid + 1;
    const uint32_t epoch = t.nvtx_stack({"epoch"}), forward = t.nvtx_stack({"epoch", "forward"}),
                   load = t.nvtx_stack({"epoch", "forward", "load"}), eval = t.nvtx_stack({"eval"}),
                   other = t.nvtx_stack({"data::prefetch"});
    auto on = [](uint32_t thread, Event& e) -> Event& {
      e.thread_id = thread;
      return e;
    };
    for (int step = 0; step < 6; ++step) {
      t.nvtx_ranges(main_thread, epoch);
      t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 400'000, true, b);
      t.nvtx_ranges(main_thread, forward);
      t.nvtx_ranges(loader, load);
      for (int i = 0; i < 200; ++i) {
        t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, a);  // a tiny storm, in forward
        if (i % 40 == 0) on(loader, t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 3'000'000, true, c));
      }
      on(loader, t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 900'000, false, c)).flags |=
          cuxfer::trace::kFlagFailed;
      t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 1'900'000, false, b);  // large pageable, in forward
      t.nvtx_ranges(loader, step % 2 ? other : 0);
      on(loader, t.copy(Direction::DtoH, MemKind::Pinned, 4 * MiB, 300'000, true, c));
      t.nvtx_ranges(main_thread, 0);
      t.copy(Direction::DtoH, MemKind::Pageable, 64, 8'000, false, a);      // in no range
      t.copy(Direction::DtoH, MemKind::Pageable, 1 * MiB, 700'000, false);  // no call site
      t.nvtx_ranges(main_thread, eval);
      t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, a);
      t.copy(Direction::DtoD, MemKind::Device, 32 * MiB, 50'000, true, b);
    }
    if (kind == "nvtx") t.time_copies_on_gpu(2);
  } else if (kind == "fingerprints") {
    using cuxfer::trace::Event;
    auto print = [&](uint32_t corr, Direction dir, uint64_t bytes, uint64_t device_ptr, uint64_t hash) {
      Event& f = t.add(cuxfer::trace::EventKind::Fingerprint, cuxfer::trace::kFingerprintApiName, dir,
                       MemKind::Unknown, MemKind::Unknown, bytes, 300);
      f.correlation_id = corr;
      f.address = hash;
      f.stream = device_ptr;
    };
    auto copy = [&](Direction dir, MemKind host, uint64_t bytes, uint64_t cpu_ns, uint32_t site,
                    uint64_t device_ptr, uint64_t hash) -> size_t {
      const size_t i = t.events.size();
      const uint32_t corr = t.copy(dir, host, bytes, cpu_ns, false, site).correlation_id;
      print(corr, dir, bytes, device_ptr, hash);
      return i;
    };
    const uint32_t c = t.site(0x403000);
    for (int step = 0; step < 8; ++step) {
      copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 2'000'000, a, 0xd000 + step % 2 * 0x100, step / 4);
      for (int i = 0; i < 30; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, a);
      copy(Direction::DtoH, MemKind::Pinned, 2 * MiB, 600'000, b, 0xe000, 100 + step);
      copy(Direction::HtoD, MemKind::Pinned, 2 * MiB, 500'000, step % 2 ? b : c, 0xf000,
           100 + step - step % 2);
      t.events[copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 90'000, a, 0xd000, 0)].flags |=
          cuxfer::trace::kFlagFailed;
      print(100'000 + step, Direction::HtoD, 8 * MiB, 0xd000, step / 4);  // of no copy
    }
    t.time_copies_on_gpu(2);
  } else if (kind == "clean") {
    for (int i = 0; i < 10; ++i) t.copy(Direction::HtoD, MemKind::Pinned, 16 * MiB, 320'000, true, a);
  } else {
    for (int i = 0; i < 1200; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000, false, a);
    for (int i = 0; i < 4; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 10'000'000, true, b);
    t.copy(Direction::HtoD, MemKind::Pinned, 64 * MiB, 1'300'000, false, b);
  }
  if (kind == "nvtx" || kind == "fingerprints") {
    // its GPU records are made above
  } else if (kind == "gpu") {
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
