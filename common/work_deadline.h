// File: work_deadline.h
//
// When long estimator work must stop: the caller's deadline, and whether the caller
// has gone away. The server makes one per call from its gRPC context and passes it
// down through the engine to the estimators whose work can run long (trace replay,
// the Transformer-based ensembles), which call Check() every so often and return its
// status; nothing reads a global. A default-made one never stops work.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gpuest::common {

class WorkDeadline {
 public:
  WorkDeadline() = default;  // Never expires, never cancelled.
  // cancelled, when given, says whether the caller has gone away; it must be cheap and
  // thread-safe (gRPC's ServerContext::IsCancelled is).
  explicit WorkDeadline(absl::Time deadline, std::function<bool()> cancelled = nullptr)
      : deadline_(deadline), cancelled_(std::move(cancelled)) {}

  // A shared one that never expires, for callers without a deadline.
  static const WorkDeadline& Never();

  // DeadlineExceeded once the deadline has passed, Cancelled once the caller has gone
  // away, else OK. Costs a clock read.
  absl::Status Check() const;

  absl::Time deadline() const { return deadline_; }

 private:
  absl::Time deadline_ = absl::InfiniteFuture();
  std::function<bool()> cancelled_;
};

// Whether status means the work was stopped by its deadline or its caller, which is
// the request's outcome (never a per-estimator warning).
inline bool StoppedByCaller(const absl::Status& status) {
  return status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kCancelled;
}

}  // namespace gpuest::common
