#include "interpose/call_scope.h"

#include "memory/pointer_classifier.h"

namespace cuxfer::shim {
namespace {

bool device_side(trace::MemKind k) { return k == trace::MemKind::Device || k == trace::MemKind::Array; }

PointerInfo side_info(uint64_t ptr, trace::MemKind preset) {
  if (preset != trace::MemKind::Unknown) return PointerInfo{preset, -1, false};
  return classify_pointer(ptr);
}

}  // namespace

void describe_event(const CallDesc& d, trace::Event& e) {
  e.kind = static_cast<uint8_t>(d.kind);
  e.stream = d.stream;
  e.flags |= d.flags;
  using trace::Direction;
  using trace::EventKind;
  switch (d.kind) {
    case EventKind::Copy: {
      PointerInfo s = side_info(d.src, d.src_preset);
      PointerInfo t = side_info(d.dst, d.dst_preset);
      Direction dir = d.direction;
      // cuMemcpyDtoD between two devices (legal under UVA) is a peer copy, as
      // the unified and 2D/3D paths already report it.
      if (dir == Direction::DtoD && s.device >= 0 && t.device >= 0 && s.device != t.device)
        dir = Direction::Peer;
      if (dir == Direction::Unknown) {
        bool sd = device_side(s.kind), td = device_side(t.kind);
        dir = !sd && td   ? Direction::HtoD
              : sd && !td ? Direction::DtoH
              : sd && td  ? (s.device >= 0 && t.device >= 0 && s.device != t.device ? Direction::Peer
                                                                                    : Direction::DtoD)
                          : Direction::HtoH;
      }
      e.direction = static_cast<uint8_t>(dir);
      e.src_kind = static_cast<uint8_t>(s.kind);
      e.dst_kind = static_cast<uint8_t>(t.kind);
      e.bytes = d.bytes;
      // The host side where there is one; 0 for device-to-device (trace/event.h).
      bool device_to_device = dir == Direction::DtoD || dir == Direction::Peer;
      e.address = dir == Direction::DtoH ? d.dst : device_to_device ? 0 : d.src;
      e.device = dir == Direction::DtoH ? s.device : t.device;
      if (s.from_driver || t.from_driver) e.flags |= trace::kFlagKindFromDriver;
      break;
    }
    case EventKind::Memset: {
      PointerInfo t = side_info(d.dst, d.dst_preset);
      e.dst_kind = static_cast<uint8_t>(t.kind);
      e.device = t.device;
      e.bytes = d.bytes;
      e.address = d.dst;
      if (t.from_driver) e.flags |= trace::kFlagKindFromDriver;
      break;
    }
    default:
      // Allocation events: the hook's post step filled address and bytes.
      if (e.bytes == 0) e.bytes = d.bytes;
      if (e.address == 0) e.address = d.dst;
      e.dst_kind = static_cast<uint8_t>(d.dst_preset);
      break;
  }
}

uint32_t capture_callsite(Recorder& rec, void* return_address) {
  if (rec.stack_depth() == 0) {
    // Without stacks a call site is its return address alone: a loop calls
    // from the same place again and again, so remember the last one.
    static thread_local uint64_t last_address __attribute__((tls_model("initial-exec"))) = 0;
    static thread_local uint32_t last_id __attribute__((tls_model("initial-exec"))) = 0;
    auto address = reinterpret_cast<uint64_t>(return_address);
    if (address == last_address && last_id != 0) return last_id;
    last_id = rec.callsites().intern(&address, address ? 1 : 0);
    last_address = address;
    return last_id;
  }
  uint64_t frames[CallSiteTable::kMaxDepth];
  uint32_t n = capture_stack(frames, rec.stack_depth(), return_address);
  return rec.callsites().intern(frames, n);
}

}  // namespace cuxfer::shim
