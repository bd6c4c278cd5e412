#include "record/capture_range.h"

#include <cstdio>

namespace cuxfer::shim {

bool CaptureRanges::start(uint64_t t_ns) {
  if (open_) return false;
  open_ = true;
  open_since_ = t_ns;
  ++ranges_;
  return true;
}

bool CaptureRanges::stop(uint64_t t_ns) {
  if (!open_) return false;
  open_ = false;
  closed_ns_ += t_ns > open_since_ ? t_ns - open_since_ : 0;
  return true;
}

uint64_t CaptureRanges::captured_ns(uint64_t now_ns) const {
  return closed_ns_ + (open_ && now_ns > open_since_ ? now_ns - open_since_ : 0);
}

std::string CaptureRanges::note(uint64_t now_ns, uint64_t recorded_ns, bool rewriting) const {
  const char* outside = rewriting ? "rewritten as configured but not recorded" : "passed through unrecorded";
  if (ranges_ == 0)
    return std::string(
               "capture range (cudaProfilerApi): the program never called cudaProfilerStart or "
               "cuProfilerStart, so nothing was recorded: its calls were ") +
           outside;
  char buf[256];
  const double captured = static_cast<double>(captured_ns(now_ns)) / 1e9;
  std::snprintf(buf, sizeof buf,
                "capture range (cudaProfilerApi): %u range%s, %.3f s of the %.3f s the shim ran", ranges_,
                ranges_ == 1 ? "" : "s", captured, static_cast<double>(recorded_ns) / 1e9);
  std::string line = buf;
  if (open_) line += " (the last still open at exit)";
  line += "; calls outside them were ";
  line += outside;
  return line;
}

}  // namespace cuxfer::shim
