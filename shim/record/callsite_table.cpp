#include "record/callsite_table.h"
#include "core/export.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/log.h"
#include "symbols/symbol_table.h"
#include "unwind/fast_unwind.h"

namespace cuxfer::shim {
namespace {

uint64_t g_own_low = 0, g_own_high = 0;

using BacktraceFn = int (*)(void**, int);
BacktraceFn g_backtrace = backtrace;
Unwinder g_unwinder = Unwinder::Libunwind;
// The code of the fallback unwinder: under ASan or TSan `backtrace` is the
// sanitizer's interceptor, whose own frames come first in what it returns
// (glibc's and libunwind's never list themselves); they are left out.
uint64_t g_unwinder_low = 0, g_unwinder_high = 0;

// Captures the fast walk could not vouch for, and (verify) those it got
// differently from libunwind: the trace's notes say both at the end.
std::atomic<uint64_t> g_fallbacks{0}, g_compared{0}, g_differed{0};

CUXFER_HOT uint64_t hash_frames(const uint64_t* f, uint32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (uint32_t i = 0; i < n; ++i) {
    h ^= f[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h;
}

}  // namespace

CallSiteTable::CallSiteTable()
    : entries_(static_cast<Entry*>(std::calloc(kCapacity, sizeof(Entry)))) {}

CUXFER_HOT uint32_t CallSiteTable::intern(const uint64_t* frames, uint32_t depth) {
  if (!entries_ || depth == 0) return 0;
  if (depth > kMaxDepth) depth = kMaxDepth;
  uint64_t h = hash_frames(frames, depth);
  for (uint32_t probe = 0; probe < 64; ++probe) {
    uint32_t i = static_cast<uint32_t>((h + probe) % kCapacity);
    Entry& e = entries_[i];
    uint32_t s = e.state.load(std::memory_order_acquire);
    if (s == 0) {
      uint32_t expected = 0;
      if (e.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        e.depth = depth;
        e.hash = h;
        std::memcpy(e.frames, frames, depth * sizeof(uint64_t));
        e.state.store(2, std::memory_order_release);
        ready_.publish(i + 1);
        return i + 1;
      }
      s = expected;
    }
    while (s == 1) s = e.state.load(std::memory_order_acquire);  // another thread is filling it
    if (e.hash == h && e.depth == depth &&
        std::memcmp(e.frames, frames, depth * sizeof(uint64_t)) == 0)
      return i + 1;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void CallSiteTable::collect_new(std::vector<trace::CallSite>& out) {
  if (!entries_) return;
  ready_.drain([&](uint32_t id) {
    const Entry& e = entries_[id - 1];
    out.push_back(trace::CallSite{id, std::vector<uint64_t>(e.frames, e.frames + e.depth)});
  });
}

void CallSiteTable::mark_all_unwritten() { ready_.rewind(); }

namespace {

// The executable loaded segment that holds `pc`, or [0, 0).
struct TextRange {
  uint64_t low = 0, high = 0;
};
TextRange text_range_of(uint64_t pc) {
  struct Find {
    uint64_t pc;
    TextRange found;
  } f{pc, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* f = static_cast<Find*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          const uint64_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
          if (f->pc >= lo && f->pc < hi) {
            f->found = {lo, hi};
            return 1;
          }
        }
        return 0;
      },
      &f);
  return f.found;
}

}  // namespace

void init_own_text_range() {
  const TextRange own = text_range_of(reinterpret_cast<uint64_t>(&init_own_text_range));
  g_own_low = own.low;
  g_own_high = own.high;
}

namespace {

// libunwind's unw_backtrace, or null with the reason in `why`.
void* libunwind_backtrace(std::string& why) {
#if defined(__SANITIZE_THREAD__)
  // A ThreadSanitizer build: libunwind's per-thread cache is torn down by a
  // TSD destructor that locks a mutex after TSan has finished the thread,
  // which crashes the thread's exit. glibc's unwinder keeps no such state.
  why = "a ThreadSanitizer build does not use libunwind";
  return nullptr;
#else
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  void* fn = h ? real_dlsym(h, "unw_backtrace") : nullptr;
  if (!fn) why = "libunwind.so.8 not found; install libunwind8 for cheaper stacks";
  return fn;
#endif
}

}  // namespace

std::string init_stack_capture() {
  init_own_text_range();
  std::string why, how = "libunwind unw_backtrace";
  if (void* fn = libunwind_backtrace(why))
    g_backtrace = reinterpret_cast<BacktraceFn>(fn);
  else
    how = "glibc backtrace (" + why + ")";
  void* prime[4];
  g_backtrace(prime, 4);  // loads and initialises the unwinder now, not inside a hook
  const TextRange unwinder = text_range_of(reinterpret_cast<uint64_t>(g_backtrace));
  g_unwinder_low = unwinder.low;
  g_unwinder_high = unwinder.high;
  g_unwinder = config().unwinder;
  if (g_unwinder != Unwinder::Libunwind && !unwind::init()) {
    g_unwinder = Unwinder::Libunwind;
    how += " (no memory for the .eh_frame walk's table)";
  }
  if (g_unwinder != Unwinder::Libunwind) {
    uint64_t first[4];
    uint32_t n = 0;
    unwind::walk(first, 4, 0, 0, &n);  // the thread's stack bounds and first rules, now and not inside a hook
    how = (g_unwinder == Unwinder::Verify ? "the .eh_frame walk checked against " : "the .eh_frame walk, falling back to ") + how;
  }
  return how;
}

namespace {

// The fallback unwinder's stack, the shim's own frames and the unwinder's
// leading ones left out.
uint32_t library_stack(uint64_t* frames, uint32_t max_depth) {
  // A few extra slots for the frames that are skipped.
  void* raw[CallSiteTable::kMaxDepth + 8];
  int got = g_backtrace(raw, static_cast<int>(max_depth + 8));
  uint32_t n = 0;
  int i = 0;
  while (i < got && reinterpret_cast<uint64_t>(raw[i]) - g_unwinder_low < g_unwinder_high - g_unwinder_low) ++i;
  for (; i < got && n < max_depth; ++i) {
    auto a = reinterpret_cast<uint64_t>(raw[i]);
    if (a >= g_own_low && a < g_own_high) continue;  // our own hook frames
    frames[n++] = a;
  }
  return n;
}

void compare_with_library(const uint64_t* fast, uint32_t n, uint32_t max_depth) {
  uint64_t lib[CallSiteTable::kMaxDepth];
  const uint32_t m = library_stack(lib, max_depth);
  g_compared.fetch_add(1, std::memory_order_relaxed);
  if (m == n && std::memcmp(lib, fast, n * sizeof(uint64_t)) == 0) return;
  g_differed.fetch_add(1, std::memory_order_relaxed);
  static std::atomic<bool> said{false};
  if (said.exchange(true, std::memory_order_relaxed)) return;
  uint32_t at = 0;
  while (at < n && at < m && fast[at] == lib[at]) ++at;
  char line[200];
  std::snprintf(line, sizeof line, "unwinder verify: the .eh_frame walk found %u frames, libunwind %u; first difference at frame %u (%#llx vs %#llx)",
                n, m, at, static_cast<unsigned long long>(at < n ? fast[at] : 0),
                static_cast<unsigned long long>(at < m ? lib[at] : 0));
  log::warn(line);
}

// "/path/libfoo.so+0x1234 (in function)" for a return address, for the note.
std::string describe_code_address(uint64_t pc) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || !info.dli_fname) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(pc));
    return buf;
  }
  char off[32];
  std::snprintf(off, sizeof off, "+%#llx",
                static_cast<unsigned long long>(pc - reinterpret_cast<uint64_t>(info.dli_fbase)));
  std::string s = std::string(info.dli_fname[0] ? info.dli_fname : "the executable") + off;
  if (info.dli_sname) {
    int status = -1;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    if (name.size() > 120) name = name.substr(0, 117) + "...";
    s += " in " + name;
  }
  return s;
}

}  // namespace

std::string decline_summary(const unwind::CacheStats& c) {
  // Why, most frequent first (three at most), and where the first one
  // stopped: what to look at when a program's stacks fall back (an
  // unsupported rule is named with the code that has it).
  std::string why;
  uint64_t left[unwind::kDeclineKinds];
  std::memcpy(left, c.declines, sizeof left);
  for (int shown = 0; shown < 3; ++shown) {
    unsigned best = 0;
    for (unsigned i = 1; i < unwind::kDeclineKinds; ++i)
      if (left[i] > left[best]) best = i;
    if (best == 0) break;
    why += (why.empty() ? "" : ", ") + std::to_string(left[best]) + " at " +
           unwind::decline_name(static_cast<unwind::Decline>(best));
    left[best] = 0;
  }
  if (why.empty()) return {};
  if (c.first_decline_pc > 1)
    why += "; the first at " + describe_code_address(c.first_decline_pc) + ": " + unwind::decline_name(c.first_decline_why);
  return " (" + why + ")";
}

std::string unwinder_summary() {
  if (g_unwinder == Unwinder::Libunwind) return {};
  const unwind::CacheStats c = unwind::cache_stats();
  // Nothing to say when the walk took every stack itself.
  if (g_unwinder == Unwinder::Fast && c.full == 0 && c.unframed == 0 && g_fallbacks.load(std::memory_order_relaxed) == 0)
    return {};
  std::string s = "call stacks: the .eh_frame walk (" + std::to_string(c.rules) + " return addresses, " +
                  std::to_string(c.lookups) + " rule lookups";
  if (c.full) s += ", " + std::to_string(c.full) + " found its table full";
  if (c.unframed)
    s += ", " + std::to_string(c.unframed) + " started in the shim because a hook's frame was not a frame-pointer one";
  s += "); " + std::to_string(g_fallbacks.load(std::memory_order_relaxed)) + " stacks taken from the fallback unwinder";
  s += decline_summary(c);
  if (g_unwinder == Unwinder::Verify)
    s += "; verify: " + std::to_string(g_compared.load(std::memory_order_relaxed)) + " stacks compared with it, " +
         std::to_string(g_differed.load(std::memory_order_relaxed)) + " differed";
  return s;
}

CUXFER_HOT uint32_t capture_stack(uint64_t* frames, uint32_t max_depth, void* fallback, const void* frame) {
  uint32_t n = 0;
  if (max_depth > 0) {
    const bool walked =
        g_unwinder != Unwinder::Libunwind &&
        (frame && fallback ? unwind::walk_from(reinterpret_cast<uint64_t>(fallback), frame, frames, max_depth,
                                               g_own_low, g_own_high, &n)
                           : unwind::walk(frames, max_depth, g_own_low, g_own_high, &n));
    if (!walked) {
      if (g_unwinder != Unwinder::Libunwind) g_fallbacks.fetch_add(1, std::memory_order_relaxed);
      n = library_stack(frames, max_depth);
    } else if (g_unwinder == Unwinder::Verify) {
      compare_with_library(frames, n, max_depth);
    }
  }
  if (n == 0 && fallback) frames[n++] = reinterpret_cast<uint64_t>(fallback);
  return n;
}

}  // namespace cuxfer::shim
