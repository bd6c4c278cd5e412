// The interface between libcuxfer.so (which owns the host-range table and the
// registration cache) and libcuxfer_memhooks.so (the libc hooks that feed
// them). The hooks live in a library of their own so that only runs that
// register memory in place (`cuxfer record --rewrite=pin`) put an interposer
// on malloc, free and mmap: observe mode costs the app's allocator nothing.
// libcuxfer.so exports these functions; the hooks library looks them up
// when it is loaded and forwards everything untouched when they are absent.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// The hooks library has loaded. Returns the smallest allocation to report
// (0: report nothing, e.g. the rewrite or registration is off).
uint64_t cuxfer_mem_attach(void);
// A malloc-family block or anonymous read-write mapping of n bytes (source
// 1 = malloc, 2 = mmap) now exists at p.
void cuxfer_mem_allocated(void* p, size_t n, int source);
// The malloc-family block at p is about to be freed or moved.
void cuxfer_mem_freeing(void* p);
// [p, p+n) is about to be unmapped, remapped or replaced.
void cuxfer_mem_going(void* p, size_t n);
// [p, p+n) stays mapped but its pages are about to be discarded (madvise).
void cuxfer_mem_discarding(void* p, size_t n);
// These three never call the CUDA driver and never wait for another thread:
// the registrations they invalidate are unregistered later by the shim.
// Whether p lies in a reported mapping (mremap keeps tracking those).
int cuxfer_mem_is_mapping(void* p);
// Cheap hints: nothing reported / nothing registered (skip the calls above).
int cuxfer_mem_ranges_empty(void);
int cuxfer_mem_registrations_exist(void);
// Lock-order-checked builds only (CUXFER_LOCK_ORDER_CHECK): the hooks are
// entered and may take the shim's host-ranges lock; aborts if the calling
// thread holds a shim lock ranked at or above it (core/ranked_lock.h).
void cuxfer_mem_check_lock_order(void);
}
