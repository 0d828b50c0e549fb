#include "server/model_lifecycle.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "estimators/core/model_repository.h"
#include "estimators/core/registry.h"
#include "estimators/core/torch_device.h"
#include "estimators/default_factories.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {

ModelLifecycle::ModelLifecycle(const ModelOptions& options, std::string device,
                               Metrics& metrics, const core::ValidationLimits& limits,
                               std::shared_ptr<const placement::ModelSet> set)
    : options_(options),
      device_(std::move(device)),
      limits_(limits),
      metrics_(metrics),
      current_(std::move(set)) {}

absl::StatusOr<std::unique_ptr<ModelLifecycle>> ModelLifecycle::Create(
    const ModelOptions& options, const core::ValidationLimits& limits, Metrics& metrics) {
  GPUEST_ASSIGN_OR_RETURN(std::string device, core::ResolveDevice(options.device));
  GPUEST_ASSIGN_OR_RETURN(std::shared_ptr<const placement::ModelSet> set,
                          LoadSet(options, device, limits));
  std::unique_ptr<ModelLifecycle> lifecycle(
      new ModelLifecycle(options, std::move(device), metrics, limits, set));
  lifecycle->Announce(*set);
  return lifecycle;
}

std::shared_ptr<const placement::ModelSet> ModelLifecycle::Current() const {
  absl::MutexLock lock(&current_mu_);
  return current_;
}

absl::StatusOr<std::shared_ptr<const placement::ModelSet>> ModelLifecycle::LoadSet(
    const ModelOptions& options, const std::string& device,
    const core::ValidationLimits& limits) {
  // One scan: the registry and the contention model are loaded from the bytes the
  // version is computed from.
  GPUEST_ASSIGN_OR_RETURN(const core::ModelRepositoryContents contents,
                          core::ScanModelRepository(options.directory));
  if (!contents.contention_text) {
    return absl::NotFoundError(absl::StrCat("cannot read ", contents.contention_path,
                                            " (the placement's contention model)"));
  }
  GPUEST_ASSIGN_OR_RETURN(placement::ContentionModel contention,
                          placement::ContentionModel::Parse(*contents.contention_text,
                                                            contents.contention_path));
  const core::RegistryOptions registry_options =
      estimators::WithDefaultFactories({options.directory, device});
  GPUEST_ASSIGN_OR_RETURN(std::unique_ptr<core::EstimatorRegistry> registry,
                          core::EstimatorRegistry::Load(contents, registry_options));
  return std::make_shared<const placement::ModelSet>(
      std::move(registry),
      std::make_shared<const placement::ContentionModel>(std::move(contention)), limits);
}

void ModelLifecycle::Announce(const placement::ModelSet& set) {
  const core::EstimatorRegistry& registry = set.registry();
  std::vector<ServedEstimator> served;
  for (const auto& e : registry.estimators()) {
    const v1::EstimatorInfo& info = e->Info();
    served.push_back({info.id(), e->Device()});
    spdlog::info("loaded estimator {} (version {}, family {}) on {}", info.id(),
                 info.version(), common::FamilyName(info.family()), served.back().device);
  }
  spdlog::info("model repository {}: version {}, {} estimators, {} GPU profiles",
               options_.directory, registry.models_version(), served.size(),
               registry.gpus().All().size());
  spdlog::info("contention model {} from {}", set.contention().version,
               core::ContentionModelPath(options_.directory));
  metrics_.SetModels(registry.models_version(), served);
}

ReloadOutcome ModelLifecycle::Reload() {
  absl::MutexLock lock(&reload_mu_);
  ReloadOutcome outcome;
  const std::shared_ptr<const placement::ModelSet> current = Current();
  outcome.old_models_version = current->version();
  spdlog::info("reloading models from {} (serving version {})", options_.directory,
               outcome.old_models_version);
  absl::StatusOr<std::shared_ptr<const placement::ModelSet>> loaded =
      LoadSet(options_, device_, limits_);
  if (!loaded.ok()) {
    outcome.new_models_version = outcome.old_models_version;
    outcome.estimators = static_cast<int>(current->registry().estimators().size());
    outcome.status = loaded.status();
    metrics_.ModelsReloaded(false);
    spdlog::error("model reload failed; still serving version {}: {}",
                  outcome.old_models_version, outcome.status.ToString());
    return outcome;
  }
  const placement::ModelSet& set = **loaded;
  outcome.new_models_version = set.version();
  outcome.estimators = static_cast<int>(set.registry().estimators().size());
  {
    // One pointer: every call from now on takes the whole new set; the old set is
    // freed when the last call that took it ends.
    absl::MutexLock lock(&current_mu_);
    current_ = *loaded;
  }
  Announce(set);
  metrics_.ModelsReloaded(true);
  spdlog::info("models reloaded: version {} -> {} (contention model {} -> {})",
               outcome.old_models_version, outcome.new_models_version,
               current->contention().version, set.contention().version);
  return outcome;
}

}  // namespace gpuest::server
