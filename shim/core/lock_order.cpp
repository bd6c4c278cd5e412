// The lock-order check of core/ranked_lock.h (built with
// CUXFER_LOCK_ORDER_CHECK only). It runs inside malloc, free and fork
// handlers: no allocation, no lock, no library call but write(2) and abort().
#include "core/ranked_lock.h"

#ifdef CUXFER_LOCK_ORDER_CHECK

#include <unistd.h>

#include <cstdlib>
#include <cstring>


namespace cuxfer::shim::lock_order {
namespace {

// The ranks a thread holds, in the order taken. Deeper nesting than this is
// itself a fault worth a stop.
struct Held {
  static constexpr unsigned kMax = 16;
  LockRank ranks[kMax];
  unsigned depth;
};
thread_local Held t_held __attribute__((tls_model("initial-exec")));

const char* name_of(LockRank r) {
  switch (r) {
    case LockRank::kRecorderSession: return "Recorder session";
    case LockRank::kRecorderCapture: return "Recorder capture ranges";
    case LockRank::kCuptiHandover: return "CUPTI handover";
    case LockRank::kZeroCopyContextsGone: return "zero-copy contexts gone";
    case LockRank::kCuptiRecords: return "CUPTI records";
    case LockRank::kRecorderWake: return "Recorder wake";
    case LockRank::kSitePolicyBind: return "site policy bind";
    case LockRank::kZeroCopyBuffers: return "zero-copy buffers";
    case LockRank::kZeroCopyStreams: return "zero-copy streams";
    case LockRank::kParallelMemcpySubmit: return "parallel memcpy submit";
    case LockRank::kParallelMemcpyWake: return "parallel memcpy wake";
    case LockRank::kStagingContexts: return "staging contexts";
    case LockRank::kStagingPool: return "staging pool";
    case LockRank::kBackgroundRegistrar: return "background registrar";
    case LockRank::kVmmMappings: return "VMM mappings";
    case LockRank::kDriverLoading: return "driver table loading";
    case LockRank::kNvtxNames: return "NVTX names";
    case LockRank::kPythonNotes: return "Python notes";
    case LockRank::kHostRanges: return "host ranges (the libc hooks' lock)";
    case LockRank::kAllocationTable: return "allocation table";
    case LockRank::kRegistrationWriters: return "registration cache writers";
  }
  return "?";
}

void put(char*& at, const char* end, const char* s) {
  while (*s && at < end) *at++ = *s++;
}

void put_number(char*& at, const char* end, unsigned v) {
  char digits[12];
  int n = 0;
  do digits[n++] = static_cast<char>('0' + v % 10);
  while ((v /= 10) && n < 12);
  while (n > 0 && at < end) *at++ = digits[--n];
}

[[noreturn]] void violated(LockRank taking, const char* what, LockRank top) {
  char line[512];
  char* at = line;
  const char* end = line + sizeof line - 1;
  put(at, end, "cuxfer: lock order violated: ");
  put(at, end, what);
  put(at, end, " of ");
  put(at, end, name_of(taking));
  put(at, end, " (rank ");
  put_number(at, end, static_cast<unsigned>(taking));
  put(at, end, ") while holding ");
  put(at, end, name_of(top));
  put(at, end, " (rank ");
  put_number(at, end, static_cast<unsigned>(top));
  put(at, end, "); held, outermost first:");
  for (unsigned i = 0; i < t_held.depth && i < Held::kMax; ++i) {
    put(at, end, " ");
    put_number(at, end, static_cast<unsigned>(t_held.ranks[i]));
  }
  put(at, end, " (docs/architecture.md, \"Lock order\")\n");
  [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, line, static_cast<size_t>(at - line));
  std::abort();
}

}  // namespace

void check(LockRank rank, const char* what) {
  const unsigned d = t_held.depth;
  if (d == 0) return;
  // The top is the highest rank held: every push was checked against it.
  const LockRank top = t_held.ranks[(d <= Held::kMax ? d : Held::kMax) - 1];
  if (static_cast<uint8_t>(rank) <= static_cast<uint8_t>(top)) violated(rank, what, top);
}

void held(LockRank rank) {
  if (t_held.depth >= Held::kMax) violated(rank, "nesting deeper than 16", t_held.ranks[Held::kMax - 1]);
  t_held.ranks[t_held.depth++] = rank;
}

void released(LockRank rank) {
  // Usually the top; a lock released out of order is found below it.
  for (unsigned i = t_held.depth; i-- > 0;) {
    if (t_held.ranks[i] != rank) continue;
    std::memmove(&t_held.ranks[i], &t_held.ranks[i + 1], (t_held.depth - i - 1) * sizeof(LockRank));
    --t_held.depth;
    return;
  }
}

}  // namespace cuxfer::shim::lock_order

#endif  // CUXFER_LOCK_ORDER_CHECK
