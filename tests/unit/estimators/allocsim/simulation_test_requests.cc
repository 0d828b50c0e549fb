#include "tests/unit/estimators/allocsim/simulation_test_requests.h"

#include "absl/strings/str_cat.h"
#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/core/features.h"

namespace gpuest::allocsim::test_requests {

core::GpuProfile Card(uint64_t memory_mib, bool calibrated) {
  core::GpuProfile gpu;
  gpu.id = "card";
  gpu.memory_bytes = memory_mib * MiB;
  gpu.context_bytes = 1000 * MiB;
  gpu.cublas_workspace_bytes = kDefaultCublasWorkspaceBytes;
  gpu.constants_calibrated = calibrated;
  gpu.constants_basis = "measured on a test card";
  return gpu;
}

std::string DefaultMlpTerms() {
  return R"("intercept_mib": 100,
  "safe_factor": 1.5, "point_intercept_mib": 100, "point_factor": 1.1,
  "held_out_rows": 10, "held_out_mape": 5.0, "held_out_safe": 1.0,
  "held_out_safe_and_tight": 0.9)";
}

std::string Manifest(const std::string& source, const std::string& mlp_terms) {
  return absl::StrCat(R"({"estimator_type": "allocsim", "id": "sim", "version": "1",
  "trace_source": ")",
                      source, R"(", "description": "a test simulator",
  "made_by": "simulation_estimator_test", "calibration": {"gpu": "card",
  "context_mib": 1000.0, "steps": 2, "safe_quantile": 0.95, "families": {"mlp": {)",
                      mlp_terms, R"(, "datasets": []}}}})");
}

absl::StatusOr<std::unique_ptr<core::Estimator>> Create(const std::string& manifest) {
  return CreateSimulationEstimator({"sim", "/models/sim", manifest, {}}, {});
}

v1::EstimateRequest RequestFor(const char* name, v1::ModelFamily family, int64_t batch,
                               int64_t input) {
  v1::EstimateRequest r;
  v1::ModelDescription& m = *r.mutable_model();
  m.set_name(name);
  m.set_family(family);
  m.set_batch_size(batch);
  m.add_input_shape(input);
  return r;
}

void AddLayer(v1::ModelDescription& m, const char* type, int64_t outputs,
              int64_t parameters) {
  v1::Layer& l = *m.add_layers();
  l.set_type(type);
  l.set_output_activations(outputs);
  l.set_parameters(parameters);
}

v1::EstimateRequest MlpRequest(bool with_trace) {
  v1::EstimateRequest r = RequestFor("mlp", v1::MODEL_FAMILY_MLP, 64, 1024);
  v1::ModelDescription& m = *r.mutable_model();
  for (int i = 0; i < 3; ++i) {
    AddLayer(m, "Linear", 1024, 1024 * 1024 + 1024);
    AddLayer(m, "ReLU", 1024, 0);
  }
  if (with_trace) *m.mutable_trace() = TraceFromLayers(m);
  return r;
}

Outcome EstimateWith(const core::Estimator& e, const v1::EstimateRequest& request,
                     const core::GpuProfile& gpu) {
  const v1::FeatureVector features = core::FeaturesOf(request);
  Outcome run;
  run.status = e.Estimate({request, features, gpu}, run.result, run.warnings);
  return run;
}

uint64_t Sum(const v1::MemoryBreakdown& b) {
  return b.weights_bytes() + b.gradients_bytes() + b.optimizer_state_bytes() +
         b.inputs_bytes() + b.activations_bytes() + b.temporaries_bytes() +
         b.fragmentation_bytes() + b.context_bytes() + b.calibration_bytes() +
         b.workspaces_bytes() + b.uncertain_layers_bytes();
}

bool HasWarning(const Outcome& run, v1::WarningCode code) {
  for (const v1::Warning& w : run.warnings) {
    if (w.code() == code) return true;
  }
  return false;
}

}  // namespace gpuest::allocsim::test_requests
