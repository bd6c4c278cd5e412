#include "record/nvtx_ranges.h"

#include <algorithm>

#include "core/allocation.h"

namespace cuxfer::shim {
namespace {

uint64_t fnv1a(const char* s, size_t n, uint32_t domain) {
  uint64_t h = 0xcbf29ce484222325ull ^ domain;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
  return h;
}

// A thread's recently met names, by the message's address: the NVTX calls of
// a loop pass the same literal again and again. An entry is trusted only when
// address, length, domain and a 64-bit hash of the bytes all match (a buffer
// reused for another message of the same length differs in its hash).
struct NameCache {
  struct Entry {
    const char* message;
    uint64_t hash;
    uint32_t length, domain, id;
  };
  static constexpr uint32_t kSize = 32;
  Entry entries[kSize];
};
thread_local NameCache t_names __attribute__((tls_model("initial-exec")));

uint32_t slot_of(const char* message, uint64_t hash) {
  return static_cast<uint32_t>((reinterpret_cast<uintptr_t>(message) >> 3) ^ hash) & (NameCache::kSize - 1);
}

}  // namespace

NvtxRanges& NvtxRanges::instance() {
  static NvtxRanges* r = new NvtxRanges;  // never destroyed: NVTX calls may come during static destruction
  return *r;
}

uint32_t NvtxRanges::domain(const char* name) {
  std::lock_guard<RankedMutex> lock(mutex_);
  domains_.emplace_back(name ? name : "");
  return static_cast<uint32_t>(domains_.size());
}

uint32_t NvtxRanges::name(uint32_t domain, const char* message, size_t length) {
  if (!message) {
    message = "";
    length = 0;
  }
  const uint64_t hash = fnv1a(message, length, domain);
  NameCache::Entry& e = t_names.entries[slot_of(message, hash)];
  if (e.message == message && e.hash == hash && e.length == length && e.domain == domain && e.id != 0) return e.id;
  const uint32_t id = intern_slow(domain, message, length, hash);
  if (id != 0) e = {message, hash, static_cast<uint32_t>(length), domain, id};
  return id;
}

uint32_t NvtxRanges::intern_slow(uint32_t domain, const char* message, size_t length, uint64_t) {
  if (allocation::exhausted()) return 0;
  std::string key(reinterpret_cast<const char*>(&domain), sizeof domain);
  key.append(message, length);
  std::lock_guard<RankedMutex> lock(mutex_);
  auto [it, fresh] = ids_.try_emplace(std::move(key), static_cast<uint32_t>(names_.size() + 1));
  if (fresh) {
    trace::NvtxName n;
    n.id = it->second;
    if (domain > 0 && domain <= domains_.size()) n.domain = domains_[domain - 1];
    n.message.assign(message, length);
    names_.push_back(std::move(n));
  }
  return it->second;
}

int NvtxRanges::push(ThreadState& ts, uint32_t name_id) {
  const uint32_t depth = ts.nvtx_depth;
  if (depth < ThreadState::kNvtxMaxDepth) ts.nvtx_names[depth] = name_id;
  ts.nvtx_depth = depth + 1;
  ts.nvtx_changed = true;
  if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  if (depth + 1 > deepest_.load(std::memory_order_relaxed)) deepest_.store(depth + 1, std::memory_order_relaxed);
  return static_cast<int>(depth);
}

int NvtxRanges::pop(ThreadState& ts) {
  if (ts.nvtx_depth == 0) {
    unbalanced_pops_.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  --ts.nvtx_depth;
  ts.nvtx_changed = true;
  return static_cast<int>(ts.nvtx_depth);
}

uint32_t NvtxRanges::stack_id(const ThreadState& ts) {
  const uint32_t kept = std::min<uint32_t>(ts.nvtx_depth, ThreadState::kNvtxMaxDepth);
  if (kept == 0) return 0;
  uint64_t ids[ThreadState::kNvtxMaxDepth];
  for (uint32_t i = 0; i < kept; ++i) ids[i] = ts.nvtx_names[i];
  return stacks_.intern(ids, kept);
}

void NvtxRanges::collect_new(std::vector<trace::NvtxName>& names, std::vector<trace::CallSite>& stacks) {
  {
    std::lock_guard<RankedMutex> lock(mutex_);
    names.insert(names.end(), names_.begin() + static_cast<ptrdiff_t>(names_written_), names_.end());
    names_written_ = names_.size();
  }
  // A stack may name a name interned after the names above were taken: it
  // comes in the next cycle's block (the analyzer reads every block first).
  stacks_.collect_new(stacks);
}

void NvtxRanges::mark_all_unwritten() {
  names_written_ = 0;
  stacks_.mark_all_unwritten();
}

}  // namespace cuxfer::shim
