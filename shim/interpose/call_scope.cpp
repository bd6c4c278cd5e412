#include "interpose/call_scope.h"
#include "core/export.h"

#include <algorithm>
#include <cstring>

#include "core/config.h"
#include "core/event_clock.h"
#include "core/prefetch_trail.h"
#include "memory/pointer_classifier.h"
#include "python/python_stack.h"
#include "record/fingerprint.h"

namespace cuxfer::shim {
namespace {

CUXFER_HOT bool device_side(trace::MemKind k) {
  return k == trace::MemKind::Device || k == trace::MemKind::Array || k == trace::MemKind::Mapped;
}

CUXFER_HOT PointerInfo side_info(uint64_t ptr, trace::MemKind preset) {
  if (preset != trace::MemKind::Unknown) return PointerInfo{preset, -1, false};
  return classify_pointer(ptr);
}

}  // namespace

CUXFER_HOT void describe_event(const CallDesc& d, trace::Event& e) {
  e.kind = static_cast<uint8_t>(d.kind);
  e.stream = d.stream;
  e.flags |= d.flags;
  using trace::Direction;
  using trace::EventKind;
  switch (d.kind) {
    case EventKind::Copy: {
      PointerInfo s = side_info(d.src, d.src_preset);
      PointerInfo t = side_info(d.dst, d.dst_preset);
      if (d.src_device >= 0) s.device = d.src_device;
      if (d.dst_device >= 0) t.device = d.dst_device;
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
      // The host side where there is one; device to device, the source
      // device + 1 (0 unknown), so that peer copies are known per device pair
      // (trace/event.h).
      bool device_to_device = dir == Direction::DtoD || dir == Direction::Peer;
      e.address = dir == Direction::DtoH ? d.dst
                  : device_to_device     ? (s.device >= 0 ? static_cast<uint64_t>(s.device) + 1 : 0)
                                         : d.src;
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

CUXFER_HOT void prefetch_samples(const CallDesc& d) {
  using trace::Direction;
  using trace::MemKind;
  // The classification is the one describe_event() makes after the call
  // (cached per thread: the second lookup is a few compares). Pageable
  // memory too where the rewrite may register it in place for the copy
  // (then read by DMA: bandwidthTest's pageable copies after a memset paid
  // 10-20 us for the samples without the prefetch, docs/benchmarks.md).
  auto dma_host = [](uint64_t p) {
    const MemKind k = classify_pointer(p).kind;
    return k == MemKind::Pinned || k == MemKind::Registered || (g_hot_line.rewrite_any && k == MemKind::Pageable);
  };
  if (d.direction != Direction::DtoH && d.src_preset == MemKind::Unknown && d.src && dma_host(d.src))
    prefetch_fingerprint_samples(reinterpret_cast<const void*>(d.src), d.bytes);
  if (d.direction != Direction::HtoD && d.dst_preset == MemKind::Unknown && d.dst && dma_host(d.dst))
    prefetch_fingerprint_samples(reinterpret_cast<const void*>(d.dst), d.bytes);
}

CUXFER_HOT void fingerprint_copy(Recorder& rec, ThreadState& ts, const trace::Event& e) {
  using trace::Direction;
  using trace::MemKind;
  if (e.flags & trace::kFlagFailed) return;
  // One contiguous host range only: a batch (or a runtime call split into
  // several driver copies) describes its first pointer with the total bytes.
  if (ts.multi_piece) return;
  switch (static_cast<HookId>(e.api)) {
    case HookId::h_cuMemcpyBatchAsync: case HookId::h_cuMemcpyBatchAsync_ptsz:
    case HookId::h_cuMemcpyBatchAsync_v2: case HookId::h_cuMemcpyBatchAsync_v2_ptsz:
    case HookId::h_cuMemcpy3DBatchAsync: case HookId::h_cuMemcpy3DBatchAsync_ptsz:
    case HookId::h_cuMemcpy3DBatchAsync_v2: case HookId::h_cuMemcpy3DBatchAsync_v2_ptsz:
      return;
    default:
      break;
  }
  const auto dir = static_cast<Direction>(e.direction);
  if (dir != Direction::HtoD && dir != Direction::DtoH) return;
  const auto host_kind = static_cast<MemKind>(dir == Direction::HtoD ? e.src_kind : e.dst_kind);
  // Ordinary host memory only: reading managed memory could migrate it.
  if (host_kind != MemKind::Pageable && host_kind != MemKind::Pinned && host_kind != MemKind::Registered) return;
  // An async D2H into pinned memory may still be in flight: its bytes are not there yet.
  if (dir == Direction::DtoH && (e.flags & trace::kFlagAsync) && host_kind != MemKind::Pageable) return;
  const uint64_t host = dir == Direction::HtoD ? ts.desc.src : ts.desc.dst;
  const uint64_t device = dir == Direction::HtoD ? ts.desc.dst : ts.desc.src;
  if (host == 0) return;
  trace::Event f{};
  f.t_enter_ns = event_clock::stamp();
  f.address = sampled_fingerprint(reinterpret_cast<const void*>(host), e.bytes);
  f.t_exit_ns = event_clock::stamp();
  f.stream = device;
  f.bytes = e.bytes;
  f.correlation_id = e.correlation_id;
  f.thread_id = e.thread_id;
  f.api = kFingerprintApi;
  f.kind = static_cast<uint8_t>(trace::EventKind::Fingerprint);
  f.direction = e.direction;
  f.device = e.device;
  rec.emit(ts, f);
}

namespace {

// A loop copies from the same few stacks again and again, in the same order
// (a PyTorch training step: two uploads, two of cuBLAS's memsets, the loss
// read back): the thread's last kRecentStacks stacks, each compared whole,
// are cheaper than the table's hash and probe. Each remembers which one came
// after it last time, tried first: a step's cycle of stacks then hits at the
// first compare (with four slots tried in turn, a cycle of five missed every
// time). The id of an interned stack never changes (ids are never reused).
// Replaced round-robin.
struct RecentStack {
  uint32_t depth = 0, id = 0;
  uint32_t next = 0;  // the slot that followed this one last time
  uint64_t frames[CallSiteTable::kMaxDepth];
};
constexpr unsigned kRecentStacks = 8;
struct RecentStacks {
  RecentStack slots[kRecentStacks];
  unsigned next_slot = 0, last_hit = 0;
  unsigned predicted = 0;  // the slot the next capture will try first
};
thread_local RecentStacks t_recent __attribute__((tls_model("initial-exec")));

}  // namespace

CUXFER_HOT uint32_t capture_callsite(Recorder& rec, Caller caller, SiteCapture how, StackTimes* times) {
  void* const return_address = caller.return_address;
  if (how == SiteCapture::Caller) {
    // The return address alone: a loop calls from the same place again and
    // again, so remember the last one.
    static thread_local uint64_t last_address __attribute__((tls_model("initial-exec"))) = 0;
    static thread_local uint32_t last_id __attribute__((tls_model("initial-exec"))) = 0;
    auto address = reinterpret_cast<uint64_t>(return_address);
    if (address == last_address && last_id != 0) return last_id;
    last_id = rec.callsites().intern(&address, address ? 1 : 0);
    last_address = address;
    return last_id;
  }
  // A cold capture: the last cold capture's reads from this site, issued
  // together before this one's chains of dependent loads start
  // (core/prefetch_trail.h). Issued here, not at the hook's entry with
  // prefetches of the recent-stack slot as well: on the H200's training loop
  // that made the walks slower by more than it saved the matching
  // (docs/benchmarks.md, eighteenth session).
  if (g_hot_line.prefetch_trail) prefetch_trail().begin(reinterpret_cast<uint64_t>(return_address));
  // Native frames, then the thread's Python frames (trace/python_frame.h).
  // The Python frames are read first, into their place after at most
  // `python_native_depth` native frames: a thread that has them gets that many
  // native frames (the walk's cost is per frame), one without gets them all.
  uint64_t frames[CallSiteTable::kMaxDepth];
  const uint32_t native_max = std::min(rec.stack_depth(), CallSiteTable::kMaxNativeDepth);
  const uint32_t under_python = std::min(native_max, g_hot_line.python_native_depth);
  const uint64_t t0 = times ? event_clock::stamp() : 0;
  const uint32_t py = g_hot_line.python_stacks ? python::PythonStacks::capture_gated(
                                                   frames + under_python, CallSiteTable::kMaxDepth - under_python)
                                             : 0;
  const uint64_t t1 = times ? event_clock::stamp() : 0;
  uint32_t n = capture_stack(frames, py ? under_python : native_max, return_address, caller.frame);
  if (times) {
    times->python_ns = event_clock::span_ns(t0, t1);
    times->native_ns = event_clock::span_ns(t1, event_clock::stamp());
  }
  if (py) {
    if (n < under_python) std::memmove(frames + n, frames + under_python, py * sizeof(uint64_t));
    n += py;
  }
  RecentStacks& rs = t_recent;
  RecentStack* const recent = rs.slots;
  unsigned& next_slot = rs.next_slot;
  unsigned& last_hit = rs.last_hit;
  auto same = [&](unsigned i) {
    const RecentStack& r = recent[i];
    return r.id != 0 && r.depth == n && std::memcmp(r.frames, frames, n * sizeof(uint64_t)) == 0;
  };
  const unsigned predicted = rs.predicted;  // recent[last_hit].next, without reading its line
  unsigned hit = kRecentStacks;
  if (same(predicted)) {
    hit = predicted;
  } else {
    for (unsigned k = 0; k < kRecentStacks; ++k) {  // the last one hit first: one site's loop
      const unsigned i = (last_hit + k) % kRecentStacks;
      if (i != predicted && same(i)) {
        hit = i;
        break;
      }
    }
  }
  if (hit < kRecentStacks) {
    recent[last_hit].next = hit;
    last_hit = hit;
    rs.predicted = recent[hit].next;
    return recent[hit].id;
  }
  const uint32_t id = rec.callsites().intern(frames, n);
  if (id != 0) {
    RecentStack& r = recent[next_slot];
    recent[last_hit].next = next_slot;
    last_hit = next_slot;
    next_slot = (next_slot + 1) % kRecentStacks;
    r.depth = n;
    std::memcpy(r.frames, frames, n * sizeof(uint64_t));
    r.id = id;
    r.next = last_hit;
    rs.predicted = last_hit;
  }
  return id;
}

}  // namespace cuxfer::shim
