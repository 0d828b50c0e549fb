// File: engine.h
//
// Answers one EstimateRequest with every applicable estimator of a registry:
// validation, feature extraction, estimator choice, warnings and the recommendation.
// The gRPC service is a thin shell around it; tests and benchmarks call it directly.
//
// An Engine is immutable and answers with its one registry. The server's model reload
// does not change an Engine: it builds a new model set (placement/model_set.h) around
// the new registry, and each call answers with the set it took at its start.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/work_deadline.h"
#include "estimators/core/registry.h"
#include "estimators/core/request_validation.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::core {

class Engine {
 public:
  Engine(std::shared_ptr<const EstimatorRegistry> registry, ValidationLimits limits)
      : registry_(std::move(registry)), limits_(limits) {}

  // InvalidArgument names the offending field; FailedPrecondition when no requested
  // estimator applies. Each result carries its own latency; server_latency_us is left
  // for the caller, who knows when the request arrived. Work stopped by the deadline
  // (or the caller) is the request's outcome: DeadlineExceeded or Cancelled, never a
  // partial answer.
  absl::StatusOr<v1::EstimateResponse> Estimate(
      const v1::EstimateRequest& request,
      const common::WorkDeadline& deadline = common::WorkDeadline::Never()) const;

  v1::ListEstimatorsResponse ListEstimators() const;

  // The registry every call answers with.
  const std::shared_ptr<const EstimatorRegistry>& registry() const { return registry_; }

 private:
  const std::shared_ptr<const EstimatorRegistry> registry_;
  const ValidationLimits limits_;
};

}  // namespace gpuest::core
