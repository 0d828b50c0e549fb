#include "estimators/allocsim/trace_replay.h"

#include <algorithm>

#include "common/status_macros.h"

namespace gpuest::allocsim {
namespace {

// Events replayed between two deadline checks: a few hundred microseconds of work.
constexpr uint32_t kEventsPerDeadlineCheck = 8192;

// Event order as (time, allocations before frees): a counting sort when the clock is
// dense, as the describer's is, else a comparison sort.
std::vector<int32_t> EventOrder(const v1::AllocationTrace& trace) {
  const int n = trace.size_bytes_size();
  // Event e < n allocates index e; e >= n frees index e - n.
  auto key = [&](int32_t e) -> uint64_t {
    return e < n ? uint64_t{trace.alloc_at(e)} * 2
                 : uint64_t{trace.free_at(e - n)} * 2 + 1;
  };
  std::vector<int32_t> events;
  events.reserve(2 * n);
  uint64_t max_key = 0;
  for (int32_t i = 0; i < n; ++i) {
    events.push_back(i);
    if (trace.free_at(i) != 0) events.push_back(n + i);
  }
  for (int32_t e : events) max_key = std::max(max_key, key(e));
  if (max_key > 8 * events.size() + 64) {
    std::stable_sort(events.begin(), events.end(),
                     [&](int32_t a, int32_t b) { return key(a) < key(b); });
    return events;
  }
  std::vector<int32_t> count(max_key + 2, 0);
  for (int32_t e : events) ++count[key(e) + 1];
  for (size_t k = 1; k < count.size(); ++k) count[k] += count[k - 1];
  std::vector<int32_t> sorted(events.size());
  for (int32_t e : events) sorted[count[key(e)]++] = e;
  return sorted;
}

// Replays `steps` steps, or, with settle, at least that many and on until a step maps no
// new segment (at most kMaxSettleSteps).
absl::StatusOr<ReplayResult> Replay(const v1::AllocationTrace& trace,
                                    const AllocatorConfig& config,
                                    const std::vector<PersistentAllocation>& persistent,
                                    int steps, bool settle,
                                    const common::WorkDeadline& deadline) {
  GPUEST_RETURN_IF_ERROR(deadline.Check());
  CachingAllocator allocator(config);
  ReplayResult result;
  CategoryBytes live{};
  uint64_t allocated_at_peak = 0;
  auto note_peak = [&] {
    if (allocator.allocated() > allocated_at_peak) {
      allocated_at_peak = allocator.allocated();
      result.live_at_peak = live;
    }
  };
  auto peaks = [&] {
    result.peak_allocated_bytes = allocator.peak_allocated();
    result.peak_reserved_bytes = allocator.peak_reserved();
    result.alloc_retries = allocator.alloc_retries();
  };
  auto fail = [&](const absl::Status& status) -> absl::StatusOr<ReplayResult> {
    if (status.code() != absl::StatusCode::kResourceExhausted) return status;
    result.out_of_memory = true;
    peaks();
    return result;
  };

  for (const PersistentAllocation& p : persistent) {
    auto id = allocator.Malloc(p.bytes);
    if (!id.ok()) return fail(id.status());
    live[0] += CachingAllocator::RoundSize(p.bytes);
    note_peak();
  }
  const int n = trace.size_bytes_size();
  const std::vector<int32_t> order = EventOrder(trace);
  uint64_t reserved_before_step = 0;
  std::vector<CachingAllocator::BlockId> block_of(n, -1);
  auto allocate = [&](int i) -> absl::Status {
    auto id = allocator.Malloc(trace.size_bytes(i));
    if (!id.ok()) return id.status();
    block_of[i] = *id;
    live[trace.category(i)] += CachingAllocator::RoundSize(trace.size_bytes(i));
    note_peak();
    return absl::OkStatus();
  };
  auto release = [&](int i) {
    allocator.Free(block_of[i]);
    block_of[i] = -1;
    live[trace.category(i)] -= CachingAllocator::RoundSize(trace.size_bytes(i));
  };
  auto persists = [&](int i) {
    const int c = trace.category(i);
    return c == v1::ALLOCATION_CATEGORY_PARAMETER ||
           c == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE;
  };
  const int last_step = settle ? std::max(steps, kMaxSettleSteps) : steps;
  for (int step = 0; step < last_step; ++step) {
    if (settle && step >= steps && allocator.peak_reserved() == reserved_before_step)
      break;
    reserved_before_step = allocator.peak_reserved();
    result.steps_replayed = step + 1;
    if (step > 0) {
      for (int i = 0; i < n; ++i) {  // zero_grad(set_to_none=True).
        if (trace.category(i) == v1::ALLOCATION_CATEGORY_GRADIENT && block_of[i] >= 0) {
          release(i);
        }
      }
      for (int i = 0; i < n; ++i) {  // The next batch, then the old one goes.
        if (trace.category(i) != v1::ALLOCATION_CATEGORY_INPUT || block_of[i] < 0)
          continue;
        const CachingAllocator::BlockId old = block_of[i];
        if (absl::Status s = allocate(i); !s.ok()) return fail(s);
        allocator.Free(old);
        live[v1::ALLOCATION_CATEGORY_INPUT] -=
            CachingAllocator::RoundSize(trace.size_bytes(i));
      }
    }
    uint32_t since_check = 0;
    for (int32_t e : order) {
      if (++since_check == kEventsPerDeadlineCheck) {
        since_check = 0;
        GPUEST_RETURN_IF_ERROR(deadline.Check());
      }
      const int i = e < n ? e : e - n;
      if (step > 0 &&
          (persists(i) || trace.category(i) == v1::ALLOCATION_CATEGORY_INPUT)) {
        continue;
      }
      if (e < n) {
        if (absl::Status s = allocate(i); !s.ok()) return fail(s);
      } else {
        release(i);
      }
    }
  }
  peaks();
  return result;
}

}  // namespace

absl::StatusOr<ReplayResult> ReplayTrace(
    const v1::AllocationTrace& trace, const AllocatorConfig& config,
    const std::vector<PersistentAllocation>& persistent, int steps,
    const common::WorkDeadline& deadline) {
  return Replay(trace, config, persistent, steps, /*settle=*/false, deadline);
}

absl::StatusOr<ReplayResult> ReplayUntilSettled(
    const v1::AllocationTrace& trace, const AllocatorConfig& config,
    const std::vector<PersistentAllocation>& persistent, int min_steps,
    const common::WorkDeadline& deadline) {
  return Replay(trace, config, persistent, min_steps, /*settle=*/true, deadline);
}

}  // namespace gpuest::allocsim
