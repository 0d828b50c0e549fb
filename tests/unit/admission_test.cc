// server/admission: what it admits and refuses, decided from counts and times the test
// gives it.
#include "server/admission.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gpuest {
namespace {

TEST(Admission, BytesInFlightStayUnderTheBound) {
  Admission admission(/*max_bytes_in_flight=*/100, /*workers=*/2);
  EXPECT_TRUE(admission.ReserveBytes(60).ok());
  const absl::Status over = admission.ReserveBytes(50);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_EQ(admission.bytes_in_flight(), 60);    // The refused call holds nothing.
  EXPECT_TRUE(admission.ReserveBytes(40).ok());  // Exactly the bound.
  admission.ReleaseBytes(60);
  admission.ReleaseBytes(40);
  EXPECT_EQ(admission.bytes_in_flight(), 0);
  // An empty server takes one call of any size: gRPC's message limit bounds it.
  EXPECT_TRUE(admission.ReserveBytes(500).ok());
  EXPECT_FALSE(admission.ReserveBytes(1).ok());
}

TEST(Admission, RefusesACallTheQueueAheadWouldMakeLate) {
  Admission admission(1 << 20, /*workers=*/2);
  const absl::Time now = absl::FromUnixSeconds(1000);
  // Nothing learned yet, or nothing queued: no wait is predicted.
  EXPECT_TRUE(admission.CheckStartsInTime(10, now, now + absl::Milliseconds(1)).ok());
  admission.RecordServiceTime(absl::Milliseconds(10));
  EXPECT_EQ(admission.recent_service_time(), absl::Milliseconds(10));
  EXPECT_TRUE(admission.CheckStartsInTime(0, now, now).ok());
  // 4 queued on 2 workers at 10 ms each: about 20 ms before this call could start.
  EXPECT_TRUE(admission.CheckStartsInTime(4, now, now + absl::Milliseconds(25)).ok());
  const absl::Status late =
      admission.CheckStartsInTime(4, now, now + absl::Milliseconds(15));
  EXPECT_EQ(late.code(), absl::StatusCode::kResourceExhausted) << late;
}

TEST(Admission, TheTimePerCallFollowsRecentCalls) {
  Admission admission(1, 1);
  admission.RecordServiceTime(absl::Milliseconds(16));
  for (int i = 0; i < 200; ++i) admission.RecordServiceTime(absl::Milliseconds(1));
  EXPECT_LT(admission.recent_service_time(), absl::Microseconds(1100));
  EXPECT_GE(admission.recent_service_time(), absl::Milliseconds(1));
}

TEST(EntryPointShare, ACallBeyondTheShareWaitsForAPlaceAndNoLongerThanItsTime) {
  EntryPointShare share(2);
  EXPECT_TRUE(share.Acquire(absl::Now()));
  EXPECT_TRUE(share.Acquire(absl::Now()));
  // Both places are held: a third gives up at its time.
  EXPECT_FALSE(share.Acquire(absl::Now() + absl::Milliseconds(20)));
  // One is released while a third waits: it gets the place.
  std::thread release([&share] {
    absl::SleepFor(absl::Milliseconds(50));
    share.Release();
  });
  EXPECT_TRUE(share.Acquire(absl::InfiniteFuture()));
  release.join();
  EXPECT_EQ(share.limit(), 2);
}

}  // namespace
}  // namespace gpuest
