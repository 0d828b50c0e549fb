// File: memory_fit.h
//
// Whether jobs fit one GPU's memory together. Each process pays its own CUDA context,
// so the joint need is the sum of the jobs' requirements, each with its own context,
// not one context plus the sum of the tensors. Byte sums saturate instead of wrapping
// (common/units.h): a request with absurd figures reads as "does not fit", never as a
// small number.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace gpuest::placement {

struct MemoryFit {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;  // Before the candidate.
  uint64_t candidate_bytes = 0;
  bool fits = false;
  int64_t headroom_bytes = 0;  // capacity - used - candidate.
};

// used = the sum of existing, or, when the node reports what it has in use
// (reported_used_bytes > 0), the larger of that and the sum (a job estimated but not
// yet started is not in the node's figure).
MemoryFit FitMemory(uint64_t capacity_bytes, absl::Span<const uint64_t> existing_bytes,
                    uint64_t candidate_bytes, uint64_t reported_used_bytes = 0);

}  // namespace gpuest::placement
