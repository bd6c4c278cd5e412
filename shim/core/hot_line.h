// Every value shared between threads that a recorded call reads, on one
// cache line.
//
// A copy made after a training step's framework code finds the shim's data
// cold: each line it reads is a miss, and a chain of them (a function-local
// static's guard, then its pointer, then the object's field) is a chain of
// misses. Spread over the recorder, the CUPTI collector, the configuration
// and the rewrite's counters, the flags a call tests cost a phase probe's
// gate ~110 ns and another ~100 ns later in the call on the H200's training
// loop (docs/benchmarks.md, "Twenty-fourth session"). Here they are one line,
// read-mostly (each changes a handful of times a run), owned by the modules
// named beside them: only those modules write a field, the hooks read them.
//
// Write-once fields (the configuration's copies, the recorder's address) are
// set before the recorder's state says it is recording; a hook reads them
// only after ensure_started() saw that state with acquire order.
#pragma once

#include <atomic>
#include <cstdint>

namespace cuxfer::shim {

class Recorder;

struct alignas(64) HotLine {
  // record/recorder.h
  std::atomic<Recorder*> recorder{nullptr};  // Recorder::instance(), once made
  std::atomic<int> recorder_state{0};        // Recorder's kIdle ... kStopped
  std::atomic<bool> capturing{true};         // inside the capture range
  std::atomic<bool> copy_records_on{true};   // the CUPTI governor's word
  // record/cupti_collector.h: CUPTI's activity API is in use.
  std::atomic<bool> cupti_active{false};
  // Event stamps are time-stamp counter ticks, converted by the writer
  // (core/event_clock.h); false: CLOCK_MONOTONIC nanoseconds.
  bool tsc_stamps = false;
  // rewrite/registration_cache.h: freed memory's registrations queued for the driver.
  std::atomic<uint32_t> unregistrations_queued{0};
  // rewrite/pinned_rewrite.h: registrations the shim holds.
  std::atomic<uint32_t> registrations{0};
  // The configuration's values a recorded call reads (core/config.h),
  // copied when it is parsed.
  uint32_t stack_depth = 0;
  uint32_t python_native_depth = 0;
  uint64_t fingerprint_min = UINT64_MAX;  // smallest copy fingerprinted; UINT64_MAX: none
  bool rewrite_any = false;
  bool python_stacks = false;
  bool memset_stacks = false;
  bool prefetch_trail = false;
  // Nanoseconds a tick, 32.32 fixed point, measured by core/event_clock.h's
  // init() before tsc_stamps is set: the timed calls' spans (span_ns).
  uint64_t ns_per_tick_q32 = 0;
};
static_assert(sizeof(HotLine) == 64, "the hot line is one cache line");

extern HotLine g_hot_line;

struct Config;
// Copies the configuration's values above into the hot line: by the
// recorder's start, before its state says it is recording.
void publish_hot_config(const Config& c);

}  // namespace cuxfer::shim
