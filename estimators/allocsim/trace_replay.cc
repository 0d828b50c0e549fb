#include "estimators/allocsim/trace_replay.h"

#include <algorithm>

namespace gpuest::allocsim {
namespace {

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

}  // namespace

absl::StatusOr<ReplayResult> ReplayTrace(
    const v1::AllocationTrace& trace, const AllocatorConfig& config,
    const std::vector<PersistentAllocation>& persistent) {
  CachingAllocator allocator(config);
  ReplayResult result;
  CategoryBytes live{};
  auto note_peak = [&] {
    if (allocator.reserved() > result.peak_reserved_bytes) {
      result.peak_reserved_bytes = allocator.reserved();
      result.live_at_peak = live;
      result.allocated_at_peak = allocator.allocated();
    }
  };
  auto fail = [&](const absl::Status& status) -> absl::StatusOr<ReplayResult> {
    if (status.code() != absl::StatusCode::kResourceExhausted) return status;
    result.out_of_memory = true;
    result.peak_allocated_bytes = allocator.peak_allocated();
    result.alloc_retries = allocator.alloc_retries();
    return result;
  };

  for (const PersistentAllocation& p : persistent) {
    auto id = allocator.Malloc(p.bytes);
    if (!id.ok()) return fail(id.status());
    live[0] += CachingAllocator::RoundSize(p.bytes);
    note_peak();
  }
  const int n = trace.size_bytes_size();
  std::vector<CachingAllocator::BlockId> block_of(n, -1);
  for (int32_t e : EventOrder(trace)) {
    const int i = e < n ? e : e - n;
    const int category = trace.category(i);
    const uint64_t rounded = CachingAllocator::RoundSize(trace.size_bytes(i));
    if (e < n) {
      auto id = allocator.Malloc(trace.size_bytes(i));
      if (!id.ok()) return fail(id.status());
      block_of[i] = *id;
      live[category] += rounded;
      note_peak();
    } else {
      allocator.Free(block_of[i]);
      live[category] -= rounded;
    }
  }
  result.peak_allocated_bytes = allocator.peak_allocated();
  result.alloc_retries = allocator.alloc_retries();
  return result;
}

}  // namespace gpuest::allocsim
