#include "estimators/core/engine.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/horus/horus.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"

namespace gpuest::core {
namespace {

// A model repository in a directory of this process's own (ctest runs each test as a
// process of its own, in parallel) holding these files of the shipped one.
std::string RepositoryOf(const std::string& name, const std::vector<std::string>& files) {
  const std::string dir =
      ::testing::TempDir() + "/engine_test_" + name + "_" + std::to_string(getpid());
  for (const std::string& file : files) {
    std::filesystem::create_directories(
        std::filesystem::path(dir + "/" + file).parent_path());
    std::filesystem::copy_file(std::string(GPUEST_MODELS_DIR) + "/" + file,
                               dir + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  return dir;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The GPU profiles without the trained models: this engine has Horus only (the ML
    // estimators are tested with their factories in gpuest_ml_tests).
    const std::string dir = RepositoryOf("models", {"gpu_profiles.json"});
    RegistryOptions options{dir, "cpu"};
    options.artifactless = {horus::MakeHorusEstimator};
    auto registry = EstimatorRegistry::Load(options);
    ASSERT_TRUE(registry.ok()) << registry.status();
    engine_ = std::make_unique<Engine>(std::move(*registry), ValidationLimits{});
  }

  static v1::EstimateRequest Request() {
    v1::EstimateRequest r;
    v1::ModelDescription* m = r.mutable_model();
    m->set_batch_size(16);
    for (const char* type : {"Linear", "ReLU", "Linear"}) {
      v1::Layer* l = m->add_layers();
      l->set_type(type);
      l->set_output_activations(256);
      l->set_parameters(std::string(type) == "Linear" ? 65792 : 0);
    }
    return r;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, AnswersWithHorusAndARecommendation) {
  auto response = engine_->Estimate(Request());
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results_size(), 1);
  const v1::EstimatorResult& horus = response->results(0);
  EXPECT_EQ(horus.estimator_id(), "horus");
  EXPECT_EQ(horus.kind(), v1::ESTIMATOR_KIND_ANALYTICAL);
  EXPECT_EQ(horus.memory().point_bytes(), horus::HorusBytes(768, 131584, 16));
  EXPECT_TRUE(horus.in_distribution());  // A formula's domain is every valid input.
  EXPECT_EQ(response->family(), v1::MODEL_FAMILY_MLP);
  EXPECT_EQ(response->recommendation().memory_bytes(), horus.memory().point_bytes());
  EXPECT_EQ(response->recommendation().estimator_id(), "horus");
  EXPECT_FALSE(response->recommendation().has_fit());  // No GPU asked for.
  EXPECT_FALSE(response->models_version().empty());
}

TEST_F(EngineTest, FitOnTheRequestedGpu) {
  v1::EstimateRequest r = Request();
  r.set_gpu("A100");  // An alias, any case.
  auto response = engine_->Estimate(r);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::GpuFit& fit = response->recommendation().fit();
  EXPECT_EQ(fit.gpu(), "a100-40gb");
  EXPECT_EQ(fit.capacity_bytes(), 40960ull << 20);
  EXPECT_TRUE(fit.fits());
  EXPECT_EQ(fit.headroom_bytes(),
            static_cast<int64_t>(fit.capacity_bytes()) -
                static_cast<int64_t>(response->recommendation().memory_bytes()));

  r.mutable_model()->set_batch_size(1 << 20);  // Far beyond any card.
  response = engine_->Estimate(r);
  ASSERT_TRUE(response.ok());
  EXPECT_FALSE(response->recommendation().fit().fits());
  EXPECT_LT(response->recommendation().fit().headroom_bytes(), 0);
}

TEST_F(EngineTest, UnknownGpuAndEstimatorAreInvalidArguments) {
  v1::EstimateRequest r = Request();
  r.set_gpu("tpu-v9");
  auto response = engine_->Estimate(r);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(response.status().message(), "gpu:")) << response.status();

  r = Request();
  r.add_estimators("horus");
  r.add_estimators("oracle");
  response = engine_->Estimate(r);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(response.status().message(), "estimators[1]:"))
      << response.status();
}

TEST_F(EngineTest, WarnsAboutUnknownLayerTypes) {
  v1::EstimateRequest r = Request();
  r.mutable_model()->mutable_layers(1)->set_type("CapsuleRouting");
  auto response = engine_->Estimate(r);
  ASSERT_TRUE(response.ok());
  ASSERT_EQ(response->warnings_size(), 1);
  EXPECT_EQ(response->warnings(0).code(), v1::WARNING_CODE_UNKNOWN_LAYER_TYPE);
  EXPECT_NE(response->warnings(0).message().find("CapsuleRouting"), std::string::npos);
  EXPECT_EQ(response->family(), v1::MODEL_FAMILY_OTHER);
}

TEST_F(EngineTest, ListsTheLoadedEstimators) {
  const v1::ListEstimatorsResponse list = engine_->ListEstimators();
  ASSERT_GE(list.estimators_size(), 1);
  EXPECT_EQ(list.estimators(0).id(), "horus");
  EXPECT_TRUE(list.estimators(0).estimates_memory());
  EXPECT_EQ(list.models_version(), engine_->registry()->models_version());
}

// A model of no known family (an LSTM language model, traced by the describer) still
// gets the simulator's answer, with its most conservative calibration, and the
// recommendation rests on it, not on the formula's larger figure.
TEST(EngineOtherFamily, TheRecommendationRestsOnTheUncalibratedSimulator) {
  const std::string dir =
      RepositoryOf("other_family", {"gpu_profiles.json", "allocsim/manifest.json"});
  RegistryOptions options{dir, "cpu"};
  options.factories["allocsim"] = allocsim::CreateSimulationEstimator;
  options.artifactless = {horus::MakeHorusEstimator};
  auto registry = EstimatorRegistry::Load(options);
  ASSERT_TRUE(registry.ok()) << registry.status();
  const Engine engine(std::move(*registry), ValidationLimits{});

  v1::EstimateRequest request = testing::RequestFromFile(
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/lstm_lm_b64.json");
  request.set_gpu("a100-40gb");
  auto response = engine.Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->family(), v1::MODEL_FAMILY_OTHER);
  const v1::EstimatorResult* sim = nullptr;
  const v1::EstimatorResult* horus = nullptr;
  for (const v1::EstimatorResult& r : response->results()) {
    if (r.estimator_id() == "allocsim") sim = &r;
    if (r.estimator_id() == "horus") horus = &r;
  }
  ASSERT_NE(sim, nullptr);
  ASSERT_NE(horus, nullptr);
  EXPECT_FALSE(sim->in_distribution());
  bool uncalibrated = false;
  for (const v1::Warning& w : response->warnings()) {
    uncalibrated = uncalibrated || (w.code() == v1::WARNING_CODE_UNCALIBRATED_FAMILY &&
                                    w.estimator_id() == "allocsim");
  }
  EXPECT_TRUE(uncalibrated);
  EXPECT_TRUE(absl::StrContains(sim->basis(), "most conservative")) << sim->basis();
  // Horus's figure is the larger: the rule, not the size, picks the simulator.
  ASSERT_GT(horus->memory().point_bytes(), sim->memory().upper_bytes());
  const v1::Recommendation& rec = response->recommendation();
  EXPECT_EQ(rec.estimator_id(), "allocsim");
  EXPECT_EQ(rec.memory_bytes(), sim->memory().upper_bytes());
  EXPECT_EQ(rec.fit().allocator_retry(), v1::ALLOCATOR_RETRY_NOT_NEEDED);
}

}  // namespace
}  // namespace gpuest::core
