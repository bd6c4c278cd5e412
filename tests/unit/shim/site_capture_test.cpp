// What a recorded call's site is made of (record/site_capture.h).
#include "record/site_capture.h"

#include <gtest/gtest.h>

namespace cuxfer::shim {
namespace {

using trace::EventKind;

TEST(SiteCapture, CopiesAndAllocationsGetTheirStack) {
  for (EventKind k : {EventKind::Copy, EventKind::DeviceAlloc, EventKind::DeviceFree, EventKind::ManagedAlloc,
                      EventKind::HostAlloc, EventKind::HostFree, EventKind::HostRegister, EventKind::HostUnregister}) {
    EXPECT_EQ(site_capture(k, 16, false), SiteCapture::Stack) << static_cast<int>(k);
    EXPECT_EQ(site_capture(k, 1, true), SiteCapture::Stack) << static_cast<int>(k);
  }
}

TEST(SiteCapture, MemsetsKeepTheirCallerUnlessAsked) {
  EXPECT_EQ(site_capture(EventKind::Memset, 16, false), SiteCapture::Caller);
  EXPECT_EQ(site_capture(EventKind::Memset, 32, false), SiteCapture::Caller);
  EXPECT_EQ(site_capture(EventKind::Memset, 16, true), SiteCapture::Stack);
}

TEST(SiteCapture, NoStacksMeansTheCallerForEveryCall) {
  for (EventKind k : {EventKind::Copy, EventKind::Memset, EventKind::DeviceAlloc, EventKind::HostRegister}) {
    EXPECT_EQ(site_capture(k, 0, false), SiteCapture::Caller);
    EXPECT_EQ(site_capture(k, 0, true), SiteCapture::Caller);
  }
}

}  // namespace
}  // namespace cuxfer::shim
