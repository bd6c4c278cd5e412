#include "record/capture_range.h"

#include <gtest/gtest.h>

namespace cuxfer::shim {
namespace {

constexpr uint64_t kMs = 1000000;

TEST(CaptureRanges, StartsOutsideAndCountsEachRangeOnce) {
  CaptureRanges c;
  EXPECT_FALSE(c.inside());
  EXPECT_TRUE(c.start(10 * kMs));
  EXPECT_FALSE(c.start(11 * kMs));  // the runtime's start reaches the driver's: no second range
  EXPECT_TRUE(c.inside());
  EXPECT_TRUE(c.stop(40 * kMs));
  EXPECT_FALSE(c.stop(41 * kMs));
  EXPECT_FALSE(c.inside());
  EXPECT_TRUE(c.start(100 * kMs));
  EXPECT_EQ(c.ranges(), 2u);
  EXPECT_EQ(c.captured_ns(150 * kMs), 30 * kMs + 50 * kMs);  // the open range counts up to now
  EXPECT_TRUE(c.stop(120 * kMs));
  EXPECT_EQ(c.captured_ns(500 * kMs), 50 * kMs);
}

TEST(CaptureRanges, AStopBeforeAnyStartChangesNothing) {
  CaptureRanges c;
  EXPECT_FALSE(c.stop(5));
  EXPECT_EQ(c.ranges(), 0u);
  EXPECT_EQ(c.captured_ns(100), 0u);
}

TEST(CaptureRanges, TheNoteSaysHowMuchWasCapturedAndWhatHappenedOutside) {
  CaptureRanges c;
  c.start(1000 * kMs);
  c.stop(3500 * kMs);
  EXPECT_EQ(
      c.note(9000 * kMs, 9800 * kMs, false),
      "capture range (cudaProfilerApi): 1 range, 2.500 s of the 9.800 s the shim ran; calls outside them "
      "were passed through unrecorded");
  c.start(8000 * kMs);
  EXPECT_EQ(
      c.note(9000 * kMs, 9800 * kMs, true),
      "capture range (cudaProfilerApi): 2 ranges, 3.500 s of the 9.800 s the shim ran (the last still open "
      "at exit); calls outside them were rewritten as configured but not recorded");
}

TEST(CaptureRanges, NeverStartedSaysNothingWasRecorded) {
  CaptureRanges c;
  EXPECT_EQ(
      c.note(1, 1, false),
      "capture range (cudaProfilerApi): the program never called cudaProfilerStart or cuProfilerStart, so "
      "nothing was recorded: its calls were passed through unrecorded");
}

}  // namespace
}  // namespace cuxfer::shim
