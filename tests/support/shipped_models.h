// File: shipped_models.h
//
// The repository's models/ loaded as gpuest-server loads them (server/model_lifecycle.cc:
// one scan, the contention model and the registry with the default factories, on the
// CPU), as the model set an in-process service, extender or webhook answers with.
#pragma once

#include <memory>

#include "placement/model_set.h"

namespace gpuest::testing {

// Loaded once per process; aborts the test binary when models/ does not load, since
// every test using it relies on it.
std::shared_ptr<const placement::ModelSet> ShippedModelSet();

// A source that always answers the same set.
class FixedModels final : public placement::ModelSetSource {
 public:
  explicit FixedModels(std::shared_ptr<const placement::ModelSet> set)
      : set_(std::move(set)) {}
  std::shared_ptr<const placement::ModelSet> Current() const override { return set_; }

 private:
  std::shared_ptr<const placement::ModelSet> set_;
};

}  // namespace gpuest::testing
