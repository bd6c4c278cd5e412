// What the shim and the analyzer both name: the pseudo-APIs under which the
// shim records work of its own (appended to the trace's API names after the
// hooks). One definition, read by both sides.
#pragma once

namespace cuxfer::trace {

// Every pseudo-API name begins so: events under them are not the app's calls.
inline constexpr const char* kShimApiPrefix = "cuxfer:";
// The rewrite's pinned staging pool: a HostAlloc of one pool buffer whose
// CPU-blocked time is its pinning cost.
inline constexpr const char* kStagingPoolApiName = "cuxfer:staging_pool";
// The rewrite's in-place registrations: a HostRegister of the registered
// range (page-aligned) whose duration is the pinning cost.
inline constexpr const char* kRegisterApiName = "cuxfer:register";
// Content fingerprints (EventKind::Fingerprint).
inline constexpr const char* kFingerprintApiName = "cuxfer:fingerprint";
// NVTX range-stack changes (EventKind::NvtxRanges).
inline constexpr const char* kNvtxApiName = "cuxfer:nvtx";

}  // namespace cuxfer::trace
