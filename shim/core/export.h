#pragma once
// The shim is built with hidden visibility; only interposed symbols are exported.
#define CUXFER_EXPORT __attribute__((visibility("default")))
#define CUXFER_LIKELY(x) __builtin_expect(!!(x), 1)
#define CUXFER_UNLIKELY(x) __builtin_expect(!!(x), 0)
