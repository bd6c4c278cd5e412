#include "analyzer/model/classify.h"

namespace cuxfer::model {

using trace::Direction;
using trace::MemKind;

TransferClass classify(const trace::Event& e) {
  TransferClass c;
  c.direction = static_cast<Direction>(e.direction);
  const auto src = static_cast<MemKind>(e.src_kind);
  const auto dst = static_cast<MemKind>(e.dst_kind);
  switch (c.direction) {
    case Direction::HtoD:
      c.memory = src;
      break;
    case Direction::DtoH:
      c.memory = dst;
      break;
    case Direction::DtoD:
    case Direction::Peer:
      c.memory = MemKind::Device;
      break;
    case Direction::HtoH:
      c.memory = (src == MemKind::Pageable || dst == MemKind::Pageable) ? MemKind::Pageable : src;
      break;
    case Direction::Unknown:
      c.memory = MemKind::Unknown;
      break;
  }
  if (c.memory > MemKind::Array) c.memory = MemKind::Unknown;  // value from a newer writer
  if (c.direction > Direction::Peer) c.direction = Direction::Unknown;
  return c;
}

bool cpu_time_measures_transfer(const trace::Event& e, const TransferClass& c) {
  switch (c.direction) {
    case Direction::HtoD:
    case Direction::DtoH:
    case Direction::HtoH:
      return !(e.flags & trace::kFlagAsync) || c.memory == MemKind::Pageable;
    default:
      return false;
  }
}

}  // namespace cuxfer::model
