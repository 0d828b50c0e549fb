// File: trace_replay.h
//
// Replays one training step's AllocationTrace through the caching-allocator
// simulation: peak allocated and peak reserved, and what was live, by category, when
// allocated memory peaked.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/work_deadline.h"
#include "estimators/allocsim/caching_allocator.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::allocsim {

// Indexed by v1::AllocationCategory; index 0 holds the persistent allocations
// (library workspaces) the caller adds.
using CategoryBytes = std::array<uint64_t, v1::AllocationCategory_ARRAYSIZE>;

struct PersistentAllocation {
  uint64_t bytes = 0;  // Allocated before the step and never freed (cuBLAS workspace).
};

struct ReplayResult {
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  // Live rounded bytes per category at the first moment allocated memory peaked (the
  // reserved peak can come later, when a small request maps a segment while freed
  // activations sit in the cache: a breakdown taken then would show only the cache).
  CategoryBytes live_at_peak{};
  bool out_of_memory = false;  // Only with a capacity: the step did not fit.
  int alloc_retries = 0;       // Times the cache was emptied to make room.
  int steps_replayed = 0;
  // What the step may hold beyond what was replayed: a step built from the layers, its
  // uncertain layers' bytes (layer_trace.h LayerStep); 0 for a trace. Set by the
  // caller; the upper bound counts it with the simulated peak (memory_model.h).
  uint64_t uncertain_bytes = 0;
};

// The trace must be valid (estimators/core/request_validation.h). Events at the same time
// are replayed allocations first, which can only raise the peak.
//
// steps > 1 replays the steady state after the first step, as a training loop runs it:
// gradients are freed (zero_grad with set_to_none, torch 2.x's default), a new batch
// arrives before the old one is released, and the step's activations, temporaries
// and gradients are replayed against the warm cache while the parameters and the
// optimizer state created by the first step stay alive.
//
// A replay of millions of events takes seconds: it checks the deadline every few
// thousand events and returns its status (DeadlineExceeded, Cancelled) when it fails.
absl::StatusOr<ReplayResult> ReplayTrace(
    const v1::AllocationTrace& trace, const AllocatorConfig& config,
    const std::vector<PersistentAllocation>& persistent, int steps = 1,
    const common::WorkDeadline& deadline = common::WorkDeadline::Never());

// The most steps ReplayUntilSettled replays. Replayed with cuDNN's workspaces in the
// trace, GPUMemNet CNNs whose real reserved memory still grew at the third step (one
// segment of their largest tensor's size: ../shared/data/h100-op-transients/
// step_reserved.jsonl) settled by the fourth.
inline constexpr int kMaxSettleSteps = 8;

// Replays at least min_steps, then on until a step maps no new segment (its reserved peak
// is the step before's), at most kMaxSettleSteps: a workspace freed mid-step leaves
// a block that a later, smaller request splits, so the next step's large request may
// need a new segment, and that can repeat for a few steps before the cache holds a
// block of every size the step asks for at once.
absl::StatusOr<ReplayResult> ReplayUntilSettled(
    const v1::AllocationTrace& trace, const AllocatorConfig& config,
    const std::vector<PersistentAllocation>& persistent, int min_steps,
    const common::WorkDeadline& deadline = common::WorkDeadline::Never());

}  // namespace gpuest::allocsim
