// Sampled content fingerprints of host buffers, for the analyzer's duplicate
// and round-trip findings. Cheap by construction: 32 words spread evenly over
// the buffer plus its last word, mixed with its length — about 33 cache lines
// whatever the size (not every byte: a change between samples goes unseen,
// which the findings say). Only the 64-bit hash leaves the process.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuxfer::shim {

uint64_t sampled_fingerprint(const void* data, size_t bytes);

// Software prefetches of the words sampled_fingerprint() will read, issued
// before the copy is made: the cache and TLB misses of its 33 scattered
// loads then overlap the transfer instead of following it (after a large
// host memset, bandwidthTest's pattern, they cost ~10-20 us a copy on the
// H200). A prefetch never faults, so any address may be given.
void prefetch_fingerprint_samples(const void* data, size_t bytes);

}  // namespace cuxfer::shim
