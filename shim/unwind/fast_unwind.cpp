#include "unwind/fast_unwind.h"
#include "core/export.h"

#include <link.h>
#include <pthread.h>

#include <cstddef>

#include <atomic>
#include <cstdlib>

#include "core/prefetch_trail.h"
#include "unwind/eh_frame.h"

namespace cuxfer::shim::unwind {
namespace {

// A rule packed in one word, so that a reader sees all of it or none:
//   bits  0..27 cfa offset (signed), 28..39 rbp offset (signed, from the CFA),
//   40..42 kind, 43 rbp saved, 44 present, 45..63 epoch.
// A rule whose offsets do not fit is stored as Unsupported (the walk then
// falls back: correct, only slower). An Unsupported rule keeps its reason
// (Decline) in the cfa offset's bits.
constexpr int kCfaBits = 28, kRbpBits = 12;
constexpr uint64_t kPresent = uint64_t{1} << 44;
constexpr int kEpochShift = 45;
constexpr uint64_t kEpochMask = (uint64_t{1} << (64 - kEpochShift)) - 1;

bool fits(int64_t v, int bits) { return v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1)); }

uint64_t pack(const FrameRule& r, uint64_t epoch) {
  FrameRule k = r;
  if (!fits(k.cfa_offset, kCfaBits) || !fits(k.rbp_offset, kRbpBits)) {
    k = FrameRule{};
    k.why = Decline::Offsets;
  }
  if (k.kind == FrameRule::Kind::Unsupported) k.cfa_offset = static_cast<int32_t>(k.why);
  return (static_cast<uint64_t>(k.cfa_offset) & ((uint64_t{1} << kCfaBits) - 1)) |
         ((static_cast<uint64_t>(k.rbp_offset) & ((uint64_t{1} << kRbpBits) - 1)) << kCfaBits) |
         (static_cast<uint64_t>(k.kind) << 40) | (uint64_t{k.rbp_saved} << 43) | kPresent |
         ((epoch & kEpochMask) << kEpochShift);
}

struct Unpacked {
  FrameRule::Kind kind;
  bool rbp_saved;
  int64_t cfa_offset, rbp_offset;
};

Unpacked unpack(uint64_t v) {
  const auto sext = [](uint64_t x, int bits) {
    return static_cast<int64_t>(x << (64 - bits)) >> (64 - bits);
  };
  return {static_cast<FrameRule::Kind>((v >> 40) & 7), ((v >> 43) & 1) != 0, sext(v, kCfaBits),
          sext(v >> kCfaBits, kRbpBits)};
}

// Open addressing on the return address; entries are never removed, only
// retired by the epoch and overwritten. 32768 x 16 bytes of zeroed pages,
// touched as they are used.
constexpr uint32_t kSlots = 1u << 15;
constexpr uint32_t kProbes = 16;
struct Slot {
  std::atomic<uint64_t> key;    // the lookup pc, 0 when empty
  std::atomic<uint64_t> value;  // pack(), 0 until written
};
// Allocated by init() before the first walk; null until then (walks fall back).
std::atomic<Slot*> g_table{nullptr};
CUXFER_HOT Slot* table() { return g_table.load(std::memory_order_acquire); }

std::atomic<uint64_t> g_epoch{1};
std::atomic<uint64_t> g_rules{0}, g_lookups{0}, g_full{0};
// Walks answered by replaying the thread's last one; counted per thread and
// added here when the thread's count reaches a multiple of 1024 (no shared
// line written on the hot path), so the figure trails by at most 1023 a thread.
std::atomic<uint64_t> g_replays{0};
// walk_from() calls given no frame-pointer frame (walked from their own frame instead).
std::atomic<uint64_t> g_unframed{0};
// Declined walks by reason, and the return address of the first one (where
// to look first); counted only when a walk declines.
std::atomic<uint64_t> g_declines[kDeclineKinds];
std::atomic<uint64_t> g_first_pc{0};
std::atomic<uint8_t> g_first_why{0};

CUXFER_HOT bool decline(Decline why, uint64_t pc) {
  g_declines[static_cast<unsigned>(why)].fetch_add(1, std::memory_order_relaxed);
  uint64_t none = 0;
  if (g_first_pc.load(std::memory_order_relaxed) == 0 &&
      g_first_pc.compare_exchange_strong(none, pc ? pc : 1, std::memory_order_relaxed))
    g_first_why.store(static_cast<uint8_t>(why), std::memory_order_relaxed);
  return false;
}

CUXFER_HOT uint32_t slot_of(uint64_t pc) {
  uint64_t h = pc * 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(h >> 49);  // top 15 bits
}

// The packed rule for `pc`, looked up in the tables on a miss; 0 when the
// table has no room for it (the caller falls back).
CUXFER_HOT uint64_t rule_for(uint64_t pc, uint64_t epoch) {
  Slot* t = table();
  if (!t) return 0;
  uint32_t i = slot_of(pc);
  for (uint32_t probe = 0; probe < kProbes; ++probe, i = (i + 1) & (kSlots - 1)) {
    Slot& s = t[i];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == 0) {
      uint64_t expected = 0;
      if (!s.key.compare_exchange_strong(expected, pc, std::memory_order_acq_rel)) {
        if (expected != pc) continue;  // another pc took it: probe on
      } else {
        g_rules.fetch_add(1, std::memory_order_relaxed);
      }
      k = pc;
    }
    if (k != pc) continue;
    uint64_t v = s.value.load(std::memory_order_acquire);
    if (v != 0 && (v >> kEpochShift) == (epoch & kEpochMask)) return v;
    // New, being written by another thread, or retired: look it up here.
    g_lookups.fetch_add(1, std::memory_order_relaxed);
    v = pack(lookup_rule(pc), epoch);
    s.value.store(v, std::memory_order_release);
    return v;
  }
  g_full.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// The calling thread's own stack, from pthread_getattr_np once per thread
// (top 0 when it cannot be had: the walk then always falls back). A walk
// starts only from inside it: a fiber's or a signal's alternate stack may lie
// anywhere below, and reading up from there to the top would cross unmapped
// memory.
struct ThreadStack {
  uint64_t bottom = 0, top = 0;
  bool known = false;
};
thread_local ThreadStack t_stack __attribute__((tls_model("initial-exec")));

CUXFER_HOT const ThreadStack& thread_stack() {
  if (!t_stack.known) {
    t_stack.known = true;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0) {
        t_stack.bottom = reinterpret_cast<uint64_t>(addr);
        t_stack.top = t_stack.bottom + size;
      }
      pthread_attr_destroy(&attr);
    }
  }
  return t_stack;
}

// The rules of the thread's recent frames, by return address, direct-mapped
// in 4 KiB: a copy loop walks the same few stacks again and again (a storm
// one, a training step's copies three to five), and their rules come from
// here instead of the shared table. Why one small table a thread and not the
// shared one alone: between a training step's copies the kernels launched,
// autograd and the optimizer evict the caches and the TLB, and the shared
// table (512 KiB) would then cost a cold page walk for every frame (in a VM,
// microseconds each); these rules sit in one or two pages. Only rules are
// reused, never frames: each step still reads the stack.
struct Rule {
  uint64_t pc = 0;  // the return address (0: none)
  int32_t cfa_offset = 0;
  int16_t rbp_offset = 0;
  FrameRule::Kind kind = FrameRule::Kind::Unsupported;
  bool rbp_saved = false;
};
static_assert(sizeof(Rule) == 16);
constexpr uint32_t kMemoRules = 256;
constexpr int kMemoShift = 56;  // 64 - log2(kMemoRules)
CUXFER_HOT uint32_t memo_slot(uint64_t pc) { return static_cast<uint32_t>((pc * 0x9E3779B97F4A7C15ull) >> kMemoShift); }
// The thread's last walk, kept to be replayed. A walk is a pure function of
// where it starts (its pc, its stack pointer, and its frame pointer when a
// rule reads it before a frame restores it), the rules (fixed within an epoch), its
// arguments and the stack words it reads. When all of those are as they were,
// the result is: the replay compares the words (one or two a frame, in a few
// contiguous lines) instead of stepping the frames again (a rule lookup, the
// CFA's arithmetic and its bounds a frame). A copy loop calls from the same
// stack again and again, so most walks are replays; any difference at all
// (another caller, a deeper stack, a changed saved register) is a full walk.
// Exact by construction: nothing is guessed from a partial match.
constexpr uint32_t kReplayReads = 40, kReplayFrames = 24;
struct LastWalk {
  uint64_t sp = 0;  // 0: nothing to replay
  uint64_t pc = 0;  // where it started (walk_from's caller, or walk()'s own code)
  uint64_t bp = 0;
  bool bp_used = false;  // the walk read the entry bp (else any bp replays)
  uint64_t epoch = 0, skip_low = 0, skip_high = 0;
  uint32_t max = 0, reads = 0, n = 0;
  uint64_t at[kReplayReads];
  uint64_t value[kReplayReads];
  uint64_t frames[kReplayFrames];
};
struct ThreadMemo {
  uint64_t epoch = 0;
  bool busy = false;  // a walk is running on this thread (a signal handler's walk must not use the memo)
  LastWalk last;
  alignas(64) Rule rules[kMemoRules];
};
thread_local ThreadMemo t_memo __attribute__((tls_model("initial-exec")));
thread_local uint64_t t_replays __attribute__((tls_model("initial-exec"))) = 0;

CUXFER_HOT Rule rule_of(uint64_t v, uint64_t pc) {
  const Unpacked u = unpack(v);
  Rule r;
  r.pc = pc;
  r.kind = u.kind;
  r.rbp_saved = u.rbp_saved;
  r.cfa_offset = static_cast<int32_t>(u.cfa_offset);
  r.rbp_offset = static_cast<int16_t>(u.rbp_offset);  // 12 bits in the packed word
  return r;
}

// Releases the memo however the walk ends.
struct MemoUse {
  ThreadMemo* memo;
  ~MemoUse() {
    if (!memo) return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    memo->busy = false;
  }
};

// Whether the thread's last walk is this one's answer (LastWalk above):
// same start, arguments and epoch, and every stack word it read unchanged.
// The words lie between the stack pointer and the stack's top, as they did
// (the same sp, the same thread): readable. Notes them for a cold capture's
// trail, as the walk would.
CUXFER_HOT __attribute__((no_sanitize("address", "thread"))) bool replay(ThreadMemo* memo, uint64_t pc, uint64_t sp,
                                                                        uint64_t bp, uint64_t epoch, uint32_t max,
                                                                        uint64_t skip_low, uint64_t skip_high,
                                                                        PrefetchTrail::Writer* trail) {
  const LastWalk& w = memo->last;
  if (w.sp != sp || w.pc != pc || w.epoch != epoch || w.max != max || w.skip_low != skip_low ||
      w.skip_high != skip_high || (w.bp_used && w.bp != bp))
    return false;
  uint64_t differ = 0;
  for (uint32_t i = 0; i < w.reads; ++i) differ |= *reinterpret_cast<const uint64_t*>(w.at[i]) ^ w.value[i];
  if (differ != 0) return false;
  if (trail)
    for (uint32_t i = 0; i < w.reads; ++i) trail->note(w.at[i]);
  if ((++t_replays & 1023) == 0) g_replays.fetch_add(1024, std::memory_order_relaxed);
  return true;
}

// The walk from a frame whose pc, sp and bp are known, `top` the thread
// stack's top. `pc` is recorded as the first frame when `own` is false (a
// caller's return address), not when it is the walk's own code. Inlined into
// walk() and walk_from(): its reads must stay above the sp it is given, which
// the frame that computed it keeps live.
//
// Reads other frames' saved registers: not an access the sanitizers should
// judge (ASan's fake stacks, TSan's shadow know nothing of them).
CUXFER_HOT __attribute__((always_inline, no_sanitize("address", "thread"))) inline bool walk_at(
    uint64_t pc, uint64_t sp, uint64_t bp, bool own, uint64_t top, uint64_t* frames, uint32_t max, uint64_t skip_low,
    uint64_t skip_high, uint32_t* count) {
  const uint64_t start_pc = pc;
  const uint64_t low = sp;
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);

  // A signal handler's walk that interrupts this thread's walk finds the memo
  // busy and does without it, so neither sees the other's half-written rules.
  ThreadMemo* memo = nullptr;
  if (!t_memo.busy) {
    t_memo.busy = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    memo = &t_memo;
    if (memo->epoch != epoch) {  // a library was unloaded since: forget every rule
      for (Rule& r : memo->rules) r.pc = 0;
      memo->epoch = epoch;
    }
  }
  MemoUse release{memo};
  // Not from a signal handler's walk (no memo): its notes would mix with the one it interrupted.
  PrefetchTrail::Writer trail(prefetch_trail(), PrefetchTrail::kNative);
  const bool noting = memo && trail.on();

  if (memo && replay(memo, pc, sp, bp, epoch, max, skip_low, skip_high, noting ? &trail : nullptr)) {
    for (uint32_t i = 0; i < memo->last.n; ++i) frames[i] = memo->last.frames[i];
    *count = memo->last.n;
    return true;
  }
  // Recorded for the next walk's replay as the walk goes; kept only if the
  // walk succeeds within the record's bounds.
  LastWalk* const rec = memo ? &memo->last : nullptr;
  if (rec) {
    rec->sp = 0;
    rec->reads = 0;
    rec->bp_used = false;
  }
  const uint64_t entry_bp = bp;
  uint32_t reads = 0;
  bool recording = rec != nullptr;
  const auto note_read = [&](uint64_t at, uint64_t v) {
    if (!recording) return;
    if (reads == kReplayReads) {
      recording = false;
      return;
    }
    rec->at[reads] = at;
    rec->value[reads] = v;
    ++reads;
  };
  const auto read = [&](uint64_t at) {
    const uint64_t v = *reinterpret_cast<const uint64_t*>(at);
    note_read(at, v);
    return v;
  };
  // A restored rbp matters to the result only if a later frame's rule reads
  // it before another frame restores it again; until then its read is held
  // here, and dropped if never used. (Frameless code saves rbp as a general
  // register, so its saved value is often a loop's variable: recorded, it
  // would refuse every replay for nothing.) kEntry: rbp is still the walk's.
  constexpr uint64_t kEntry = ~uint64_t{0};
  uint64_t bp_from = kEntry, bp_value = 0;
  const auto use_bp = [&] {
    if (bp_from == kEntry) {
      if (recording) rec->bp_used = true;
    } else if (bp_from != 0) {
      note_read(bp_from, bp_value);
      bp_from = 0;  // noted once
    }
  };

  uint32_t n = 0;
  if (!own && max > 0 && (pc < skip_low || pc >= skip_high)) frames[n++] = pc;
  // Frames are counted against `max` only once they are the app's; a bound on
  // all of them keeps a corrupt chain that stays inside the stack finite.
  for (uint32_t steps = 0; n < max; ++steps) {
    if (steps > max + 64) return decline(Decline::TooDeep, pc);
    Rule r;
    Rule* const mine = memo ? &memo->rules[memo_slot(pc)] : nullptr;
    // A cold capture notes, for the next one's prefetches (core/prefetch_trail.h),
    // this frame's rule and, below, its return address.
    if (noting) trail.note(reinterpret_cast<uint64_t>(mine));
    if (mine && mine->pc == pc) {
      r = *mine;
    } else {
      const uint64_t v = rule_for(pc - 1, epoch);
      if (v == 0) return decline(Decline::TableFull, pc);
      r = rule_of(v, pc);
      if (mine) *mine = r;
    }
    if (r.kind == FrameRule::Kind::Outermost) break;
    if (r.kind == FrameRule::Kind::Unsupported) {
      const auto why = static_cast<unsigned>(r.cfa_offset);
      return decline(why > 0 && why < kDeclineKinds ? static_cast<Decline>(why) : Decline::BadEntry, pc);
    }
    uint64_t cfa;
    if (r.kind != FrameRule::Kind::RspBased) use_bp();
    if (r.kind == FrameRule::Kind::RbpDeref) {
      // A realigned frame: the CFA was saved in the frame, at rbp + offset.
      const uint64_t at = bp + static_cast<uint64_t>(int64_t{r.cfa_offset});
      if (at < low || at + 8 > top) return decline(Decline::OffStack, pc);
      cfa = read(at);
    } else {
      cfa = (r.kind == FrameRule::Kind::RspBased ? sp : bp) + static_cast<uint64_t>(int64_t{r.cfa_offset});
    }
    // The return address at CFA-8 and the saved rbp must be in this thread's
    // stack, above where the walk started (sp >= low), and each frame above
    // the last.
    if (cfa < sp + 8 || cfa > top) return decline(Decline::OffStack, pc);
    if (noting) trail.note(cfa - 8);
    const uint64_t ra = read(cfa - 8);
    if (r.rbp_saved) {
      const uint64_t base = r.kind == FrameRule::Kind::RbpDeref ? bp : cfa;
      const uint64_t at = base + static_cast<uint64_t>(int64_t{r.rbp_offset});
      if (at < low || at + 8 > top) return decline(Decline::OffStack, pc);
      bp = *reinterpret_cast<const uint64_t*>(at);
      bp_from = at;
      bp_value = bp;
    }
    sp = cfa;
    pc = ra;
    if (pc == 0) break;  // the outermost frame on some libcs' thread entry
    if (pc >= skip_low && pc < skip_high) continue;
    frames[n++] = pc;
  }
  *count = n;
  if (recording && n <= kReplayFrames) {
    for (uint32_t i = 0; i < n; ++i) rec->frames[i] = frames[i];
    rec->n = n;
    rec->reads = reads;
    rec->max = max;
    rec->skip_low = skip_low;
    rec->skip_high = skip_high;
    rec->epoch = epoch;
    rec->bp = entry_bp;
    rec->pc = start_pc;
    rec->sp = low;  // last: the record is whole
  }
  return true;
}

}  // namespace

CUXFER_HOT __attribute__((noinline, no_sanitize("address", "thread"))) bool walk(uint64_t* frames, uint32_t max,
                                                                             uint64_t skip_low, uint64_t skip_high,
                                                                             uint32_t* count) {
  *count = 0;
  const ThreadStack& stack = thread_stack();
  uint64_t pc, sp, bp;
  // This frame's registers; `pc` is the address after the lea, whose rule
  // (looked up at pc - 1, like every other frame's) is that of the movs.
  asm volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
  if (stack.top == 0 || sp < stack.bottom || sp >= stack.top)
    return decline(Decline::ForeignStack, pc);  // not on the thread's own stack
  return walk_at(pc, sp, bp, true, stack.top, frames, max, skip_low, skip_high, count);
}

CUXFER_HOT __attribute__((noinline, no_sanitize("address", "thread"))) bool walk_from(uint64_t return_address,
                                                                                  const void* frame,
                                                                                  uint64_t* frames, uint32_t max,
                                                                                  uint64_t skip_low,
                                                                                  uint64_t skip_high,
                                                                                  uint32_t* count) {
  *count = 0;
  const ThreadStack& stack = thread_stack();
  const auto f = reinterpret_cast<uint64_t>(frame);
  // Run on another stack (a signal's alternate stack, a fiber's), the walk
  // declines, as walk() does. Otherwise the frame must be above this
  // function's own (a live caller's, so on the thread's stack too) and hold
  // the return address it was given at f + 8: a frame-pointer frame.
  // Anything else is walked from here.
  uint64_t here;
  asm volatile("mov %%rsp, %0" : "=r"(here));
  if (stack.top == 0 || here < stack.bottom || here >= stack.top)
    return decline(Decline::ForeignStack, return_address);
  if (f < here || f % 8 != 0 || f + 16 > stack.top || reinterpret_cast<const uint64_t*>(f)[1] != return_address) {
    g_unframed.fetch_add(1, std::memory_order_relaxed);
    return walk(frames, max, skip_low, skip_high, count);
  }
  return walk_at(return_address, f + 16, reinterpret_cast<const uint64_t*>(f)[0], false, stack.top, frames, max,
                 skip_low, skip_high, count);
}

bool init() {
  if (!table()) {
    Slot* t = static_cast<Slot*>(std::calloc(kSlots, sizeof(Slot)));
    Slot* expected = nullptr;
    if (t && !g_table.compare_exchange_strong(expected, t, std::memory_order_acq_rel)) std::free(t);
  }
  return table() != nullptr;
}

void after_dlclose() {
  // dlclose often only drops a reference: the loader's count of unloaded
  // objects says whether anything left, and only then are the rules retired.
  static std::atomic<unsigned long long> seen{0};
  unsigned long long subs = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* out) -> int {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
          *static_cast<unsigned long long*>(out) = info->dlpi_subs;
        else
          *static_cast<unsigned long long*>(out) = ~0ull;  // no count: assume something left
        return 1;
      },
      &subs);
  if (subs == ~0ull || seen.exchange(subs, std::memory_order_acq_rel) != subs)
    g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

CacheStats cache_stats() {
  CacheStats c;
  c.rules = g_rules.load(std::memory_order_relaxed);
  c.lookups = g_lookups.load(std::memory_order_relaxed);
  c.full = g_full.load(std::memory_order_relaxed);
  c.replays = g_replays.load(std::memory_order_relaxed) + (t_replays & 1023);
  c.unframed = g_unframed.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < kDeclineKinds; ++i) c.declines[i] = g_declines[i].load(std::memory_order_relaxed);
  c.first_decline_pc = g_first_pc.load(std::memory_order_relaxed);
  c.first_decline_why = static_cast<Decline>(g_first_why.load(std::memory_order_relaxed));
  return c;
}

}  // namespace cuxfer::shim::unwind
