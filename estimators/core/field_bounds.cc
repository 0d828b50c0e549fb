#include "estimators/core/field_bounds.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuest::core {
namespace {

template <typename T>
absl::Status Check(const FieldBound& bound, T value, double as_double,
                   absl::string_view path, const ValidationLimits& limits) {
  const double max = UpperBound(bound, limits);
  if (std::isfinite(as_double) && as_double >= bound.min && as_double <= max) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": must be within ", absl::StrFormat("%.17g", bound.min), "..",
                   absl::StrFormat("%.17g", max), ", got ", value));
}

}  // namespace

const std::vector<FieldBound>& AllFieldBounds() {
  static const std::vector<FieldBound>* const rows = new std::vector<FieldBound>{
      kLayerOutputActivations, kLayerParameters,        kLayerInputActivations,
      kTraceSizeBytes,         kTraceAllocAt,           kTraceFreeAt,
      kTraceBatchSize,         kModelBatchSize,         kModelInputShape,
      kModelSequenceLength,    kDataParallel,           kTensorParallel,
      kLargestUnitBytes,       kMaxSplitSizeMb,         kStackCudaMajor,
      kFeaturesBatchSize,      kFeaturesParameters,     kFeaturesActivations,
      kFeaturesDepth,          kFeaturesSequenceLength, kFeaturesLayerCount,
      kMeasuredMemory,         kMeasuredGpuUtil,        kMeasuredMemUtil,
      kEstimatedPeak,          kUtilBinEdges,           kUtilProbabilities,
      kUtilPredictedClass,     kUtilConfidence,         kNodeTotalBytes,
      kNodeFreeBytes,          kLayerInputFrom};
  return *rows;
}

const FieldBound* FindFieldBound(absl::string_view field) {
  for (const FieldBound& row : AllFieldBounds()) {
    if (field == row.field) return &row;
  }
  return nullptr;
}

double UpperBound(const FieldBound& bound, const ValidationLimits& limits) {
  switch (bound.by) {
    case BoundBy::kFixed:
      return bound.max;
    case BoundBy::kCount:
      return static_cast<double>(limits.max_count);
    case BoundBy::kBatchSize:
      return static_cast<double>(limits.max_batch_size);
    case BoundBy::kLayers:
      return static_cast<double>(limits.max_layers);
    case BoundBy::kTraceTicks:
      return 2.0 * static_cast<double>(limits.max_trace_events);
  }
  return bound.max;
}

absl::Status CheckField(const FieldBound& bound, int64_t value, absl::string_view path,
                        const ValidationLimits& limits) {
  return Check(bound, value, static_cast<double>(value), path, limits);
}

absl::Status CheckField(const FieldBound& bound, uint64_t value, absl::string_view path,
                        const ValidationLimits& limits) {
  return Check(bound, value, static_cast<double>(value), path, limits);
}

absl::Status CheckField(const FieldBound& bound, double value, absl::string_view path,
                        const ValidationLimits& limits) {
  return Check(bound, value, value, path, limits);
}

}  // namespace gpuest::core
