// Exact device-side sums for the nvcc test apps (zc_params, zc_reread).
//
// Each thread adds its part into a 64-bit unsigned sum; warps fold their
// lanes with shuffles and one lane per warp adds the warp's sum into a DEVICE
// scratch word with atomicAdd. Unsigned integer addition is associative and
// commutative (mod 2^64), so the total is the same whatever the order in which
// blocks finish: the result is bit-exact and can be predicted on the host.
//
// publish() then copies the total into the app's separate 8-byte result
// buffer and clears the scratch for the next step. The atomics stay on the
// scratch word on purpose: the result buffer is the allocation a zero-copy
// policy may turn into mapped host memory, and atomics over PCIe to host
// memory are not something every platform supports; a plain store is.
#pragma once

#include <cstdint>

__device__ inline void add_to_total(unsigned long long part, unsigned long long* total) {
  for (int offset = 16; offset > 0; offset /= 2) part += __shfl_down_sync(0xffffffffu, part, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(total, part);
}

// One thread: result = scratch, scratch = 0.
__global__ void publish(unsigned long long* scratch, unsigned long long* result) {
  *result = *scratch;
  *scratch = 0;
}

// One thread: scratch = 0 (once, before the first step).
__global__ void clear_total(unsigned long long* scratch) { *scratch = 0; }

// 64-bit FNV-1a style fold of one value into a running checksum (host side).
inline uint64_t fold_checksum(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}
