// File: train.h
//
// Training and prediction of one ensemble member. The interface is torch-free; the
// implementation (train.cc) is the trainer's libtorch door.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/gpumemnet/network_config.h"

namespace gpuest::trainer {

// Encoded examples, the network's input and targets.
struct EncodedSet {
  int global_dim = 0;
  std::vector<float> global;  // [n][global_dim], row-major.
  // Transformer-based only: per example, token types and 2 numbers per token.
  std::vector<std::vector<int64_t>> types;
  std::vector<std::vector<float>> numbers;
  // [n][head]: the class, or -100 where the target was not measured.
  std::vector<std::vector<int64_t>> labels;
  int size() const { return static_cast<int>(labels.size()); }
};

struct MemberSpec {
  gpumemnet::NetworkConfig network;
  double learning_rate = 1e-3;
  double weight_decay = 1e-5;
  int epochs = 100;
  int batch_size = 64;
  uint64_t seed = 0;
};

// A trained network (opaque: its module lives behind the libtorch door).
struct TrainedMemberImpl;
struct TrainedMember {
  std::shared_ptr<TrainedMemberImpl> impl;
  double final_loss = 0;
};

using Progress = std::function<void(int epoch, double mean_loss)>;

// Cross-entropy summed over heads, Adam, cosine learning-rate decay; deterministic for
// a seed on the CPU with one thread.
absl::StatusOr<TrainedMember> TrainMember(const EncodedSet& data, const MemberSpec& spec,
                                          const Progress& progress);

// Probabilities [n][total classes], softmax per head (NetworkConfig::head_classes).
absl::StatusOr<std::vector<std::vector<float>>> Predict(const TrainedMember& member,
                                                        const EncodedSet& data);

// torch::save of the module; the served estimator rebuilds it from its NetworkConfig.
absl::Status SaveMember(const TrainedMember& member, const std::string& path);

// One intra-op thread, for determinism (call once at start).
void UseOneThread();

}  // namespace gpuest::trainer
