// server/intake: what it takes in and refuses, decided from counts and times the test
// gives it.
#include "server/intake.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

TEST(Intake, BytesInFlightStayUnderTheBound) {
  Intake intake(/*max_bytes_in_flight=*/100, /*workers=*/2);
  EXPECT_TRUE(intake.ReserveBytes(60).ok());
  const absl::Status over = intake.ReserveBytes(50);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted) << over;
  EXPECT_EQ(intake.bytes_in_flight(), 60);    // The refused call holds nothing.
  EXPECT_TRUE(intake.ReserveBytes(40).ok());  // Exactly the bound.
  intake.ReleaseBytes(60);
  intake.ReleaseBytes(40);
  EXPECT_EQ(intake.bytes_in_flight(), 0);
  // An empty server takes one call of any size: gRPC's message limit bounds it.
  EXPECT_TRUE(intake.ReserveBytes(500).ok());
  EXPECT_FALSE(intake.ReserveBytes(1).ok());
}

TEST(Intake, RefusesACallTheQueueAheadWouldMakeLate) {
  Intake intake(1 << 20, /*workers=*/2);
  const absl::Time now = absl::FromUnixSeconds(1000);
  // Nothing learned yet, or nothing queued: no wait is predicted.
  EXPECT_TRUE(intake.CheckStartsInTime(10, now, now + absl::Milliseconds(1)).ok());
  intake.RecordServiceTime(absl::Milliseconds(10));
  EXPECT_EQ(intake.recent_service_time(), absl::Milliseconds(10));
  EXPECT_TRUE(intake.CheckStartsInTime(0, now, now).ok());
  // 4 queued on 2 workers at 10 ms each: about 20 ms before this call could start.
  EXPECT_TRUE(intake.CheckStartsInTime(4, now, now + absl::Milliseconds(25)).ok());
  const absl::Status late =
      intake.CheckStartsInTime(4, now, now + absl::Milliseconds(15));
  EXPECT_EQ(late.code(), absl::StatusCode::kResourceExhausted) << late;
}

TEST(Intake, TheTimePerCallFollowsRecentCalls) {
  Intake intake(1, 1);
  intake.RecordServiceTime(absl::Milliseconds(16));
  for (int i = 0; i < 200; ++i) intake.RecordServiceTime(absl::Milliseconds(1));
  EXPECT_LT(intake.recent_service_time(), absl::Microseconds(1100));
  EXPECT_GE(intake.recent_service_time(), absl::Milliseconds(1));
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
}  // namespace gpuest::server
