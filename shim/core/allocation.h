// What the shim does when its own memory runs out (issue 14).
//
// libcuxfer.so defines the C++ allocation functions for its own code only
// (hidden: the app's operator new stays the app's; shim/core/allocation.cpp).
// They take memory from malloc, as the default ones do. When malloc fails
// they do not throw: the allocation is served from a reserve the shim set
// aside, the out-of-memory handler turns recording off (every later CUDA call
// passes through untouched), and one line says so. The throwing form of the
// standard library's helpers (std::__throw_*) is also the shim's own: they
// are reached only by a bug (an index out of range, an impossible size), and
// abort with one line instead of throwing through the app's frames.
#pragma once

#include <cstddef>

namespace cuxfer::shim::allocation {

// Called once, on the first allocation the reserve served, from whatever
// thread and lock that allocation was made under: it must neither allocate
// nor lock (Recorder::stop_for_memory sets a state and returns).
using OutOfMemoryHandler = void (*)();
void set_out_of_memory_handler(OutOfMemoryHandler handler);

// True once an allocation of the shim had to be served from the reserve.
bool exhausted();

// malloc (posix_memalign) alone: null when it fails (the nothrow forms).
void* try_allocate(std::size_t n);
void* try_allocate_aligned(std::size_t n, std::size_t align);
// malloc, else the reserve (which never fails: it aborts when spent).
void* allocate(std::size_t n);
void* allocate_aligned(std::size_t n, std::size_t align);
// free, except for memory of the reserve (never reused).
void release(void* p);
// The reserve's path alone, as when malloc has failed (for the unit tests).
void* serve_from_reserve(std::size_t n, std::size_t align);

// Bytes of the reserve.
constexpr std::size_t kReserveBytes = std::size_t{4} << 20;

}  // namespace cuxfer::shim::allocation
