// File: model_lifecycle.h
//
// The model set the server answers with (placement/model_set.h: the estimators, GPU
// profiles and contention model), loaded at start, replaced on a reload (SIGHUP, the
// Admin RPC) by swapping one pointer. Finding and reading the files is the
// model repository's job (estimators/core/model_repository.h), verifying each model its
// loader's (sha256 against the manifest, finite outputs on a probe input; the
// contention model's keys and values); this file loads the whole set, makes it the one
// every new call takes (one shared_ptr swapped; a call in flight keeps the set it took),
// and reports each reload in the log and the metrics. A set that fails to load in any
// part is never served.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "placement/model_set.h"
#include "server/options.h"

namespace gpuest::server {

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

class ModelLifecycle final : public placement::ModelSetSource {
 public:
  // Loads the models of options.directory onto options.device (resolved here, once:
  // a reload uses the same device). An error names what is wrong; metrics must
  // outlive the object.
  static absl::StatusOr<std::unique_ptr<ModelLifecycle>> Create(
      const ModelOptions& options, const core::ValidationLimits& limits,
      Metrics& metrics);

  std::shared_ptr<const placement::ModelSet> Current() const override;

  // Loads every model of the directory again and, when the whole set loads, swaps it
  // in; calls in flight finish on the set they started with. One reload at a time: a
  // second waits for the first. Logged, and counted in gpuest_model_reloads_total.
  ReloadOutcome Reload();

 private:
  ModelLifecycle(const ModelOptions& options, std::string device, Metrics& metrics,
                 const core::ValidationLimits& limits,
                 std::shared_ptr<const placement::ModelSet> set);

  // One scan of the repository, loaded and verified; nothing serves it yet. Its
  // version (the registry's) covers the contention model's bytes too.
  static absl::StatusOr<std::shared_ptr<const placement::ModelSet>> LoadSet(
      const ModelOptions& options, const std::string& device,
      const core::ValidationLimits& limits);
  // Puts the set's version, estimators and contention model into the log and the
  // metrics.
  void Announce(const placement::ModelSet& set);

  const ModelOptions options_;
  const std::string device_;
  const core::ValidationLimits limits_;
  Metrics& metrics_;
  absl::Mutex reload_mu_;  // Held for a whole reload: one at a time.
  mutable absl::Mutex current_mu_;
  std::shared_ptr<const placement::ModelSet> current_ ABSL_GUARDED_BY(current_mu_);
};

}  // namespace gpuest::server
