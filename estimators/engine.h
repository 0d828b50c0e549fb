// File: engine.h
//
// Answers one EstimateRequest with every applicable estimator of a registry:
// validation, feature extraction, estimator choice, warnings and the recommendation.
// The gRPC service is a thin shell around it; tests and benchmarks call it directly.
//
// The registry can be replaced while calls run (the server's model reload): each call
// answers with the registry it started with, which lives until the last such call ends.
#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "estimators/registry.h"
#include "estimators/validation.h"
#include "estimators/work_deadline.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest {

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
      const WorkDeadline& deadline = WorkDeadline::Never()) const;
  // The same with a registry the caller took (registry()) and holds: a caller that
  // estimates several times within one answer (a placement) answers all of it with the
  // same models, even if a reload replaces them meanwhile.
  absl::StatusOr<v1::EstimateResponse> Estimate(const EstimatorRegistry& registry,
                                                const v1::EstimateRequest& request,
                                                const WorkDeadline& deadline) const;

  v1::ListEstimatorsResponse ListEstimators() const;

  // The registry that calls starting now answer with.
  std::shared_ptr<const EstimatorRegistry> registry() const;

  // Calls that start from now on answer with this registry; calls in flight finish on
  // the one they started with. Returns the registry it replaces.
  std::shared_ptr<const EstimatorRegistry> ReplaceRegistry(
      std::shared_ptr<const EstimatorRegistry> registry);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const EstimatorRegistry> registry_ ABSL_GUARDED_BY(mu_);
  const ValidationLimits limits_;
};

}  // namespace gpuest
