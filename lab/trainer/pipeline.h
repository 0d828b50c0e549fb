// File: pipeline.h
//
// What gpuest-train does for one family: targets, the stratified held-out split,
// cross-validation on the training part, the final ensembles, their evaluation on the
// held-out part, and the artifacts (models/gpumemnet-<family>-<kind>/: member weights
// and manifest.json with everything the report needs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "estimators/gpumemnet/network_config.h"
#include "lab/data/dataset.h"
#include "lab/trainer/split.h"

namespace gpuest::trainer {

constexpr char kTrainerVersion[] = "gpuest-train 0.1.0";

struct PipelineOptions {
  std::string out_dir = "models";
  std::vector<gpumemnet::NetworkKind> kinds = {gpumemnet::NetworkKind::kMlp,
                                               gpumemnet::NetworkKind::kTransformer};
  uint64_t seed = 2025;
  double test_fraction = 0.3;
  int folds = 3;
  int members = 5;
  int mlp_epochs = 150;
  int transformer_epochs = 30;
  // A few hundred rows, two epochs: proves the pipeline, not a shipped model.
  bool smoke = false;
  int smoke_rows = 300;
};

absl::Status TrainFamily(const data::Dataset& data, const PipelineOptions& options);

// The held-out split of a dataset's examples, stratified on the coarsest memory class
// (the > 40 GiB class included), exactly as TrainFamily makes it. Other evaluations
// (the allocator simulation's validation) use it to score on the same unseen rows.
Split HeldOutSplit(const data::Dataset& data, double test_fraction, uint64_t seed);

}  // namespace gpuest::trainer
