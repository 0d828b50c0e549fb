// File: model_set.h
//
// One set of models the server answers with: the estimator registry (estimators, GPU
// catalog, version) and the contention model, loaded together, with the Engine and
// PlacementEngine over them. Immutable: a reload builds a new set and swaps it in at
// once (server/model_lifecycle.h); a call takes the current set at its start and
// answers all of it from that one, however long it runs and whatever is reloaded
// meanwhile. The old set is freed when the last call holding it ends.
#pragma once

#include <memory>
#include <string>

#include "estimators/core/engine.h"
#include "estimators/core/request_validation.h"
#include "placement/contention_model.h"
#include "placement/placement_engine.h"

namespace gpuest::placement {

class ModelSet {
 public:
  ModelSet(std::shared_ptr<const core::EstimatorRegistry> registry,
           std::shared_ptr<const ContentionModel> contention,
           const core::ValidationLimits& limits)
      : engine_(std::move(registry), limits),
        placement_(engine_, std::move(contention)) {}
  ModelSet(const ModelSet&) = delete;  // placement_ refers to engine_.
  ModelSet& operator=(const ModelSet&) = delete;

  // The registry's version, which covers the contention model's bytes too.
  const std::string& version() const { return engine_.registry()->models_version(); }
  const core::EstimatorRegistry& registry() const { return *engine_.registry(); }
  const ContentionModel& contention() const { return placement_.contention(); }
  const core::Engine& engine() const { return engine_; }
  const PlacementEngine& placement() const { return placement_; }

 private:
  const core::Engine engine_;
  const PlacementEngine placement_;
};

// Where a call takes the set it answers with (the server's model lifecycle).
class ModelSetSource {
 public:
  virtual ~ModelSetSource() = default;
  // The set calls starting now answer with; hold it to the end of the call.
  virtual std::shared_ptr<const ModelSet> Current() const = 0;
};

}  // namespace gpuest::placement
