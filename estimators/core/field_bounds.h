// File: field_bounds.h
//
// The one table of what every number a request carries may be. Each numeric field of
// every message a client sends (EstimateRequest, CheckPlacementRequest, RankGpusRequest
// and what they hold) has a row here, by its full protobuf name, and the code that
// reads the field checks it against its row (CheckField) before any arithmetic. A
// test walks the proto descriptors and fails when a numeric field has no row, and
// sets each field past its row's bounds and expects the refusal (field_bounds_test).
//
// The bounds keep every product the estimators form (batch x elements x 8 bytes,
// sums over layers and events) inside 64 bits and far above any real GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest::core {

// The limits a deployment can set (server flags); the table's rows scale with them.
struct ValidationLimits {
  int64_t max_layers = 10000;
  int64_t max_trace_events = 2000000;
  int64_t max_batch_size = int64_t{1} << 24;
  // Per-layer parameters and activations, and the totals of a feature vector: large
  // enough for any real model, small enough that bytes never overflow 64 bits.
  int64_t max_count = int64_t{1} << 44;
  int64_t max_name_length = 1024;
};

// What a row's upper bound follows.
enum class BoundBy {
  kFixed,       // FieldBound::max
  kCount,       // ValidationLimits::max_count
  kBatchSize,   // ValidationLimits::max_batch_size
  kLayers,      // ValidationLimits::max_layers
  kTraceTicks,  // 2 x ValidationLimits::max_trace_events (a trace's clock)
};

struct FieldBound {
  const char* field;  // Full protobuf name: "gpuest.v1.Layer.input_activations".
  double min;         // Inclusive.
  BoundBy by;
  double max;  // Inclusive, for kFixed.
};

// Bytes any one figure of a request may claim: 1 PiB, far above any GPU, far below
// where a sum of a few thousand of them could wrap 64 bits.
inline constexpr double kMaxRequestBytes = 1125899906842624.0;  // 2^50

// Rows for the fields the validators read one by one (the rest are in the table only).
inline constexpr FieldBound kLayerOutputActivations{"gpuest.v1.Layer.output_activations",
                                                    0, BoundBy::kCount, 0};
inline constexpr FieldBound kLayerParameters{"gpuest.v1.Layer.parameters", 0,
                                             BoundBy::kCount, 0};
inline constexpr FieldBound kLayerInputActivations{"gpuest.v1.Layer.input_activations", 0,
                                                   BoundBy::kCount, 0};
// -2 (the model's input), -1 (made between modules) or an earlier layer's index: the
// layers bound it; that it names an earlier layer is checked beside it.
inline constexpr FieldBound kLayerInputFrom{"gpuest.v1.Layer.input_from", -2,
                                            BoundBy::kLayers, 0};
inline constexpr FieldBound kTraceSizeBytes{"gpuest.v1.AllocationTrace.size_bytes", 0,
                                            BoundBy::kCount, 0};
inline constexpr FieldBound kTraceAllocAt{"gpuest.v1.AllocationTrace.alloc_at", 0,
                                          BoundBy::kTraceTicks, 0};
inline constexpr FieldBound kTraceFreeAt{"gpuest.v1.AllocationTrace.free_at", 0,
                                         BoundBy::kTraceTicks, 0};
// 0: not recorded (a describer before the field).
inline constexpr FieldBound kTraceBatchSize{"gpuest.v1.AllocationTrace.batch_size", 0,
                                            BoundBy::kBatchSize, 0};
inline constexpr FieldBound kModelBatchSize{"gpuest.v1.ModelDescription.batch_size", 1,
                                            BoundBy::kBatchSize, 0};
inline constexpr FieldBound kModelInputShape{"gpuest.v1.ModelDescription.input_shape", 1,
                                             BoundBy::kCount, 0};
inline constexpr FieldBound kModelSequenceLength{
    "gpuest.v1.ModelDescription.sequence_length", 0, BoundBy::kCount, 0};
// The largest layouts the per-rank rules are meant for (a cluster of 65,536 GPUs; a
// tensor-parallel group larger than a rack is not a thing), and a unit no larger than
// a GPU could hold.
inline constexpr FieldBound kDataParallel{"gpuest.v1.Parallelism.data_parallel", 0,
                                          BoundBy::kFixed, 65536};
inline constexpr FieldBound kTensorParallel{"gpuest.v1.Parallelism.tensor_parallel", 0,
                                            BoundBy::kFixed, 1024};
inline constexpr FieldBound kLargestUnitBytes{"gpuest.v1.Parallelism.largest_unit_bytes",
                                              0, BoundBy::kFixed,
                                              17592186044416.0};  // 2^44
// Above 2^40 MiB the byte count overflows (the 1..20 MiB that PyTorch refuses is a
// rule of its own in request validation).
inline constexpr FieldBound kMaxSplitSizeMb{
    "gpuest.v1.AllocatorSettings.max_split_size_mb", 0, BoundBy::kFixed,
    1099511627776.0};  // 2^40
// CUDA's major versions so far are 1-13; 0 is "not recorded".
inline constexpr FieldBound kStackCudaMajor{"gpuest.v1.SoftwareStack.cuda_major", 0,
                                            BoundBy::kFixed, 99};
inline constexpr FieldBound kFeaturesBatchSize{"gpuest.v1.FeatureVector.batch_size", 1,
                                               BoundBy::kBatchSize, 0};
inline constexpr FieldBound kFeaturesParameters{
    "gpuest.v1.FeatureVector.total_parameters", 0, BoundBy::kCount, 0};
inline constexpr FieldBound kFeaturesActivations{
    "gpuest.v1.FeatureVector.total_activations", 0, BoundBy::kCount, 0};
inline constexpr FieldBound kFeaturesDepth{"gpuest.v1.FeatureVector.depth", 0,
                                           BoundBy::kLayers, 0};
inline constexpr FieldBound kFeaturesSequenceLength{
    "gpuest.v1.FeatureVector.sequence_length", 0, BoundBy::kCount, 0};
inline constexpr FieldBound kFeaturesLayerCount{
    "gpuest.v1.FeatureVector.LayerCountsEntry.value", 0, BoundBy::kLayers, 0};
inline constexpr FieldBound kMeasuredMemory{"gpuest.v1.MeasuredJob.memory_in_use_bytes",
                                            1, BoundBy::kFixed, kMaxRequestBytes};
// Percent (nvidia-smi) at most; a DCGM source's fractions are held to 0..1 where the
// source is read (placement_job.cc).
inline constexpr FieldBound kMeasuredGpuUtil{"gpuest.v1.MeasuredJob.gpu_util", 0,
                                             BoundBy::kFixed, 100};
inline constexpr FieldBound kMeasuredMemUtil{"gpuest.v1.MeasuredJob.mem_util", 0,
                                             BoundBy::kFixed, 100};
inline constexpr FieldBound kEstimatedPeak{"gpuest.v1.EstimatedJob.peak_bytes", 1,
                                           BoundBy::kFixed, kMaxRequestBytes};
inline constexpr FieldBound kUtilBinEdges{"gpuest.v1.UtilizationEstimate.bin_edges", 0,
                                          BoundBy::kFixed, 1};
inline constexpr FieldBound kUtilProbabilities{
    "gpuest.v1.UtilizationEstimate.probabilities", 0, BoundBy::kFixed, 1};
// A class index into probabilities (at most kMaxUtilizationClasses of them).
inline constexpr FieldBound kUtilPredictedClass{
    "gpuest.v1.UtilizationEstimate.predicted_class", 0, BoundBy::kFixed, 63};
inline constexpr FieldBound kUtilConfidence{"gpuest.v1.UtilizationEstimate.confidence", 0,
                                            BoundBy::kFixed, 1};
inline constexpr FieldBound kNodeTotalBytes{"gpuest.v1.NodeReportedGpu.total_bytes", 1,
                                            BoundBy::kFixed, kMaxRequestBytes};
inline constexpr FieldBound kNodeFreeBytes{"gpuest.v1.NodeReportedGpu.free_bytes", 0,
                                           BoundBy::kFixed, kMaxRequestBytes};

// Every row, for the descriptor test and the docs.
const std::vector<FieldBound>& AllFieldBounds();
// The row of a full field name, or nullptr.
const FieldBound* FindFieldBound(absl::string_view field);

double UpperBound(const FieldBound& bound, const ValidationLimits& limits);

// Whether value is within its row: the cheap test for loops over many items, which
// build the field's path only when it fails.
inline bool InBounds(const FieldBound& bound, double value,
                     const ValidationLimits& limits) {
  return value >= bound.min && value <= UpperBound(bound, limits);  // NaN: false.
}

// OK, or INVALID_ARGUMENT "<path>: must be within [min, max], got <value>" (NaN and
// infinities are outside every row). Overloads print integers exactly.
absl::Status CheckField(const FieldBound& bound, int64_t value, absl::string_view path,
                        const ValidationLimits& limits = ValidationLimits{});
absl::Status CheckField(const FieldBound& bound, uint64_t value, absl::string_view path,
                        const ValidationLimits& limits = ValidationLimits{});
absl::Status CheckField(const FieldBound& bound, double value, absl::string_view path,
                        const ValidationLimits& limits = ValidationLimits{});

}  // namespace gpuest::core
