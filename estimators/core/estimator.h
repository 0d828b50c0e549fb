// File: estimator.h
//
// The interface every estimator implements, and what it is given. Estimators take
// plain messages in and give plain messages out: no gRPC here.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/work_deadline.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::core {

// One validated request, with what the engine already worked out from it.
struct EstimationInput {
  const v1::EstimateRequest& request;
  const v1::FeatureVector& features;  // FeaturesOf(request); family always resolved.
  const GpuProfile& gpu;              // Target GPU, the default when none was asked for.
  // Long work checks it and returns its status (DeadlineExceeded, Cancelled) to stop.
  const common::WorkDeadline& deadline = common::WorkDeadline::Never();
};

// A warning for the response; estimator_id is empty for the request as a whole.
inline v1::Warning MakeWarning(v1::WarningCode code, std::string message,
                               std::string estimator_id = "") {
  v1::Warning w;
  w.set_code(code);
  w.set_message(std::move(message));
  w.set_estimator_id(std::move(estimator_id));
  return w;
}

class Estimator {
 public:
  virtual ~Estimator() = default;

  // Id, kind, family, version and metrics; fixed for the estimator's lifetime.
  virtual const v1::EstimatorInfo& Info() const = 0;

  // Whether the estimator can answer this input at all (family, needs a trace, ...).
  virtual bool AppliesTo(const EstimationInput& input) const = 0;

  // Fills the memory and utilization parts of result (the engine fills id, version,
  // kind and latency), says whether the input is in the estimator's distribution
  // (result.in_distribution; the recommendation reads a result without it as out of
  // its distribution), and appends warnings about this input. Must be thread-safe.
  // Work that can run long checks input.deadline and returns its status when it fails.
  virtual absl::Status Estimate(const EstimationInput& input, v1::EstimatorResult& result,
                                std::vector<v1::Warning>& warnings) const = 0;

  // Where Estimate computes: libtorch's device for the ML ensembles ("cpu", "cuda");
  // plain C++ runs on the CPU. ListEstimators, the log and /metrics report it.
  virtual std::string Device() const { return "cpu"; }
};

}  // namespace gpuest::core
