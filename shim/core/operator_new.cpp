// The shim's own C++ allocation functions. Linked into libcuxfer.so only,
// whose version script keeps them local: the shim's code, and the static
// libraries linked into it, allocate through them; the app's operator new,
// and libstdc++'s own calls to it, are untouched. The shim is built with
// _GLIBCXX_ASSERTIONS, which compiles std::string's members into the shim
// instead of calling them in libstdc++, so that they allocate here too (and
// free what they allocated, never what the app's operator new made).
#include <new>

#include "core/allocation.h"

namespace al = cuxfer::shim::allocation;

// The throwing forms: never throw (the reserve, else abort).
void* operator new(std::size_t n) { return al::allocate(n); }
void* operator new[](std::size_t n) { return al::allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return al::allocate_aligned(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) {
  return al::allocate_aligned(n, static_cast<std::size_t>(a));
}
// The nothrow forms: the caller handles null, so the reserve stays for those that cannot.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return al::try_allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return al::try_allocate(n); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return al::try_allocate_aligned(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return al::try_allocate_aligned(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { al::release(p); }
void operator delete[](void* p) noexcept { al::release(p); }
void operator delete(void* p, std::size_t) noexcept { al::release(p); }
void operator delete[](void* p, std::size_t) noexcept { al::release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { al::release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { al::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { al::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { al::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { al::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { al::release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { al::release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { al::release(p); }
