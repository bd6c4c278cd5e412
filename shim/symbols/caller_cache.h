// Per calling object, the real functions its runtime calls forward to
// (symbol_table.cpp): a fixed table read without a lock on every call whose
// runtime is outside the global scope, written only when a function is first
// resolved for an object, and emptied whenever an object is unloaded, so
// that nothing in it outlives the object it points into.
//
// The table also remembers, per object and function, that neither the global
// scope nor the object's dependency scope defined the function, and at which
// loader generation (symbols/elf_lookup.h): the dependency scope of a loaded
// object never changes, and the global scope only when an object is loaded
// or unloaded, so such a caller (one handed the hook by dlsym on a runtime
// loaded RTLD_LOCAL, as ctypes does) takes the function it was handed
// without asking the loader again on every call.
//
// An object is known by a non-zero identity (its link_map's address). Every
// key carries the table's epoch, which each emptying advances: an entry of
// an object that is gone can never match a lookup again, even where a new
// object later gets the same link_map address. Writers and the emptying
// take a small lock, never held while anything else is called (it ranks
// below every other lock: nothing is taken under it); readers take none.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/spin.h"

namespace cuxfer::shim {

template <size_t Objects, size_t Functions>
class CallerCache {
 public:
  // The epoch to hand to store() after resolving a function: read it before
  // looking at the loader, so that an unload in between is seen.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // The function `fn` remembered for `object`, or null.
  void* find(uintptr_t object, size_t fn) const {
    if (!object || fn >= Functions) return nullptr;
    const uint64_t key = key_of(object, epoch());
    for (const Entry& e : entries_) {
      if (e.key.load(std::memory_order_acquire) != key) continue;
      void* p = e.fn[fn].load(std::memory_order_acquire);
      // Still the same object's entry after the read: not emptied meanwhile.
      return e.key.load(std::memory_order_relaxed) == key ? p : nullptr;
    }
    return nullptr;
  }

  // Remembers `p` as `object`'s function `fn` unless the table was emptied
  // since `seen` (the resolution may have read an object now gone) or every
  // entry is taken by another object. Says whether it was stored.
  bool store(uintptr_t object, size_t fn, void* p, uint64_t seen) {
    if (!object || !p || fn >= Functions) return false;
    Locked hold(lock_);
    if (epoch_.load(std::memory_order_relaxed) != seen) return false;
    return write_entry(key_of(object, seen), [&](Entry& e) { e.fn[fn].store(p, std::memory_order_release); });
  }

  // The loader generation at which `object`'s function `fn` was last found
  // in neither scope (store_miss), or 0 when no miss is remembered.
  uint64_t missed_at(uintptr_t object, size_t fn) const {
    if (!object || fn >= Functions) return 0;
    const uint64_t key = key_of(object, epoch());
    for (const Entry& e : entries_) {
      if (e.key.load(std::memory_order_acquire) != key) continue;
      const uint64_t g = e.missed_at[fn].load(std::memory_order_acquire);
      return e.key.load(std::memory_order_relaxed) == key ? g : 0;
    }
    return 0;
  }

  // Remembers that `object`'s function `fn` was found in neither scope at
  // loader generation `generation` (read before the search), under the same
  // rule as store().
  bool store_miss(uintptr_t object, size_t fn, uint64_t generation, uint64_t seen) {
    if (!object || fn >= Functions || generation == 0) return false;
    Locked hold(lock_);
    if (epoch_.load(std::memory_order_relaxed) != seen) return false;
    return write_entry(key_of(object, seen),
                       [&](Entry& e) { e.missed_at[fn].store(generation, std::memory_order_release); });
  }

  // Stores `p` into `slot` (a process-wide answer kept beside the table)
  // under the same rule as store().
  bool store_beside(std::atomic<void*>& slot, void* p, uint64_t seen) {
    Locked hold(lock_);
    if (epoch_.load(std::memory_order_relaxed) != seen) return false;
    slot.store(p, std::memory_order_release);
    return true;
  }

  // Forgets every object, and calls `also()` (which empties the answers kept
  // beside the table) under the lock, so that a store begun before cannot
  // land after.
  template <typename Also>
  void empty(Also&& also) {
    Locked hold(lock_);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    for (Entry& e : entries_) {
      e.key.store(0, std::memory_order_release);
      for (auto& f : e.fn) f.store(nullptr, std::memory_order_relaxed);
      for (auto& g : e.missed_at) g.store(0, std::memory_order_relaxed);
    }
    also();
  }

 private:
  static_assert(sizeof(uintptr_t) == 8, "keys pack the epoch above a 48-bit address");
  static constexpr unsigned kAddressBits = 48;

  static uint64_t key_of(uintptr_t object, uint64_t epoch) {
    // The epoch in 16 bits, never 0 so that no key is 0 (a free entry): an
    // entry would need 65,535 unloads within one reader's few instructions
    // to be matched by mistake.
    return (static_cast<uint64_t>(epoch % 0xffff + 1) << kAddressBits) |
           (static_cast<uint64_t>(object) & ((uint64_t{1} << kAddressBits) - 1));
  }

  struct Entry {
    std::atomic<uint64_t> key{0};
    std::atomic<void*> fn[Functions] = {};
    std::atomic<uint64_t> missed_at[Functions] = {};  // 0: no miss remembered
  };

  // Under lock_: `write`s into the entry whose key is `key`, or into a free
  // one, which `key` then claims. The value is written before the key is
  // published, so that a reader who finds the key (find, missed_at) finds
  // the value with it. False when every entry is taken by another object.
  template <typename Write>
  bool write_entry(uint64_t key, Write&& write) {
    Entry* free_entry = nullptr;
    for (Entry& e : entries_) {
      const uint64_t k = e.key.load(std::memory_order_relaxed);
      if (k == key) {
        write(e);
        return true;
      }
      if (k == 0 && !free_entry) free_entry = &e;
    }
    if (!free_entry) return false;
    write(*free_entry);
    free_entry->key.store(key, std::memory_order_release);
    return true;
  }

  class Locked {
   public:
    explicit Locked(std::atomic<bool>& l) : l_(l) {
      unsigned spins = 0;
      while (l_.exchange(true, std::memory_order_acquire))
        while (l_.load(std::memory_order_relaxed)) spin_relax(spins);
    }
    ~Locked() { l_.store(false, std::memory_order_release); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    std::atomic<bool>& l_;
  };

  // All zero at first: the table can live in .lbss (core/export.h).
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> lock_{false};
  Entry entries_[Objects];
};

}  // namespace cuxfer::shim
