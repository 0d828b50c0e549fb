// lab/trainer/pipeline: the held-out split TrainFamily makes, and gpuest-train's whole
// pipeline in a smoke training run end to end: a few hundred rows for two epochs into
// a temporary directory, then loaded through the registry and asked for estimates.
#include "lab/trainer/pipeline.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "estimators/core/engine.h"
#include "estimators/default_factories.h"
#include "gtest/gtest.h"
#include "lab/data/dataset.h"
#include "nlohmann/json.hpp"
#include "tests/support/datasets.h"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"

namespace gpuest::trainer {
namespace {

// The held-out split is stratified on the coarsest memory class, the OOM runs' top
// class included, and the same for the same seed.
TEST(Pipeline, TheHeldOutSplitKeepsEachMemoryClassInProportion) {
  data::Dataset d;
  d.family = v1::MODEL_FAMILY_MLP;
  for (int i = 0; i < 60; ++i) {
    data::Example& e = d.examples.emplace_back();
    e.measured.oom = i % 3 == 0;
    e.measured.peak_mib = e.measured.oom ? 40000 : 1000;
  }
  const Split a = HeldOutSplit(d, 0.5, 11);
  EXPECT_EQ(a.test.size(), 30u);
  EXPECT_EQ(a.train.size(), 30u);
  int oom = 0;
  for (int r : a.test) oom += d.examples[r].measured.oom ? 1 : 0;
  EXPECT_EQ(oom, 10);
  EXPECT_EQ(HeldOutSplit(d, 0.5, 11).test, a.test);
  EXPECT_NE(HeldOutSplit(d, 0.5, 12).test, a.test);
}

TEST(SmokeTraining, TrainsLoadsAndEstimates) {
  // One directory per process: TempDir() is shared by every checkout on the machine.
  const std::string dir =
      ::testing::TempDir() + "/gpuest_smoke_training_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/models");
  std::filesystem::copy_file(std::string(GPUEST_MODELS_DIR) + "/gpu_profiles.json",
                             dir + "/models/gpu_profiles.json");

  // The trainer's whole path on the project's own generated rows (tests/data/
  // fixture-datasets, in GPUMemNet's formats), so it runs in any clone; what the measured
  // rows train to is deploy/train.sh's report, not a test's. The Transformer rows come
  // from the Python exporter (60 rows).
  const std::string data_dir = testing::FixtureRoot() + "/gpumemnet";
  const std::string rows = dir + "/transformer.jsonl";
  auto exported = testing::RunCommand(
      {GPUEST_TORCH_PYTHON, "-m", "gpuest.synthetic.export", "--csv",
       data_dir + "/transformer_sample.csv", "--out", rows, "--limit", "60"},
      "", {std::string("PYTHONPATH=") + GPUEST_PYTHON_DIR}, absl::Seconds(120));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;

  auto trained = testing::RunCommand(
      {GPUEST_TRAIN_PATH, "--smoke", "--out", dir + "/models", "--report",
       dir + "/accuracy.md", "--data-dir", data_dir, "--transformer-rows", rows},
      "", {}, absl::Seconds(240));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_TRUE(absl::StrContains(trained.err, "epoch 2/2")) << trained.err;

  std::ifstream report_in(dir + "/accuracy.md");
  std::stringstream report;
  report << report_in.rdbuf();
  EXPECT_TRUE(absl::StrContains(report.str(), "SMOKE RUN")) << report.str();
  EXPECT_TRUE(
      absl::StrContains(report.str(), "| CNN (cnn.csv) | Transformer-based | 8 GiB"))
      << report.str();

  std::ifstream manifest_in(dir + "/models/gpumemnet-cnn-mlp/manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_in);
  EXPECT_EQ(manifest["members"].size(), 2u);
  EXPECT_EQ(manifest["training"]["split"]["seed"], 2025);
  EXPECT_EQ(manifest["training"]["split"]["test_rows"].get<int>() +
                manifest["training"]["split"]["train_rows"].get<int>(),
            300);
  EXPECT_EQ(manifest["datasets"][0]["sha256"].get<std::string>().size(), 64u);

  auto registry = core::EstimatorRegistry::Load(
      estimators::WithDefaultFactories({dir + "/models", "cpu"}));
  ASSERT_TRUE(registry.ok()) << registry.status();
  core::Engine engine(std::move(*registry), core::ValidationLimits{});
  for (const char* example : {"mlp.json", "cnn.json", "transformer.json"}) {
    v1::EstimateRequest request = testing::ExampleRequest(example);
    auto response = engine.Estimate(request);
    ASSERT_TRUE(response.ok()) << response.status();
    int gpumemnet = 0;
    for (const auto& r : response->results()) {
      if (!absl::StartsWith(r.estimator_id(), "gpumemnet-")) continue;
      ++gpumemnet;
      double sum = 0;
      for (const auto& b : r.memory().bins()) sum += b.probability();
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
    EXPECT_EQ(gpumemnet, 2) << example;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuest::trainer
