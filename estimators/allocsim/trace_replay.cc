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

// One replay of a trace: the simulated allocator, what is live by category, each
// allocation's block, and the result so far. Run once.
class Replayer {
 public:
  Replayer(const v1::AllocationTrace& trace, const AllocatorConfig& config)
      : trace_(trace), allocator_(config), block_of_(trace.size_bytes_size(), -1) {}

  // Replays `steps` steps, or, with settle, at least that many and on until a step maps
  // no new segment (at most kMaxSettleSteps).
  absl::StatusOr<ReplayResult> Run(const std::vector<PersistentAllocation>& persistent,
                                   int steps, bool settle,
                                   const common::WorkDeadline& deadline) {
    absl::Status status = AllocatePersistent(persistent);
    if (status.ok()) status = ReplaySteps(steps, settle, deadline);
    // A failed allocation (ResourceExhausted) ends the replay out of memory; any other
    // failure (the deadline's) is the answer.
    if (!status.ok() && status.code() != absl::StatusCode::kResourceExhausted) {
      return status;
    }
    if (!status.ok()) result_.out_of_memory = true;
    result_.peak_allocated_bytes = allocator_.peak_allocated();
    result_.peak_reserved_bytes = allocator_.peak_reserved();
    result_.alloc_retries = allocator_.alloc_retries();
    return result_;
  }

 private:
  absl::Status AllocatePersistent(const std::vector<PersistentAllocation>& persistent) {
    for (const PersistentAllocation& p : persistent) {
      auto id = allocator_.Malloc(p.bytes);
      if (!id.ok()) return id.status();
      live_[0] += CachingAllocator::RoundSize(p.bytes);
      NotePeak();
    }
    return absl::OkStatus();
  }

  absl::Status ReplaySteps(int steps, bool settle, const common::WorkDeadline& deadline) {
    const std::vector<int32_t> order = EventOrder(trace_);
    uint64_t reserved_before_step = 0;
    const int last_step = settle ? std::max(steps, kMaxSettleSteps) : steps;
    for (int step = 0; step < last_step; ++step) {
      if (settle && step >= steps && allocator_.peak_reserved() == reserved_before_step)
        break;
      reserved_before_step = allocator_.peak_reserved();
      result_.steps_replayed = step + 1;
      if (step > 0) GPUEST_RETURN_IF_ERROR(StartNextStep());
      GPUEST_RETURN_IF_ERROR(ReplayEvents(step, order, deadline));
    }
    return absl::OkStatus();
  }

  // Between two steps: the gradients go, then the next batch arrives before the old
  // one goes.
  absl::Status StartNextStep() {
    const int n = trace_.size_bytes_size();
    for (int i = 0; i < n; ++i) {  // zero_grad(set_to_none=True).
      if (trace_.category(i) == v1::ALLOCATION_CATEGORY_GRADIENT && block_of_[i] >= 0) {
        Release(i);
      }
    }
    for (int i = 0; i < n; ++i) {  // The next batch, then the old one goes.
      if (trace_.category(i) != v1::ALLOCATION_CATEGORY_INPUT || block_of_[i] < 0)
        continue;
      const CachingAllocator::BlockId old = block_of_[i];
      GPUEST_RETURN_IF_ERROR(Allocate(i));
      allocator_.Free(old);
      live_[v1::ALLOCATION_CATEGORY_INPUT] -=
          CachingAllocator::RoundSize(trace_.size_bytes(i));
    }
    return absl::OkStatus();
  }

  // The step's events in order; after the first step, the parameters and optimizer
  // state the first made stay, and the inputs were replaced before it.
  absl::Status ReplayEvents(int step, const std::vector<int32_t>& order,
                            const common::WorkDeadline& deadline) {
    const int n = trace_.size_bytes_size();
    uint32_t since_check = 0;
    for (int32_t e : order) {
      if (++since_check == kEventsPerDeadlineCheck) {
        since_check = 0;
        GPUEST_RETURN_IF_ERROR(deadline.Check());
      }
      const int i = e < n ? e : e - n;
      if (step > 0 &&
          (Persists(i) || trace_.category(i) == v1::ALLOCATION_CATEGORY_INPUT)) {
        continue;
      }
      if (e < n) {
        GPUEST_RETURN_IF_ERROR(Allocate(i));
      } else {
        Release(i);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Allocate(int i) {
    auto id = allocator_.Malloc(trace_.size_bytes(i));
    if (!id.ok()) return id.status();
    block_of_[i] = *id;
    live_[trace_.category(i)] += CachingAllocator::RoundSize(trace_.size_bytes(i));
    NotePeak();
    return absl::OkStatus();
  }

  void Release(int i) {
    allocator_.Free(block_of_[i]);
    block_of_[i] = -1;
    live_[trace_.category(i)] -= CachingAllocator::RoundSize(trace_.size_bytes(i));
  }

  bool Persists(int i) const {
    const int c = trace_.category(i);
    return c == v1::ALLOCATION_CATEGORY_PARAMETER ||
           c == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE;
  }

  void NotePeak() {
    if (allocator_.allocated() > allocated_at_peak_) {
      allocated_at_peak_ = allocator_.allocated();
      result_.live_at_peak = live_;
    }
  }

  const v1::AllocationTrace& trace_;
  CachingAllocator allocator_;
  std::vector<CachingAllocator::BlockId> block_of_;
  CategoryBytes live_{};
  uint64_t allocated_at_peak_ = 0;
  ReplayResult result_;
};

absl::StatusOr<ReplayResult> Replay(const v1::AllocationTrace& trace,
                                    const AllocatorConfig& config,
                                    const std::vector<PersistentAllocation>& persistent,
                                    int steps, bool settle,
                                    const common::WorkDeadline& deadline) {
  GPUEST_RETURN_IF_ERROR(deadline.Check());
  return Replayer(trace, config).Run(persistent, steps, settle, deadline);
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
