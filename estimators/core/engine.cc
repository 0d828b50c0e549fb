#include "estimators/core/engine.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "estimators/core/features.h"
#include "estimators/core/recommendation.h"
#include "requests/trace_batch.h"

namespace gpuest::core {

namespace {

// The GPU the request names, or the registry's default.
absl::StatusOr<const GpuProfile*> ChooseGpu(const EstimatorRegistry& registry,
                                            const v1::EstimateRequest& request) {
  const GpuProfile* gpu = &registry.gpus().Default();
  if (!request.gpu().empty()) {
    gpu = registry.gpus().Find(request.gpu());
    if (gpu == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gpu: unknown GPU '", request.gpu(), "'; known: ", registry.gpus().KnownIds()));
    }
  }
  return gpu;
}

// The estimators the request names, in its order; every one of the registry's where
// it names none.
absl::StatusOr<std::vector<const Estimator*>> ChooseEstimators(
    const EstimatorRegistry& registry, const v1::EstimateRequest& request) {
  std::vector<const Estimator*> chosen;
  for (int i = 0; i < request.estimators_size(); ++i) {
    const Estimator* e = registry.Find(request.estimators(i));
    if (e == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "estimators[", i, "]: unknown estimator '", request.estimators(i), "'"));
    }
    chosen.push_back(e);
  }
  if (chosen.empty()) {
    for (const auto& e : registry.estimators()) chosen.push_back(e.get());
  }
  return chosen;
}

// The warnings about the request as a whole: layer types no estimator was built for,
// a trace whose batch was not recorded, the trace's own caveats.
std::vector<v1::Warning> RequestWarnings(const v1::EstimateRequest& request,
                                         const v1::FeatureVector& features) {
  std::vector<v1::Warning> warnings;
  if (const auto unknown = UnknownLayerTypes(features); !unknown.empty()) {
    warnings.push_back(MakeWarning(
        v1::WARNING_CODE_UNKNOWN_LAYER_TYPE,
        absl::StrCat(
            "layer types no estimator was built for: ", absl::StrJoin(unknown, ", "),
            "; estimates treat them by their totals only")));
  }

  if (std::string words = requests::UnrecordedTraceBatchWords(request.model());
      !words.empty()) {
    warnings.push_back(
        MakeWarning(v1::WARNING_CODE_TRACE_BATCH_UNRECORDED, std::move(words)));
  }
  for (const std::string& caveat : request.model().trace_caveats()) {
    warnings.push_back(MakeWarning(v1::WARNING_CODE_TRACE_CAVEAT,
                                   absl::StrCat("the description's trace: ", caveat)));
  }
  return warnings;
}

// One estimator's answer into response, or a warning why there is none (one that does
// not apply is said only where the request named it). Only work stopped by the
// deadline or the caller fails the call.
absl::Status RunEstimator(const Estimator& estimator, const EstimationInput& input,
                          bool explicit_choice, v1::EstimateResponse& response,
                          std::vector<v1::Warning>& warnings) {
  const v1::EstimatorInfo& info = estimator.Info();
  if (!estimator.AppliesTo(input)) {
    if (explicit_choice) {
      warnings.push_back(
          MakeWarning(v1::WARNING_CODE_NOT_APPLICABLE,
                      absl::StrCat("estimator does not apply to a ",
                                   common::FamilyName(input.features.family()), " model",
                                   input.request.has_model() ? "" : " given as features"),
                      info.id()));
    }
    return absl::OkStatus();
  }
  GPUEST_RETURN_IF_ERROR(input.deadline.Check());
  v1::EstimatorResult result;
  const absl::Time start = absl::Now();
  absl::Status status = estimator.Estimate(input, result, warnings);
  if (common::StoppedByCaller(status)) return status;
  if (!status.ok()) {
    warnings.push_back(MakeWarning(v1::WARNING_CODE_ESTIMATOR_FAILED,
                                   std::string(status.message()), info.id()));
    return absl::OkStatus();
  }
  result.set_estimator_id(info.id());
  result.set_version(info.version());
  result.set_kind(info.kind());
  result.set_latency_us(absl::ToInt64Microseconds(absl::Now() - start));
  // An estimator that did not say stands behind nothing: the conservative reading,
  // written out so that every result carries it.
  if (!result.has_in_distribution()) result.set_in_distribution(false);
  *response.add_results() = std::move(result);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::EstimateResponse> Engine::Estimate(
    const v1::EstimateRequest& request, const common::WorkDeadline& deadline) const {
  const EstimatorRegistry& registry = *registry_;
  GPUEST_RETURN_IF_ERROR(ValidateRequest(request, limits_));
  GPUEST_ASSIGN_OR_RETURN(const GpuProfile* const gpu, ChooseGpu(registry, request));
  GPUEST_ASSIGN_OR_RETURN(const std::vector<const Estimator*> chosen,
                          ChooseEstimators(registry, request));
  const bool explicit_choice = request.estimators_size() > 0;

  const v1::FeatureVector features = FeaturesOf(request);
  const EstimationInput input{request, features, *gpu, deadline};
  v1::EstimateResponse response;
  response.set_family(features.family());
  response.set_models_version(registry.models_version());
  std::vector<v1::Warning> warnings = RequestWarnings(request, features);
  for (const Estimator* estimator : chosen) {
    GPUEST_RETURN_IF_ERROR(
        RunEstimator(*estimator, input, explicit_choice, response, warnings));
  }
  if (response.results().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no estimator could answer: ",
        warnings.empty() ? "none applies to this request" : warnings.back().message()));
  }
  if (auto rec = Recommend(response.results(), request.gpu().empty() ? nullptr : gpu)) {
    *response.mutable_recommendation() = std::move(*rec);
  }
  for (auto& w : warnings) *response.add_warnings() = std::move(w);
  return response;
}

v1::ListEstimatorsResponse Engine::ListEstimators() const {
  v1::ListEstimatorsResponse response;
  for (const auto& e : registry_->estimators()) {
    v1::EstimatorInfo& info = *response.add_estimators();
    info = e->Info();
    info.set_device(e->Device());
  }
  response.set_models_version(registry_->models_version());
  return response;
}

}  // namespace gpuest::core
