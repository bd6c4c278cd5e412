// Answers "what kind of memory is this pointer?" for the copy hooks: the
// shim's own allocation table first, then the driver's cuPointerGetAttributes
// for memory allocated where the shim could not see it. Driver answers are
// cached per thread and expire whenever the allocation table changes.
#pragma once

#include <cstdint>

#include "memory/allocation_table.h"
#include "trace/event.h"

namespace cuxfer::shim {

struct PointerInfo {
  trace::MemKind kind = trace::MemKind::Unknown;
  int8_t device = -1;
  bool from_driver = false;  // the driver, not the allocation table, answered
};

AllocationTable& allocation_table();

// Never returns Unknown for a non-null pointer: memory CUDA does not know is Pageable.
PointerInfo classify_pointer(uint64_t ptr);

// An app free/unregister: drops the table entry starting at `address` and
// returns its size (0 if none). Entries the pinned rewrite made for its own
// registrations (kind Pageable) are the rewrite's to drop, never the app's.
uint64_t forget_app_range(uint64_t address);

// Forget cached driver answers in this thread (tests, fork).
void reset_pointer_cache();

}  // namespace cuxfer::shim
