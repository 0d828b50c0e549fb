// File: gpumemnet_manifest.h
//
// The manifest of a GPUMemNet / GPUUtilNet ensemble (models/gpumemnet-<family>-<kind>/
// manifest.json) as one type: gpuest-train writes it, the served estimator and the
// accuracy report read it. Every key of the file is read and written here or in the
// parts' own types (HeadSpec in targets.h, EncodingSpec in feature_encoding.h,
// NetworkConfig in network_config.h). Torch-free.
//
// Every key the trainer writes is required; "role" of a dataset is optional. The file
// is JSON with sorted keys (nlohmann::json), one-space indent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/core/manifest_json.h"
#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/targets.h"
#include "nlohmann/json.hpp"

namespace gpuest::gpumemnet {

// One trained network of the ensemble and how it was trained.
struct MemberRecord {
  std::string file;  // Its weights, beside the manifest ("member-0.pt").
  std::string sha256;
  uint64_t seed = 0;
  double learning_rate = 0;
  double weight_decay = 0;
  int epochs = 0;
  int batch_size = 0;
  std::string optimizer;  // In words.
  NetworkConfig network;
  double test_accuracy_coarsest_memory = 0;  // Alone, on the held-out split.
};

struct CrossValidationScores {
  double accuracy_mean = 0, accuracy_std = 0;
  double macro_f1_mean = 0, macro_f1_std = 0;
  std::vector<double> accuracy_per_fold;
};

struct TestScores {
  double accuracy = 0;
  double macro_f1 = 0;
  int n = 0;  // Held-out rows with a label for the head.
};

struct DroppedRows {
  std::string reason;
  int64_t rows = 0;
};

struct TrainingRecord {
  bool smoke = false;  // A smoke run: proves the pipeline, not a shipped model.
  struct Split {
    double test_fraction = 0;
    uint64_t seed = 0;
    std::string stratified_on;
    int64_t train_rows = 0, test_rows = 0;
  } split;
  struct CrossValidation {
    int folds = 0;
    uint64_t seed = 0;
    std::string on;
    std::map<std::string, CrossValidationScores> heads;  // By head name.
  } cross_validation;
  std::map<std::string, TestScores> test;  // By head name.
  struct Rows {
    int64_t read = 0, used = 0, oom_crash = 0;
    std::vector<DroppedRows> dropped;
  } rows;
  double seconds = 0;
};

struct GpuMemNetManifest {
  static constexpr char kEstimatorType[] = "gpumemnet";

  std::string id;       // "gpumemnet-cnn-mlp"
  std::string version;  // From the members' digests.
  NetworkKind kind = NetworkKind::kMlp;
  v1::ModelFamily family = v1::MODEL_FAMILY_UNSPECIFIED;  // The encoding's family.
  std::string description;
  std::vector<HeadSpec> heads;  // In logits order.
  struct Memory {
    std::string served_head;  // The memory head the estimator answers with.
    int served_width_gib = 0;
    std::string rule;  // How the served head was chosen.
    std::string unit;
  } memory;
  EncodingSpec encoding;
  std::vector<MemberRecord> members;
  std::string ensemble;  // How the members' outputs combine, in words.
  TrainingRecord training;
  std::vector<core::manifest::DatasetDigest> datasets;
  std::string trainer_version;

  nlohmann::json ToJson() const;
  // InvalidArgument names the file and the key. Also checks the kind, that the family
  // is the encoding's, that the served head is one of the memory heads, and that every
  // head has its test and cross-validation scores.
  static absl::StatusOr<GpuMemNetManifest> FromJson(const nlohmann::json& json,
                                                    const std::string& file);
  static absl::StatusOr<GpuMemNetManifest> Parse(const std::string& text,
                                                 const std::string& file);
  static absl::StatusOr<GpuMemNetManifest> Load(const std::string& path);
  // The JSON as the file holds it (one-space indent, a final newline).
  std::string Text() const;
};

}  // namespace gpuest::gpumemnet
