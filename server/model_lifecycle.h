// File: model_lifecycle.h
//
// The model set the server answers with: the estimators and GPU profiles (the
// engine's registry) and the contention model (the placement's), loaded at start,
// replaced on a reload (SIGHUP, the Admin RPC). Finding and reading the files is the
// model repository's job (estimators/model_repository.h), verifying each model its
// loader's (sha256 against the manifest, finite outputs on a probe input; the
// contention model's keys and values); this file loads the whole set, swaps it into
// the engine and the placement, and reports each reload in the log and the metrics. A
// set that fails to load in any part is never served.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "estimators/engine.h"
#include "placement/contention_model.h"
#include "placement/placement_engine.h"
#include "server/options.h"

namespace gpuest {

class Metrics;

// What one reload did.
struct ReloadOutcome {
  std::string old_models_version;
  // The version served after the reload: the old one when status is not OK.
  std::string new_models_version;
  int estimators = 0;  // In the set served after the reload.
  // Why the new set was refused (naming the file); the old set still serves.
  absl::Status status;
};

class ModelLifecycle {
 public:
  // Loads the models of options.directory onto options.device (resolved here, once:
  // a reload uses the same device). An error names what is wrong; metrics must
  // outlive the object.
  static absl::StatusOr<std::unique_ptr<ModelLifecycle>> Create(
      const ModelOptions& options, const ValidationLimits& limits, Metrics& metrics);

  // The engine and the placement every call answers with; they outlive the reloads.
  const Engine& engine() const { return engine_; }
  const PlacementEngine& placement() const { return placement_; }

  // Loads every model of the directory again and, when the whole set loads, swaps it
  // in; calls in flight finish on the set they started with. One reload at a time: a
  // second waits for the first. Logged, and counted in gpuest_model_reloads_total.
  ReloadOutcome Reload();

 private:
  ModelLifecycle(const ModelOptions& options, std::string device, Metrics& metrics,
                 const PlacementModels& set, const ValidationLimits& limits);

  // One scan of the repository, loaded and verified; nothing serves it yet. Its
  // version (the registry's) covers the contention model's bytes too.
  static absl::StatusOr<PlacementModels> LoadSet(const ModelOptions& options,
                                                 const std::string& device);
  // Puts the set's version, estimators and contention model into the log and the
  // metrics.
  void Announce(const PlacementModels& set);

  const ModelOptions options_;
  const std::string device_;
  Metrics& metrics_;
  Engine engine_;
  PlacementEngine placement_;  // Refers to engine_.
  absl::Mutex reload_mu_;      // Held for a whole reload: one at a time.
};

}  // namespace gpuest
