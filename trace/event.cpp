#include "trace/event.h"

namespace cuxfer::trace {

const char* to_string(Direction d) {
  switch (d) {
    case Direction::HtoD: return "H2D";
    case Direction::DtoH: return "D2H";
    case Direction::DtoD: return "D2D";
    case Direction::HtoH: return "H2H";
    case Direction::Peer: return "peer";
    case Direction::Unknown: break;
  }
  return "unknown";
}

const char* to_string(MemKind k) {
  switch (k) {
    case MemKind::Pageable: return "pageable";
    case MemKind::Pinned: return "pinned";
    case MemKind::Registered: return "registered";
    case MemKind::Managed: return "managed";
    case MemKind::Mapped: return "mapped";
    case MemKind::Device: return "device";
    case MemKind::Array: return "array";
    case MemKind::Unknown: break;
  }
  return "unknown";
}

const char* to_string(EventKind k) {
  switch (k) {
    case EventKind::Copy: return "copy";
    case EventKind::Memset: return "memset";
    case EventKind::DeviceAlloc: return "device_alloc";
    case EventKind::DeviceFree: return "device_free";
    case EventKind::ManagedAlloc: return "managed_alloc";
    case EventKind::HostAlloc: return "host_alloc";
    case EventKind::HostFree: return "host_free";
    case EventKind::HostRegister: return "host_register";
    case EventKind::HostUnregister: return "host_unregister";
    case EventKind::Fingerprint: return "fingerprint";
    case EventKind::NvtxRanges: return "nvtx_ranges";
  }
  return "unknown";
}

const char* to_string(PassthroughReason r) {
  switch (r) {
    case PassthroughReason::None: return "not_recorded";
    case PassthroughReason::BelowThreshold: return "below_threshold";
    case PassthroughReason::GlobalCapture: return "global_capture";
    case PassthroughReason::NoFreeBuffer: return "no_free_buffer";
    case PassthroughReason::NotOneDimensional: return "not_1d";
    case PassthroughReason::StreamCapturing: return "stream_capturing";
    case PassthroughReason::PolicyPassthrough: return "policy_passthrough";
    case PassthroughReason::PolicyExclude: return "policy_exclude";
    case PassthroughReason::NotPolicySite: return "not_policy_site";
    case PassthroughReason::NoPool: return "no_pool";
    case PassthroughReason::PoolGoing: return "pool_going";
    case PassthroughReason::NoContext: return "no_context";
    case PassthroughReason::RewriteDisabled: return "rewrite_disabled";
    case PassthroughReason::ForkChild: return "fork_child";
    case PassthroughReason::NoDriver: return "no_driver";
    case PassthroughReason::StagingFailed: return "staging_failed";
    case PassthroughReason::NotPageable: return "not_pageable";
    case PassthroughReason::NotHostDevice: return "not_host_device";
    case PassthroughReason::Empty: return "empty";
    case PassthroughReason::NoDecision: return "no_decision";
    case PassthroughReason::AfterGlobalCapture: return "after_global_capture";
  }
  return "unknown";
}

}  // namespace cuxfer::trace
