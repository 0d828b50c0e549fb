// File: recommendation.h
//
// The one placement figure a response recommends, chosen by a conservative rule: an
// OOM costs a whole job, an over-reservation a little packing.
//
// Rule: each memory result's safe figure is its upper bound when it gives one, else its
// point estimate. Results are trusted by kind, simulator over classifier over formula;
// among the results of the most trusted kind present, the largest safe figure wins.
// A result whose estimator said the request is out of its training distribution (or,
// for a simulator, that no measurements calibrate the family) is trusted no more than
// a formula: it competes with the formulas, never outranks them.
//
// The simulators (allocsim on the request's trace, analytic on its layers) give as
// upper bound the figure their calibration keeps safe on 95 % of the measured training
// rows; when both answer, the larger wins.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "estimators/gpu_profiles.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest {

// nullopt when no result estimated memory. gpu, when given, adds the fit.
// out_of_distribution: ids of estimators that warned OUT_OF_DISTRIBUTION or
// UNCALIBRATED_FAMILY.
std::optional<v1::Recommendation> Recommend(
    const google::protobuf::RepeatedPtrField<v1::EstimatorResult>& results,
    const GpuProfile* gpu, const std::set<std::string>& out_of_distribution = {});

}  // namespace gpuest
