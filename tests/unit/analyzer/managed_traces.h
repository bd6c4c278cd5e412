// Unified-memory programs' traces for the analyzer's tests: managed
// allocations and frees, CUPTI's unified-memory records written among the
// events as the shim's later cycles write them, and a training loop of them
// (managed_test.cpp, stream_managed_test.cpp, summary_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer::testing {

inline constexpr uint64_t kManagedKiB = 1 << 10, kManagedMiB = 1 << 20;
inline constexpr uint64_t kManagedBase = 0x7e0000000000ull;

inline trace::Event& managed_alloc(SyntheticTrace& t, uint64_t address, uint64_t bytes, uint32_t site) {
  trace::Event& e = t.add(trace::EventKind::ManagedAlloc, "cudaMallocManaged", trace::Direction::Unknown,
                          trace::MemKind::Unknown, trace::MemKind::Managed, bytes, 5'000, 0, site);
  e.address = address;
  return e;
}

inline void managed_free(SyntheticTrace& t, uint64_t address) {
  t.add(trace::EventKind::DeviceFree, "cudaFree", trace::Direction::Unknown, trace::MemKind::Unknown,
        trace::MemKind::Managed, 0, 1000)
      .address = address;
}

inline trace::GpuRecord um_record(trace::UmCounter counter, uint64_t address, uint64_t start, uint64_t ns,
                                  uint64_t value, trace::UmCause cause = trace::UmCause::Coherence) {
  trace::GpuRecord g{};
  g.kind = static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
  g.cupti_copy_kind = static_cast<uint8_t>(counter);
  g.start_ns = start;
  g.end_ns = start + ns;
  g.bytes = value;
  g.src_kind = static_cast<uint8_t>(cause);
  trace::set_um_address(g, address);
  return g;
}

// A record written in the file after the first `after` events (at the next events block).
inline void um(SyntheticTrace& t, size_t after, const trace::GpuRecord& g) {
  t.gpu_after_events.resize(t.gpu_records.size(), 0);
  t.gpu_records.push_back(g);
  t.gpu_after_events.push_back(after);
}

// A training loop over managed buffers: `steps` steps, each allocating a
// managed buffer at one of a few addresses (reused after a free), faulting
// it in on the GPU (fault groups and on-demand migrations, overlapping),
// prefetching another, the CPU reading back; the records written a few
// blocks after their calls, as the shim's later cycles write CUPTI's
// buffers. With copies timed by CUPTI records (joined by time) where `gpu`.
inline SyntheticTrace managed_training(uint32_t pid, int steps, bool gpu, uint64_t site_base) {
  SyntheticTrace t(pid);
  t.process.trace_name = "managed" + std::to_string(pid);
  t.events_per_block = 13;
  t.notes.push_back("cupti: unified memory records on");
  const uint32_t weights = t.site(site_base + 0x1000), activations = t.site(site_base + 0x2000),
                 load = t.site(site_base + 0x3000);
  // The weights: allocated once, prefetched by the app each step.
  managed_alloc(t, kManagedBase + 512 * kManagedMiB, 64 * kManagedMiB, weights);
  std::vector<std::pair<size_t, trace::GpuRecord>> pending;  // (written after event, record)
  for (int s = 0; s < steps; ++s) {
    // Activations: freed and allocated again at one of three addresses, sizes varying.
    const uint64_t at = kManagedBase + static_cast<uint64_t>(s % 3) * 64 * kManagedMiB;
    const uint64_t size = (8 + static_cast<uint64_t>(s % 5) * 4) * kManagedMiB;
    managed_alloc(t, at, size, activations);
    for (int i = 0; i < 3; ++i)
      t.copy(trace::Direction::HtoD, trace::MemKind::Pinned, 256 * kManagedKiB, 30'000, true, load);
    const uint64_t t0 = t.clock_ns;
    std::vector<trace::GpuRecord> step;
    step.push_back(um_record(trace::UmCounter::GpuPageFault, at + 4096, t0, 400'000, 2 + s % 3));
    for (int i = 0; i < 4; ++i) {
      const trace::UmCause cause = i == 3
                                       ? trace::UmCause::Prefetch
                                       : (s % 4 == 1 ? trace::UmCause::Unknown : trace::UmCause::Coherence);
      step.push_back(um_record(trace::UmCounter::HtoD, at + i * 2 * kManagedMiB, t0 + 50'000 + i * 120'000,
                               100'000, 2 * kManagedMiB, cause));
    }
    step.push_back(um_record(trace::UmCounter::HtoD, kManagedBase + 512 * kManagedMiB, t0 + 900'000, 300'000,
                             16 * kManagedMiB, trace::UmCause::User));
    step.push_back(um_record(trace::UmCounter::CpuPageFault, at + 8192, t0 + 1'300'000, 0, 1));
    step.push_back(um_record(trace::UmCounter::DtoH, at, t0 + 1'300'000, 80'000, 2 * kManagedMiB));
    // Addresses in no managed allocation: below every one, and between them.
    if (s % 7 == 3)
      step.push_back(um_record(trace::UmCounter::HtoD, 0x10000, t0 + 1'500'000, 10'000, 64 * kManagedKiB));
    if (s % 5 == 2)
      step.push_back(
          um_record(trace::UmCounter::DtoH, kManagedBase + 400 * kManagedMiB, t0 + 1'600'000, 10'000, 4096));
    step.push_back(um_record(trace::UmCounter::Thrashing, at, t0 + 1'700'000, 0, 1));
    t.clock_ns = t0 + 2'000'000;
    for (const auto& g : step) pending.emplace_back(t.events.size() + 40, g);
    managed_free(t, at);
  }
  // The copies' own records (joined by time), where timed: after the events.
  if (gpu) t.time_copies_on_gpu(4);
  const std::vector<trace::GpuRecord> copies = t.gpu_records;
  t.gpu_records.clear();
  // Each unified-memory record at its place, then the copies' (the join's window is another test's).
  for (const auto& [after, g] : pending) um(t, std::min(after, t.events.size()), g);
  for (const auto& g : copies) um(t, t.events.size(), g);
  return t;
}

}  // namespace cuxfer::testing
