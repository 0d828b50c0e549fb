#include "common/work_deadline.h"

#include "absl/time/clock.h"

namespace gpuest::common {
namespace {

// How early before the server's copy of the deadline the client's cancellation at
// that deadline can arrive: the time the request's headers took to reach the server.
constexpr absl::Duration kCancelledByDeadlineWithin = absl::Milliseconds(20);

}  // namespace

const WorkDeadline& WorkDeadline::Never() {
  static const WorkDeadline* never = new WorkDeadline();
  return *never;
}

absl::Status WorkDeadline::Check() const {
  if (deadline_ != absl::InfiniteFuture() && absl::Now() >= deadline_) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  // After the deadline: gRPC also marks a call cancelled once its deadline passes, and
  // a client cancels its call at its own deadline, which reaches the server a moment
  // before the server's copy of that deadline passes: a call cancelled that close to
  // its deadline was stopped by it.
  if (cancelled_ && cancelled_()) {
    if (absl::Now() + kCancelledByDeadlineWithin >= deadline_) {
      return absl::DeadlineExceededError("the call's deadline passed");
    }
    return absl::CancelledError("the caller cancelled the call");
  }
  return absl::OkStatus();
}

}  // namespace gpuest::common
