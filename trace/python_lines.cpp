#include "trace/python_lines.h"

namespace cuxfer::trace {
namespace {

// Objects/lnotab_notes.txt of 3.10: pairs (bytes covered, line delta); a
// delta of -128 means "no line" for that range.
int line_310(int first_line, std::string_view t, uint32_t offset) {
  int line = first_line;
  uint64_t start = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    const auto covered = static_cast<unsigned char>(t[i]);
    const auto delta = static_cast<signed char>(t[i + 1]);
    const bool none = delta == -128;
    if (!none) line += delta;
    const uint64_t end = start + covered;
    if (offset >= start && offset < end) return none ? 0 : line;
    start = end;
  }
  return 0;
}

// Objects/locations.md of 3.11+: entries of one header byte (bit 7 set; code
// in bits 3-6; code units covered - 1 in bits 0-2) and their operands.
class LocationReader {
 public:
  explicit LocationReader(std::string_view t) : t_(t) {}
  bool done() const { return pos_ >= t_.size(); }
  bool byte(unsigned& b) {
    if (pos_ >= t_.size()) return false;
    b = static_cast<unsigned char>(t_[pos_++]);
    return true;
  }
  bool varint(uint64_t& v) {
    unsigned b = 0;
    if (!byte(b)) return false;
    v = b & 63;
    for (unsigned shift = 6; b & 64; shift += 6) {
      if (!byte(b) || shift > 60) return false;
      v |= static_cast<uint64_t>(b & 63) << shift;
    }
    return true;
  }
  bool svarint(int64_t& v) {
    uint64_t u = 0;
    if (!varint(u)) return false;
    v = (u & 1) ? -static_cast<int64_t>(u >> 1) : static_cast<int64_t>(u >> 1);
    return true;
  }
  bool skip(unsigned n) {
    if (t_.size() - pos_ < n) return false;
    pos_ += n;
    return true;
  }

 private:
  std::string_view t_;
  size_t pos_ = 0;
};

int line_311(int first_line, std::string_view t, uint32_t offset) {
  const uint64_t unit = offset / 2;  // code units of 2 bytes
  LocationReader r(t);
  int64_t line = first_line;
  uint64_t start = 0;
  while (!r.done()) {
    unsigned head = 0;
    if (!r.byte(head) || !(head & 0x80)) return 0;
    const unsigned code = (head >> 3) & 15, length = (head & 7) + 1;
    bool none = false;
    int64_t delta = 0;
    uint64_t skipped = 0;
    if (code == 15) {
      none = true;
    } else if (code == 14) {  // long form: line delta, end line, column, end column
      if (!r.svarint(delta) || !r.varint(skipped) || !r.varint(skipped) || !r.varint(skipped)) return 0;
    } else if (code == 13) {  // no column
      if (!r.svarint(delta)) return 0;
    } else if (code >= 10) {  // one line: delta in the code, two column bytes
      delta = code - 10;
      if (!r.skip(2)) return 0;
    } else {  // short form: same line, one column byte
      if (!r.skip(1)) return 0;
    }
    line += delta;
    if (unit >= start && unit < start + length) return none || line < 0 ? 0 : static_cast<int>(line);
    start += length;
  }
  return 0;
}

}  // namespace

int python_line(uint32_t version, int first_line, std::string_view table, uint32_t offset) {
  if (version < 0x030a) return 0;
  return version == 0x030a ? line_310(first_line, table, offset) : line_311(first_line, table, offset);
}

}  // namespace cuxfer::trace
