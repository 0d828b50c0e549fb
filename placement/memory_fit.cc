#include "placement/memory_fit.h"

#include <algorithm>

#include "common/units.h"

namespace gpuest::placement {

MemoryFit FitMemory(uint64_t capacity_bytes, absl::Span<const uint64_t> existing_bytes,
                    uint64_t candidate_bytes, uint64_t reported_used_bytes) {
  MemoryFit fit;
  fit.capacity_bytes = capacity_bytes;
  fit.candidate_bytes = candidate_bytes;
  uint64_t sum = 0;
  for (uint64_t b : existing_bytes) sum = common::SaturatingAdd(sum, b);
  fit.used_bytes = std::max(sum, reported_used_bytes);
  const uint64_t need = common::SaturatingAdd(fit.used_bytes, candidate_bytes);
  fit.fits = need <= capacity_bytes;
  fit.headroom_bytes = common::SignedHeadroom(capacity_bytes, need);
  return fit;
}

}  // namespace gpuest::placement
