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

}  // namespace cuxfer::trace
