// The transfer class of one event: its direction and the kind of memory on its
// host side. This is the unit every total and finding is counted in.
#pragma once

#include "trace/event.h"

namespace cuxfer::model {

struct TransferClass {
  trace::Direction direction = trace::Direction::Unknown;
  // H2D: the source's kind; D2H: the destination's; D2D/peer: Device;
  // H2H: Pageable if either side is pageable, else the source's kind.
  trace::MemKind memory = trace::MemKind::Unknown;

  friend bool operator==(const TransferClass&, const TransferClass&) = default;
};

TransferClass classify(const trace::Event& e);

// True when the event's host side is ordinary pageable memory: the driver
// stages it through its own pinned buffer (every byte copied twice).
inline bool is_pageable(const TransferClass& c) { return c.memory == trace::MemKind::Pageable; }

// True for H2D and D2H, the directions that cross the host link and have a
// host side whose memory kind matters.
inline bool crosses_host_link(trace::Direction d) {
  return d == trace::Direction::HtoD || d == trace::Direction::DtoH;
}

// Whether the CPU-blocked time of this copy is a fair measure of the transfer
// itself. True for synchronous host<->device copies and for "async" copies
// that the driver performs synchronously (pageable host memory). False for
// truly asynchronous copies (they return before the DMA ends) and for
// device-to-device copies (cudaMemcpy D2D does not wait for the copy).
bool cpu_time_measures_transfer(const trace::Event& e, const TransferClass& c);

}  // namespace cuxfer::model
