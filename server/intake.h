// File: intake.h
//
// Whether a call may wait for a worker, decided when it arrives, so that an
// overloaded server refuses at once instead of queueing work it cannot do in time:
// - bytes in flight: the requests held by calls taken in (queued or running) stay
//   under a bound, so that concurrent large requests cannot take the server's memory;
// - time: a call whose deadline would pass before a worker could start it, given the
//   calls queued ahead and how long calls take lately, is refused.
// The queue's length bound is the worker pool's. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuest::server {

// Why a call was refused without being worked on; the /metrics label of each.
enum class ShedReason {
  kQueueFull = 0,           // The worker queue held its maximum.
  kBytesInFlight = 1,       // Taking in its request would exceed the bytes bound.
  kDeadlineUnmeetable = 2,  // The queue ahead would outlast its deadline.
  kDeadlineInQueue = 3,     // Its deadline passed while it waited for a worker.
  kCancelledInQueue = 4,    // Its caller went away while it waited.
  kEntryPointShare = 5,     // Its entry point's share of the workers stayed taken.
};
inline constexpr int kShedReasonCount = 6;
const char* ShedReasonName(ShedReason reason);

class Intake {
 public:
  // max_bytes_in_flight: the most request bytes calls taken in hold at once; a call
  // arriving at an empty server is taken in whatever its size (gRPC's message size
  // limit bounds it). workers: how many calls run at once.
  Intake(int64_t max_bytes_in_flight, int workers)
      : max_bytes_(max_bytes_in_flight), workers_(workers > 0 ? workers : 1) {}

  // Holds bytes for a call, or ResourceExhausted (nothing held) over the bound.
  absl::Status ReserveBytes(int64_t bytes);
  void ReleaseBytes(int64_t bytes);
  int64_t bytes_in_flight() const { return bytes_.load(std::memory_order_relaxed); }

  // ResourceExhausted when `queued_ahead` calls, at the recent time per call, would
  // keep a worker from starting this call before its deadline.
  absl::Status CheckStartsInTime(size_t queued_ahead, absl::Time now,
                                 absl::Time deadline) const;

  // How long a worker spent on one call; feeds the time per call.
  void RecordServiceTime(absl::Duration took);
  absl::Duration recent_service_time() const;

 private:
  const int64_t max_bytes_;
  const int workers_;
  std::atomic<int64_t> bytes_{0};
  // Exponentially weighted mean of the time per call, in nanoseconds.
  std::atomic<int64_t> service_ns_{0};
};

// The workers that calls from an entry point answering on threads of its own (the
// scheduler extender's HTTP, which has dozens) may hold at once, running or queued, so
// that a flood of them leaves the rest of the workers and the queue to the gRPC API.
// A call beyond the share waits for one of them to finish, up to a time.
class EntryPointShare {
 public:
  explicit EntryPointShare(int limit) : limit_(limit > 0 ? limit : 1) {}

  // True once the caller holds a place (Release it); false if none freed before until.
  bool Acquire(absl::Time until);
  void Release();
  int limit() const { return limit_; }

 private:
  bool HasRoom() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return held_ < limit_; }

  const int limit_;
  mutable absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpuest::server
