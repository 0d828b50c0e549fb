#include "tests/support/shipped_models.h"

#include <cstdlib>
#include <iostream>

#include "estimators/core/model_repository.h"
#include "estimators/core/registry.h"
#include "estimators/core/request_validation.h"
#include "estimators/default_factories.h"
#include "placement/contention_model.h"

namespace gpuest::testing {
namespace {

std::shared_ptr<const placement::ModelSet> Load() {
  absl::StatusOr<core::ModelRepositoryContents> contents =
      core::ScanModelRepository(GPUEST_MODELS_DIR);
  if (!contents.ok() || !contents->contention_text) {
    std::cerr << "cannot scan " << GPUEST_MODELS_DIR << ": " << contents.status() << "\n";
    std::abort();
  }
  absl::StatusOr<placement::ContentionModel> contention =
      placement::ContentionModel::Parse(*contents->contention_text,
                                        contents->contention_path);
  absl::StatusOr<std::unique_ptr<core::EstimatorRegistry>> registry =
      core::EstimatorRegistry::Load(
          *contents, estimators::WithDefaultFactories({GPUEST_MODELS_DIR, "cpu"}));
  if (!contention.ok() || !registry.ok()) {
    std::cerr << "cannot load " << GPUEST_MODELS_DIR << ": " << contention.status()
              << "; " << registry.status() << "\n";
    std::abort();
  }
  return std::make_shared<const placement::ModelSet>(
      *std::move(registry),
      std::make_shared<const placement::ContentionModel>(*std::move(contention)),
      core::ValidationLimits{});
}

}  // namespace

std::shared_ptr<const placement::ModelSet> ShippedModelSet() {
  static const auto* set = new std::shared_ptr<const placement::ModelSet>(Load());
  return *set;
}

}  // namespace gpuest::testing
