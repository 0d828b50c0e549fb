// server/model_lifecycle: the model set loaded at start from a scratch copy of the
// shipped models, and replaced on a reload only when the whole new set loads: a
// damaged file leaves the old set serving and says which file; the outcome is counted
// in gpuest_model_reloads_total and the served version in gpuest_models_info.
#include "server/model_lifecycle.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/text_file.h"
#include "estimators/core/model_repository.h"
#include "gtest/gtest.h"
#include "server/metrics.h"
#include "server/options.h"
#include "tests/support/prometheus_text.h"

namespace gpuest::server {
namespace {

class ModelLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/model_lifecycle_" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(GPUEST_MODELS_DIR, dir_,
                          std::filesystem::copy_options::recursive);
    options_.directory = dir_;
    options_.device = "cpu";
    metrics_ = Metrics::Create();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // gpuest_model_reloads_total{outcome}.
  std::optional<double> Reloads(const std::string& outcome) const {
    auto samples = testing::ParsePrometheusText(metrics_->Text());
    EXPECT_TRUE(samples.ok()) << samples.status();
    return samples.ok() ? testing::SumSamples(*samples, "gpuest_model_reloads_total",
                                              {{"outcome", outcome}})
                        : std::nullopt;
  }

  std::string dir_;
  ModelOptions options_;
  std::unique_ptr<Metrics> metrics_;
};

TEST_F(ModelLifecycleTest, AReloadOfTheSameFilesServesTheSameVersionAnew) {
  auto lifecycle = ModelLifecycle::Create(options_, core::ValidationLimits{}, *metrics_);
  ASSERT_TRUE(lifecycle.ok()) << lifecycle.status();
  const std::shared_ptr<const placement::ModelSet> before = (*lifecycle)->Current();
  ASSERT_NE(before, nullptr);
  EXPECT_FALSE(before->version().empty());
  EXPECT_TRUE(absl::StrContains(metrics_->Text(), before->version()));
  const ReloadOutcome outcome = (*lifecycle)->Reload();
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.old_models_version, before->version());
  EXPECT_EQ(outcome.new_models_version, before->version());
  EXPECT_EQ(outcome.estimators, static_cast<int>(before->registry().estimators().size()));
  EXPECT_NE((*lifecycle)->Current(), before);  // A new set, the same files.
  EXPECT_EQ(Reloads("success"), 1);
  EXPECT_EQ(Reloads("failure"), 0);
}

TEST_F(ModelLifecycleTest, ADamagedFileLeavesTheOldSetServing) {
  auto lifecycle = ModelLifecycle::Create(options_, core::ValidationLimits{}, *metrics_);
  ASSERT_TRUE(lifecycle.ok()) << lifecycle.status();
  const std::shared_ptr<const placement::ModelSet> before = (*lifecycle)->Current();
  const std::string contention = core::ContentionModelPath(dir_);
  ASSERT_TRUE(common::WriteTextFile(contention, "{").ok());
  const ReloadOutcome outcome = (*lifecycle)->Reload();
  EXPECT_FALSE(outcome.status.ok());
  EXPECT_TRUE(absl::StrContains(outcome.status.message(), contention)) << outcome.status;
  EXPECT_EQ(outcome.new_models_version, outcome.old_models_version);
  EXPECT_EQ((*lifecycle)->Current(), before);
  EXPECT_EQ(Reloads("failure"), 1);
  EXPECT_EQ(Reloads("success"), 0);
  // The same damage at start: no lifecycle at all.
  EXPECT_FALSE(
      ModelLifecycle::Create(options_, core::ValidationLimits{}, *metrics_).ok());
}

TEST_F(ModelLifecycleTest, AModelTakenAwayIsGoneAfterTheReloadNotBefore) {
  auto lifecycle = ModelLifecycle::Create(options_, core::ValidationLimits{}, *metrics_);
  ASSERT_TRUE(lifecycle.ok()) << lifecycle.status();
  const std::shared_ptr<const placement::ModelSet> before = (*lifecycle)->Current();
  const size_t estimators = before->registry().estimators().size();
  std::filesystem::remove_all(dir_ + "/analytic");
  EXPECT_EQ((*lifecycle)->Current(), before);  // Nothing changes until a reload.
  const ReloadOutcome outcome = (*lifecycle)->Reload();
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.estimators, static_cast<int>(estimators) - 1);
  EXPECT_NE(outcome.new_models_version, outcome.old_models_version);
  EXPECT_EQ((*lifecycle)->Current()->version(), outcome.new_models_version);
  // A call holding the old set keeps all of it.
  EXPECT_EQ(before->registry().estimators().size(), estimators);
  EXPECT_TRUE(absl::StrContains(metrics_->Text(), outcome.new_models_version));
}

}  // namespace
}  // namespace gpuest::server
