#include "server/intake.h"

#include "absl/strings/str_cat.h"

namespace gpuest::server {

const char* ShedReasonName(ShedReason reason) {
  switch (reason) {
    case ShedReason::kQueueFull:
      return "queue_full";
    case ShedReason::kBytesInFlight:
      return "bytes_in_flight";
    case ShedReason::kDeadlineUnmeetable:
      return "deadline_unmeetable";
    case ShedReason::kDeadlineInQueue:
      return "deadline_in_queue";
    case ShedReason::kCancelledInQueue:
      return "cancelled_in_queue";
    case ShedReason::kEntryPointShare:
      return "entry_point_share";
  }
  return "unknown";
}

absl::Status Intake::ReserveBytes(int64_t bytes) {
  int64_t held = bytes_.load(std::memory_order_relaxed);
  do {
    if (held > 0 && held + bytes > max_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", held, " bytes of requests in flight; this one (", bytes,
          " bytes) would exceed its bound of ", max_bytes_, "; retry later"));
    }
  } while (!bytes_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return absl::OkStatus();
}

void Intake::ReleaseBytes(int64_t bytes) {
  bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

absl::Status Intake::CheckStartsInTime(size_t queued_ahead, absl::Time now,
                                       absl::Time deadline) const {
  if (queued_ahead == 0) return absl::OkStatus();
  const absl::Duration wait =
      recent_service_time() * static_cast<double>(queued_ahead) / workers_;
  if (now + wait <= deadline) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the server is overloaded: ", queued_ahead, " calls queued ahead (about ",
      absl::FormatDuration(wait), ") would outlast the call's deadline; retry later"));
}

void Intake::RecordServiceTime(absl::Duration took) {
  // A mean over roughly the last 16 calls.
  const int64_t ns = absl::ToInt64Nanoseconds(took);
  int64_t mean = service_ns_.load(std::memory_order_relaxed);
  int64_t next;
  do {
    next = mean == 0 ? ns : mean + (ns - mean) / 16;
  } while (!service_ns_.compare_exchange_weak(mean, next, std::memory_order_relaxed));
}

absl::Duration Intake::recent_service_time() const {
  return absl::Nanoseconds(service_ns_.load(std::memory_order_relaxed));
}

bool EntryPointShare::Acquire(absl::Time until) {
  if (!mu_.LockWhenWithDeadline(absl::Condition(this, &EntryPointShare::HasRoom),
                                until)) {
    mu_.Unlock();
    return false;
  }
  ++held_;
  mu_.Unlock();
  return true;
}

void EntryPointShare::Release() {
  absl::MutexLock lock(&mu_);
  --held_;
}

}  // namespace gpuest::server
