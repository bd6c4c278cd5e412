#include "record/hook_time.h"

#include <cstdio>

namespace cuxfer::shim {

namespace {

std::string duration(double ns) {
  char buf[32];
  if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  else std::snprintf(buf, sizeof buf, "%.3g s", ns / 1e9);
  return buf;
}

// The histogram bucket holding quantile q, as "lo-hi".
std::string quantile(const HookTime& t, double q) {
  const double want = q * static_cast<double>(t.timed);
  uint64_t seen = 0;
  for (uint32_t b = 0; b < t.hist.size(); ++b) {
    seen += t.hist[b];
    if (static_cast<double>(seen) >= want && t.hist[b] > 0) {
      const double lo = b == 0 ? 0.0 : static_cast<double>(1ull << b);
      return duration(lo) + "-" + duration(static_cast<double>(2ull << b));
    }
  }
  return "?";
}

}  // namespace

void HookTime::add(const EventRing& r) {
  calls += r.hook_calls();
  timed += r.hook_timed();
  ns += r.hook_ns();
  stack_ns += r.hook_stack_ns();
  python_ns += r.hook_python_ns();
  native_ns += r.hook_native_ns();
  if (r.hook_max_ns() > max_ns) max_ns = r.hook_max_ns();
  for (uint32_t b = 0; b < hist.size(); ++b) hist[b] += r.hook_hist(b);
}

uint64_t estimate_hook_ns(const HookSums& now, const HookSums& last) {
  const bool back = now.calls < last.calls || now.timed < last.timed || now.ns < last.ns;
  const HookSums base = back ? HookSums{} : last;
  const uint64_t calls = now.calls - base.calls, timed = now.timed - base.timed, ns = now.ns - base.ns;
  constexpr uint64_t kEnough = 4;
  if (timed >= kEnough) return static_cast<uint64_t>(static_cast<double>(ns) * static_cast<double>(calls) / static_cast<double>(timed));
  if (now.timed == 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(now.ns) / static_cast<double>(now.timed) * static_cast<double>(calls));
}

std::string hook_time_note(const HookTime& t, uint64_t elapsed_ns, bool in_ranges) {
  if (t.timed == 0) return {};
  const double mean = static_cast<double>(t.ns) / static_cast<double>(t.timed);
  const double total = mean * static_cast<double>(t.calls);
  char share[96] = "";
  if (elapsed_ns > 0)
    std::snprintf(share, sizeof share, ", %.2f %% of the %.3f s %s", 100.0 * total / static_cast<double>(elapsed_ns),
                  static_cast<double>(elapsed_ns) / 1e9, in_ranges ? "inside the capture ranges" : "recorded");
  // What capturing the call stacks took of it: the part a shorter
  // --stack-depth (or CUXFER_PYTHON_NATIVE_DEPTH) buys back.
  std::string stacks;
  if (t.stack_ns > 0) {
    const double timed = static_cast<double>(t.timed);
    const uint64_t walks = t.python_ns + t.native_ns;
    const uint64_t rest = t.stack_ns > walks ? t.stack_ns - walks : 0;
    stacks = ", of it capturing call stacks " + duration(static_cast<double>(t.stack_ns) / timed) + " a call (Python frames " +
             duration(static_cast<double>(t.python_ns) / timed) + ", native frames " +
             duration(static_cast<double>(t.native_ns) / timed) + ", matching and interning " +
             duration(static_cast<double>(rest) / timed) + ")";
  }
  return "overhead: cuxfer's own work in " + std::to_string(t.calls) + " intercepted calls took " + duration(mean) +
         " a call on average (median " + quantile(t, 0.5) + ", 99th percentile " + quantile(t, 0.99) + ", longest " +
         duration(static_cast<double>(t.max_ns)) + "; " + std::to_string(t.timed) + " calls timed whole), " +
         duration(total) + " in all" + share + " (summed over threads)" + stacks +
         "; CUPTI's cost, when on, is inside the calls' own times";
}

}  // namespace cuxfer::shim
