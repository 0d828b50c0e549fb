#include "estimators/recommendation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/units.h"

namespace gpuest {
namespace {

// The rank of recommendation.h's trust order: higher is trusted more; 0 for a result
// of no known kind.
int Trust(const v1::EstimatorResult& r) {
  const bool in = r.in_distribution();
  switch (r.kind()) {
    case v1::ESTIMATOR_KIND_SIMULATOR:
      return in ? 5 : 3;
    case v1::ESTIMATOR_KIND_CLASSIFIER:
      return in ? 4 : 2;
    case v1::ESTIMATOR_KIND_ANALYTICAL:
      return 1;
    default:
      return 0;
  }
}

uint64_t SafeFigure(const v1::MemoryEstimate& m) {
  return std::max(m.upper_bytes(), m.point_bytes());
}

}  // namespace

std::optional<v1::Recommendation> Recommend(
    const google::protobuf::RepeatedPtrField<v1::EstimatorResult>& results,
    const GpuProfile* gpu) {
  const v1::EstimatorResult* best = nullptr;
  for (const v1::EstimatorResult& r : results) {
    if (!r.has_memory() || SafeFigure(r.memory()) == 0) continue;
    if (best == nullptr || Trust(r) > Trust(*best) ||
        (Trust(r) == Trust(*best) &&
         SafeFigure(r.memory()) > SafeFigure(best->memory()))) {
      best = &r;
    }
  }
  if (best == nullptr) return std::nullopt;
  v1::Recommendation rec;
  rec.set_memory_bytes(SafeFigure(best->memory()));
  rec.set_estimator_id(best->estimator_id());
  rec.set_basis(
      absl::StrCat(best->memory().upper_bytes() > 0 ? "upper bound" : "point estimate",
                   " of ", best->estimator_id(),
                   ", the largest of the most trusted estimators present (simulator > "
                   "classifier in their distributions, then simulator > classifier out "
                   "of them, then formulas)"));
  if (gpu != nullptr) {
    v1::GpuFit& fit = *rec.mutable_fit();
    fit.set_gpu(gpu->id);
    fit.set_capacity_bytes(gpu->memory_bytes);
    fit.set_fits(rec.memory_bytes() <= gpu->memory_bytes);
    fit.set_headroom_bytes(SignedHeadroom(gpu->memory_bytes, rec.memory_bytes()));
    fit.set_allocator_retry(best->memory().allocator_retry());
  }
  return rec;
}

}  // namespace gpuest
