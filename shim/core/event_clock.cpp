#include "core/event_clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace cuxfer::shim::event_clock {

bool tsc_usable(const TscFacts& f, std::string& why) {
  if (!f.allowed) {
    why = "CUXFER_TSC=0";
  } else if (!f.x86_64) {
    why = "not an x86-64 processor";
  } else if (!f.invariant) {
    why = "the processor's time-stamp counter is not invariant";
  } else if (f.clocksource != "tsc") {
    why = "the kernel's clocksource is " + (f.clocksource.empty() ? std::string("unknown") : f.clocksource) +
          ", not tsc";
  } else {
    why.clear();
    return true;
  }
  return false;
}

namespace {

// The first word of a small sysfs file, without stdio (no allocation but the string's).
std::string read_word(const char* path) {
  char buf[64];
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return {};
  std::string s(buf, static_cast<size_t>(n));
  const size_t end = s.find_first_of(" \n\t");
  return end == std::string::npos ? s : s.substr(0, end);
}

}  // namespace

TscFacts probe(bool allowed) {
  TscFacts f;
  f.allowed = allowed;
#if defined(__x86_64__)
  f.x86_64 = true;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000007u && __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx))
    f.invariant = (edx >> 8) & 1u;
#endif
  f.clocksource = read_word("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  return f;
}

uint64_t rate_q32(const Pair& a, const Pair& b) {
  if (b.tsc <= a.tsc || b.ns <= a.ns) return 0;
  const unsigned __int128 dt = b.tsc - a.tsc;
  return static_cast<uint64_t>(((static_cast<unsigned __int128>(b.ns - a.ns) << 32) + dt / 2) / dt);  // rounded
}

std::string init(bool allowed) {
  std::string why;
  bool tsc = tsc_usable(probe(allowed), why);
  if (tsc && !g_hot_line.ns_per_tick_q32) {
    // The rate for span_ns(): two pairs ~200 us apart (each read to ~20 ns).
    const Pair a = read_pair();
    Pair b = read_pair();
    while (b.ns - a.ns < 200'000) b = read_pair();
    g_hot_line.ns_per_tick_q32 = rate_q32(a, b);
    if (!g_hot_line.ns_per_tick_q32) {
      tsc = false;
      why = "the time-stamp counter did not advance";
    }
  }
  g_hot_line.tsc_stamps = tsc;
  return tsc ? "event stamps: time-stamp counter, converted to CLOCK_MONOTONIC by the writer"
             : "event stamps: CLOCK_MONOTONIC (" + why + ")";
}

Pair read_pair() {
  Pair best;
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const uint64_t a = now_ns();
#if defined(__x86_64__)
    _mm_lfence();
    const uint64_t t = __rdtsc();
#else
    const uint64_t t = 0;
#endif
    const uint64_t b = now_ns();
    if (b - a < best_gap) {
      best_gap = b - a;
      best = Pair{t, a + (b - a) / 2};
    }
  }
  return best;
}

void StampConverter::add(const Pair& p) {
  if (!pairs_.empty() && (p.tsc <= pairs_.back().at.tsc || p.ns <= pairs_.back().at.ns)) return;
  if (pairs_.size() == kKept) pairs_.erase(pairs_.begin());
  if (!pairs_.empty()) pairs_.back().rate_q32 = rate_q32(pairs_.back().at, p);
  pairs_.push_back(Kept{p, pairs_.empty() ? 0 : rate_q32(pairs_.front().at, p)});
}

namespace {

// `ticks` at `rate` (ns a tick, 32.32), rounded to the nearest nanosecond.
uint64_t scaled(uint64_t ticks, uint64_t rate) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * rate + (uint64_t{1} << 31)) >> 32);
}

// anchor.ns + (t - anchor.tsc) at `rate`, t on either side of the anchor; never below 0.
uint64_t along(const Pair& anchor, uint64_t rate, uint64_t t) {
  if (t >= anchor.tsc) return anchor.ns + scaled(t - anchor.tsc, rate);
  const uint64_t back = scaled(anchor.tsc - t, rate);
  return back < anchor.ns ? anchor.ns - back : 0;
}

}  // namespace

uint64_t StampConverter::to_ns(uint64_t stamp) const {
  if (!ticks_) return stamp;
  const size_t n = pairs_.size();
  if (n == 0) return 0;  // never: the recorder's start adds the first pair
  if (n == 1) return pairs_[0].at.ns;
  const Kept& last = pairs_[n - 1];
  if (stamp >= last.at.tsc) return along(last.at, last.rate_q32, stamp);  // after the last pair
  const Kept& before_last = pairs_[n - 2];
  if (stamp >= before_last.at.tsc) return along(before_last.at, before_last.rate_q32, stamp);  // a drain's usual
  if (stamp < pairs_[0].at.tsc) return along(pairs_[0].at, last.rate_q32, stamp);  // before the pairs kept
  auto later = std::upper_bound(pairs_.begin(), pairs_.end(), stamp,
                                [](uint64_t t, const Kept& k) { return t < k.at.tsc; });
  const Kept& from = *(later - 1);
  return along(from.at, from.rate_q32, stamp);
}

}  // namespace cuxfer::shim::event_clock
