#include "server/model_lifecycle.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_family.h"
#include "estimators/default_factories.h"
#include "estimators/registry.h"
#include "estimators/status_macros.h"
#include "estimators/torch_device.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace gpuest {

ModelLifecycle::ModelLifecycle(const ModelOptions& options, std::string device,
                               Metrics& metrics,
                               std::shared_ptr<const EstimatorRegistry> registry,
                               const ValidationLimits& limits)
    : options_(options),
      device_(std::move(device)),
      metrics_(metrics),
      engine_(std::move(registry), limits) {}

absl::StatusOr<std::unique_ptr<ModelLifecycle>> ModelLifecycle::Create(
    const ModelOptions& options, const ValidationLimits& limits, Metrics& metrics) {
  GPUEST_ASSIGN_OR_RETURN(std::string device, ResolveDevice(options.device));
  GPUEST_ASSIGN_OR_RETURN(std::shared_ptr<const EstimatorRegistry> registry,
                          LoadSet(options, device));
  std::unique_ptr<ModelLifecycle> lifecycle(
      new ModelLifecycle(options, std::move(device), metrics, registry, limits));
  lifecycle->Announce(*registry);
  return lifecycle;
}

absl::StatusOr<std::shared_ptr<const EstimatorRegistry>> ModelLifecycle::LoadSet(
    const ModelOptions& options, const std::string& device) {
  RegistryOptions registry_options{options.directory, device};
  registry_options.factories = DefaultEstimatorFactories();
  GPUEST_ASSIGN_OR_RETURN(std::unique_ptr<EstimatorRegistry> registry,
                          EstimatorRegistry::Load(registry_options));
  return std::shared_ptr<const EstimatorRegistry>(std::move(registry));
}

void ModelLifecycle::Announce(const EstimatorRegistry& registry) {
  std::vector<std::string> ids;
  for (const auto& e : registry.estimators()) {
    const v1::EstimatorInfo& info = e->Info();
    ids.push_back(info.id());
    spdlog::info("loaded estimator {} (version {}, family {}) on {}", info.id(),
                 info.version(), FamilyName(info.family()), device_);
  }
  spdlog::info("model repository {}: version {}, {} estimators, {} GPU profiles",
               options_.directory, registry.models_version(), ids.size(),
               registry.gpus().All().size());
  metrics_.SetModels(registry.models_version(), ids);
}

ReloadOutcome ModelLifecycle::Reload() {
  absl::MutexLock lock(&reload_mu_);
  ReloadOutcome outcome;
  std::shared_ptr<const EstimatorRegistry> current = engine_.registry();
  outcome.old_models_version = current->models_version();
  spdlog::info("reloading models from {} (serving version {})", options_.directory,
               outcome.old_models_version);
  absl::StatusOr<std::shared_ptr<const EstimatorRegistry>> loaded =
      LoadSet(options_, device_);
  if (!loaded.ok()) {
    outcome.new_models_version = outcome.old_models_version;
    outcome.estimators = static_cast<int>(current->estimators().size());
    outcome.status = loaded.status();
    metrics_.ModelsReloaded(false);
    spdlog::error("model reload failed; still serving version {}: {}",
                  outcome.old_models_version, outcome.status.ToString());
    return outcome;
  }
  outcome.new_models_version = (*loaded)->models_version();
  outcome.estimators = static_cast<int>((*loaded)->estimators().size());
  // The old set is freed when the last call that started on it ends.
  engine_.ReplaceRegistry(*loaded);
  Announce(**loaded);
  metrics_.ModelsReloaded(true);
  spdlog::info("models reloaded: version {} -> {}", outcome.old_models_version,
               outcome.new_models_version);
  return outcome;
}

}  // namespace gpuest
