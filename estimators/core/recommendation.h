// File: recommendation.h
//
// The one placement figure a response recommends, chosen by a conservative rule: an
// OOM costs a whole job, an over-reservation a little packing.
//
// Rule: each memory result's safe figure is its upper bound when it gives one, else its
// point estimate. Results are trusted by what they rest on, in this order:
//   1. a simulator in its distribution (calibrated on measurements of the family),
//   2. a classifier in its distribution (within its training range),
//   3. a simulator out of its distribution (no measurements of the family: it uses the
//      most conservative family's calibration),
//   4. a classifier out of its distribution,
//   5. a formula, in or out of its distribution.
// Among the results of the most trusted rank present, the largest safe figure wins. A
// formula never outranks a model-based estimate: a simulator replays the job's own
// allocations and a classifier was fitted on measurements, while a formula (Horus:
// 4 x (A x B + P + B x P)) counts parameters and activations by a fixed rule, blind to
// the allocator and the CUDA context. An EstimatorResult without in_distribution reads
// as out of it.
//
// The simulators (allocsim on the request's trace, analytic on its layers) give as
// upper bound the figure their calibration keeps safe on 95 % of the measured training
// rows; when both answer, the larger wins.
//
// With a target GPU, the fit compares the recommended figure with the card's capacity
// (fits: recommended <= capacity, never relaxed by the allocator's retries) and carries
// the recommended estimator's AllocatorRetry verdict when it gives one.
#pragma once

#include <optional>

#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::core {

// nullopt when no result estimated memory. gpu, when given, adds the fit.
std::optional<v1::Recommendation> Recommend(
    const google::protobuf::RepeatedPtrField<v1::EstimatorResult>& results,
    const GpuProfile* gpu);

}  // namespace gpuest::core
