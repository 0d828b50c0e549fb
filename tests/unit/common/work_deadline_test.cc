// common/work_deadline: a deadline passed, a caller gone away, or neither; and a
// cancellation that arrives at the deadline counts as the deadline's.
#include "common/work_deadline.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gpuest::common {
namespace {

TEST(WorkDeadline, ADefaultOneNeverStopsWork) {
  EXPECT_TRUE(WorkDeadline().Check().ok());
  EXPECT_TRUE(WorkDeadline::Never().Check().ok());
  EXPECT_EQ(WorkDeadline::Never().deadline(), absl::InfiniteFuture());
  EXPECT_EQ(&WorkDeadline::Never(), &WorkDeadline::Never());
}

TEST(WorkDeadline, APassedDeadlineStopsWork) {
  const WorkDeadline passed(absl::Now() - absl::Milliseconds(1));
  EXPECT_EQ(passed.Check().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(StoppedByCaller(passed.Check()));
  EXPECT_TRUE(WorkDeadline(absl::Now() + absl::Hours(1)).Check().ok());
}

TEST(WorkDeadline, ACallerGoneAwayCancelsUnlessItsDeadlineIsDue) {
  bool cancelled = false;
  const auto is_cancelled = [&cancelled] { return cancelled; };
  const WorkDeadline far(absl::Now() + absl::Hours(1), is_cancelled);
  const WorkDeadline never(absl::InfiniteFuture(), is_cancelled);
  EXPECT_TRUE(far.Check().ok());
  cancelled = true;
  EXPECT_EQ(far.Check().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(never.Check().code(), absl::StatusCode::kCancelled);
  // Within the headers' travel time of the deadline: the client's own cancellation at
  // its deadline, so the deadline's outcome.
  const WorkDeadline due(absl::Now() + absl::Milliseconds(5), is_cancelled);
  EXPECT_EQ(due.Check().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(WorkDeadline, OnlyTheDeadlineAndTheCallerStopWorkByTheCaller) {
  EXPECT_TRUE(StoppedByCaller(absl::CancelledError("gone")));
  EXPECT_TRUE(StoppedByCaller(absl::DeadlineExceededError("late")));
  EXPECT_FALSE(StoppedByCaller(absl::OkStatus()));
  EXPECT_FALSE(StoppedByCaller(absl::ResourceExhaustedError("full")));
}

}  // namespace
}  // namespace gpuest::common
