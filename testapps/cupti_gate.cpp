// cupti_gate [PHASE_MS=600]
// The CUPTI governor (shim/record/cupti_governor.h) against the stand-in
// libcupti (tests/simcuda/cupti.cpp), simulation only. Each 4-byte copy
// (pageable host -> device) is followed by simcupti_emit, which makes a
// record only while the shim has memcpy records on, so the app counts what
// the governor let through. Four phases of PHASE_MS each:
//   sync   cudaMemcpy, one a millisecond (0.35 % of the time in records,
//          synchronous: records go off)
//   async  cudaMemcpyAsync on the legacy stream, one every 4 ms (back on: 0.09 %
//          in records, under the records' floor of the recording's share however
//          much the shim's own work takes, as under a sanitizer; off again once
//          three windows have brought no call site the records had not timed,
//          and CUPTI detached two windows later)
//   storm  cudaMemcpy, 50 a millisecond (50,000/s: the records would cost
//          ~17 % of the time, over the 1 % cap: off). Paced, not flat out, so
//          that a starved writer thread on a loaded machine cannot let the
//          per-thread ring (65,536 events) overflow and drop events.
//   astorm cudaMemcpyAsync, 50 a millisecond, for 2 x PHASE_MS: over the cap
//          too. Its call site is new, so a sample comes within 19 windows of
//          the records going off in the async phase (not at once: CUPTI is
//          detached by then); it finds the copies over the cap, the records
//          go off by cost, and CUPTI is detached two windows later although
//          async copies keep coming (attached and idle it would cost every
//          call).
// In that order: sync, async, astorm, storm. Prints "phase=NAME calls=N
// records=R" for each, "astorm_end_attached=0|1" (whether CUPTI was attached
// when the async storm ended), then the PASS line.
//
// cupti_gate PHASE_MS paused: for --capture-range=cudaProfilerApi, three
// phases of the async phase's copies: inside a profiler range (records on),
// after cudaProfilerStop (paused: the records go off and CUPTI is detached;
// "paused_end_attached=0|1"), and in a second range (resumed: the records
// wait for the next sample instead of CUPTI being attached at every resume).
//
// cupti_gate PHASE_MS fork: for PHASE_MS, a copy and its record every
// millisecond and a fork() every other one (the child _exits at once), so that
// forks meet the shim's writer thread inside CUPTI's flush, whose completion
// callback frees a 4 MiB buffer (under --rewrite=pin, through the libc hooks).
// Prints "forks=N records=R" and the PASS line; a lock-order inversion between
// the fork handlers and the flush hangs it.
#include <cuda_profiler_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common.h"

extern "C" int simcupti_emit(uint64_t bytes, uint32_t correlation_id);
extern "C" int simcupti_attached();

namespace {

using Clock = std::chrono::steady_clock;

struct Phase {
  long calls = 0, records = 0;
};

// `per_tick` copies (each followed by its emit) every `tick_ms` milliseconds for `ms`.
template <typename Copy>
Phase run(long ms, int per_tick, int tick_ms, Copy copy) {
  Phase p;
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  auto next = Clock::now();
  while (Clock::now() < end) {
    for (int i = 0; i < per_tick; ++i) {
      copy();
      ++p.calls;
      p.records += simcupti_emit(4, 0);
    }
    next += std::chrono::milliseconds(tick_ms);
    std::this_thread::sleep_until(next);
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const long ms = argc > 1 ? std::stol(argv[1]) : 600;
  testapp::require_gpu("cupti_gate");
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, 4));
  int value = 7;
  auto sync = [&] { TA_CHECK(cudaMemcpy(d, &value, 4, cudaMemcpyHostToDevice)); };
  auto async = [&] {
    TA_CHECK(cudaMemcpyAsync(d, &value, 4, cudaMemcpyHostToDevice, 0));
    TA_CHECK(cudaStreamSynchronize(0));
  };
  if (argc > 2 && std::string(argv[2]) == "fork") {
    long forks = 0, tick = 0;
    const Phase p = run(ms, 1, 1, [&] {
      sync();
      if (++tick % 2) return;
      const pid_t child = fork();
      TA_ASSERT(child >= 0);
      if (child == 0) _exit(0);
      int status = 0;
      TA_ASSERT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
      ++forks;
    });
    std::printf("forks=%ld records=%ld\n", forks, p.records);
    TA_CHECK(cudaFree(d));
    testapp::done("cupti_gate");
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "paused") {
    TA_CHECK(cudaProfilerStart());
    const Phase in = run(ms, 1, 4, async);
    TA_CHECK(cudaProfilerStop());
    const Phase out = run(ms, 1, 4, async);
    const int paused_end_attached = simcupti_attached();
    TA_CHECK(cudaProfilerStart());
    const Phase again = run(ms, 1, 4, async);
    TA_CHECK(cudaProfilerStop());
    std::printf("paused_end_attached=%d\n", paused_end_attached);
    std::printf("phase=async calls=%ld records=%ld\n", in.calls, in.records);
    std::printf("phase=paused calls=%ld records=%ld\n", out.calls, out.records);
    std::printf("phase=resumed calls=%ld records=%ld\n", again.calls, again.records);
    TA_CHECK(cudaFree(d));
    testapp::done("cupti_gate");
    return 0;
  }
  const Phase a = run(ms, 1, 1, sync);
  const Phase b = run(ms, 1, 4, async);
  const Phase e = run(2 * ms, 50, 1, [&] { TA_CHECK(cudaMemcpyAsync(d, &value, 4, cudaMemcpyHostToDevice, 0)); });
  const int astorm_end_attached = simcupti_attached();
  TA_CHECK(cudaStreamSynchronize(0));
  const Phase c = run(ms, 50, 1, sync);
  std::printf("astorm_end_attached=%d\n", astorm_end_attached);
  std::printf("phase=sync calls=%ld records=%ld\n", a.calls, a.records);
  std::printf("phase=async calls=%ld records=%ld\n", b.calls, b.records);
  std::printf("phase=storm calls=%ld records=%ld\n", c.calls, c.records);
  std::printf("phase=astorm calls=%ld records=%ld\n", e.calls, e.records);
  TA_CHECK(cudaFree(d));
  testapp::done("cupti_gate");
  return 0;
}
