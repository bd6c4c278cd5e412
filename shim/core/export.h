#pragma once
// The shim is built with hidden visibility; only interposed symbols are exported.
#define CUXFER_EXPORT __attribute__((visibility("default")))
#define CUXFER_LIKELY(x) __builtin_expect(!!(x), 1)
#define CUXFER_UNLIKELY(x) __builtin_expect(!!(x), 0)
// The code every intercepted copy runs, gathered in one place (.text.hot,
// which the linker keeps together): a copy made after the app has walked
// through a lot of memory finds the shim's code cold, and pays a TLB miss per
// page of it and a cache miss per line. Spread over the library's .text, the
// path touched 15 pages for 90 lines (devtools/pages_touched.py).
#define CUXFER_HOT __attribute__((hot))
// The small accessors every intercepted copy calls, inlined where the compiler
// would rather keep one out-of-line copy: that copy lands in the library's
// .text, outside .text.hot, one more page and line for a copy made with the
// caches cold. (On the H200's copy storm this alone measured no change,
// docs/benchmarks.md "Sixteenth session"; it keeps the hot path in one place.)
#define CUXFER_INLINE __attribute__((always_inline)) inline
// Large zero-initialised arrays go to .lbss, which the linker places after
// .bss: left in .bss they sit between the small globals every copy reads
// (the configuration, the real functions, guard variables), which then
// spread over three pages instead of one (devtools/pages_touched.py
// --data-pages). Zero-initialised variables only (.lbss holds no bytes).
#define CUXFER_LARGE_BSS __attribute__((section(".lbss")))
