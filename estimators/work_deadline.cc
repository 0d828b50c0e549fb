#include "estimators/work_deadline.h"

#include "absl/time/clock.h"

namespace gpuest {

const WorkDeadline& WorkDeadline::Never() {
  static const WorkDeadline* never = new WorkDeadline();
  return *never;
}

absl::Status WorkDeadline::Check() const {
  if (deadline_ != absl::InfiniteFuture() && absl::Now() >= deadline_) {
    return absl::DeadlineExceededError(
        "the call's deadline passed while it was being estimated");
  }
  // After the deadline: gRPC also marks a call cancelled once its deadline passes.
  if (cancelled_ && cancelled_())
    return absl::CancelledError("the caller cancelled the call");
  return absl::OkStatus();
}

}  // namespace gpuest
