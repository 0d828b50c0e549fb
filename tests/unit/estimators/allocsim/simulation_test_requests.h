// The simulation's tests' shared steps (simulation_estimator_test, memory_model_test,
// estimators/core's stack_context_test): a test card, a manifest like the ones
// gpuest-calibrate-memory writes, an MLP's request with its trace, and an estimate's
// outcome with its warnings.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "estimators/core/estimator.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::allocsim::test_requests {

inline constexpr uint64_t MiB = 1024 * 1024;

// A card of memory_mib with a 1,000 MiB context and the default cuBLAS workspace.
core::GpuProfile Card(uint64_t memory_mib, bool calibrated = true);

// The mlp family's terms Manifest writes unless told others.
std::string DefaultMlpTerms();

// A manifest like the ones gpuest-calibrate-memory writes (every key it must have).
std::string Manifest(const std::string& source,
                     const std::string& mlp_terms = DefaultMlpTerms());

absl::StatusOr<std::unique_ptr<core::Estimator>> Create(const std::string& manifest);

// A request for a model of the family with one input of `input` elements per sample.
v1::EstimateRequest RequestFor(const char* name, v1::ModelFamily family, int64_t batch,
                               int64_t input);

void AddLayer(v1::ModelDescription& m, const char* type, int64_t outputs,
              int64_t parameters);

// An MLP of three 1024-wide layers at batch 64, with a trace built from its layers.
v1::EstimateRequest MlpRequest(bool with_trace);

struct Outcome {
  v1::EstimatorResult result;
  std::vector<v1::Warning> warnings;
  absl::Status status;
};

Outcome EstimateWith(const core::Estimator& e, const v1::EstimateRequest& request,
                     const core::GpuProfile& gpu);

// The breakdown's parts added up.
uint64_t Sum(const v1::MemoryBreakdown& b);

bool HasWarning(const Outcome& run, v1::WarningCode code);

}  // namespace gpuest::allocsim::test_requests
