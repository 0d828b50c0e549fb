// placement/placement_job: a job as the placement needs it, from what the node
// measures (read as its source says), an earlier estimate's figures (its context added
// where it left it out) or a description estimated for the target GPU; and a
// utilization estimate's range.
#include "placement/placement_job.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/units.h"
#include "estimators/core/engine.h"
#include "estimators/core/registry.h"
#include "estimators/default_factories.h"
#include "gtest/gtest.h"
#include "placement/contention_model.h"
#include "tests/support/examples.h"
#include "tests/support/shipped_models.h"

namespace gpuest::placement {
namespace {

TEST(UtilizationFromEstimateTest, GractClassesGiveARangeAndOtherMetricsAreRefused) {
  v1::UtilizationEstimate u;
  u.set_metric(v1::UTILIZATION_METRIC_GRACT);
  for (double e : {0.0, 0.3, 0.9, 1.0}) u.add_bin_edges(e);
  for (double p : {0.0, 1.0, 0.0}) u.add_probabilities(p);
  auto r = UtilizationFromEstimate(u, "job");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->value, 0.6);
  EXPECT_DOUBLE_EQ(r->low, 0.3);
  EXPECT_DOUBLE_EQ(r->high, 0.9);
  // 1e308 summed to infinity and the mean to NaN, which read as "acceptable".
  u.set_probabilities(1, 1e308);
  auto overflowing = UtilizationFromEstimate(u, "job");
  EXPECT_EQ(overflowing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(overflowing.status().message(), "job.probabilities[1]"))
      << overflowing.status();
  u.set_probabilities(1, 1.0);
  u.set_metric(v1::UTILIZATION_METRIC_SMACT);
  auto refused = UtilizationFromEstimate(u, "job");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "job.metric"));
}

TEST(UtilizationFromEstimateTest, NothingSaidIsSaturatingAndNvidiaSmiIsExact) {
  const UtilizationRange unknown = UnknownUtilization();
  EXPECT_EQ(unknown.value, 1.0);
  EXPECT_EQ(unknown.low, 0.0);
  EXPECT_EQ(unknown.high, 1.0);
  const UtilizationRange smi = MeasuredByNvidiaSmi(42);
  EXPECT_DOUBLE_EQ(smi.value, 0.42);
  EXPECT_DOUBLE_EQ(smi.low, 0.42);
  EXPECT_DOUBLE_EQ(smi.high, 0.42);
}

// ResolveJob over the shipped models and contention model, on the A100 40GB.
class PlacementJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::shared_ptr<const ModelSet> set = testing::ShippedModelSet();
    engine_ = &set->engine();
    contention_ = &set->contention();
  }
  static const core::GpuProfile& A100() {
    return *engine_->registry()->gpus().Find("a100-40gb");
  }
  static absl::StatusOr<ResolvedJob> Resolve(const v1::PlacementJob& job) {
    return ResolveJob(job, "existing[1]", A100(), *engine_, *contention_,
                      common::WorkDeadline::Never());
  }
  static const core::Engine* engine_;  // The shipped set lives as long as the binary.
  static const ContentionModel* contention_;
};
const core::Engine* PlacementJobTest::engine_ = nullptr;
const ContentionModel* PlacementJobTest::contention_ = nullptr;

TEST_F(PlacementJobTest, AMeasuredJobIsReadAsItsSourceSays) {
  absl::StatusOr<ResolvedJob> smi =
      Resolve(testing::MeasuredJob("trainer", 3 * common::kGiB, 40));
  ASSERT_TRUE(smi.ok()) << smi.status();
  EXPECT_EQ(smi->name, "trainer");
  EXPECT_EQ(smi->requirement_bytes, 3 * common::kGiB);
  EXPECT_EQ(smi->requirement_basis, "measured in use (its CUDA context included)");
  EXPECT_DOUBLE_EQ(smi->util.value, 0.4);
  EXPECT_EQ(smi->source, v1::UTILIZATION_SOURCE_NVIDIA_SMI);
  // DCGM's GRACT is a fraction, read with its spread against utilization.gpu.
  v1::PlacementJob gract = testing::MeasuredJob("", common::kGiB, 0);
  gract.mutable_measured()->set_source(v1::UTILIZATION_SOURCE_DCGM_GRACT);
  gract.mutable_measured()->set_gpu_util(0.5);
  gract.mutable_measured()->set_mem_util(0.2);
  absl::StatusOr<ResolvedJob> dcgm = Resolve(gract);
  ASSERT_TRUE(dcgm.ok()) << dcgm.status();
  EXPECT_EQ(dcgm->name, "existing[1]");  // Unnamed: named by its field.
  EXPECT_DOUBLE_EQ(dcgm->util.value, 0.5);
  EXPECT_DOUBLE_EQ(dcgm->util.low, 0.45);
  EXPECT_DOUBLE_EQ(dcgm->util.high, 0.55);
  // A percentage given as a fraction's source is outside its range, by name.
  gract.mutable_measured()->set_gpu_util(50);
  EXPECT_TRUE(absl::StartsWith(Resolve(gract).status().message(),
                               "existing[1].measured.gpu_util: 50 is outside 0..1"))
      << Resolve(gract).status();
  gract.mutable_measured()->set_source(v1::UTILIZATION_SOURCE_UNKNOWN);
  EXPECT_TRUE(
      absl::StartsWith(Resolve(gract).status().message(), "existing[1].measured.source"))
      << Resolve(gract).status();
}

TEST_F(PlacementJobTest, AnEarlierEstimateGetsTheContextItLeftOut) {
  v1::PlacementJob job;
  job.set_name("earlier");
  job.mutable_estimate()->set_peak_bytes(2 * common::kGiB);
  absl::StatusOr<ResolvedJob> with = Resolve(job);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->requirement_bytes, 2 * common::kGiB);
  EXPECT_EQ(with->requirement_basis,
            "an earlier estimate's peak (its CUDA context included)");
  EXPECT_EQ(with->util.value, UnknownUtilization().value);
  job.mutable_estimate()->set_peak_excludes_context(true);
  absl::StatusOr<ResolvedJob> without = Resolve(job);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->requirement_bytes, 2 * common::kGiB + A100().context_bytes);
  EXPECT_TRUE(
      absl::StartsWith(without->requirement_basis,
                       "an earlier estimate's peak plus a100-40gb's CUDA context"))
      << without->requirement_basis;
}

TEST_F(PlacementJobTest, ADescriptionIsEstimatedForTheGpuItIsPlacedOn) {
  v1::PlacementJob job;
  *job.mutable_description() = testing::ExampleRequest("mlp.json");
  absl::StatusOr<ResolvedJob> resolved = Resolve(job);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_GT(resolved->requirement_bytes, A100().context_bytes);
  EXPECT_FALSE(resolved->estimator_id.empty());
  EXPECT_TRUE(absl::StartsWith(resolved->requirement_basis, "estimated for a100-40gb: "))
      << resolved->requirement_basis;
  EXPECT_EQ(resolved->gpus, 1u);
  // It may name that GPU, by any of its names; another GPU is refused, never replaced.
  const core::GpuProfiles& catalog = engine_->registry()->gpus();
  v1::EstimateRequest named = job.description();
  named.set_gpu(A100().name);
  EXPECT_TRUE(CheckDescriptionGpu(named, "candidate.description", A100(), catalog).ok());
  named.set_gpu("h100-80gb");
  const absl::Status other =
      CheckDescriptionGpu(named, "candidate.description", A100(), catalog);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(other.message(),
                               "candidate.description.gpu: names 'h100-80gb' but the "
                               "job is placed on a100-40gb"))
      << other;
  *job.mutable_description() = named;
  EXPECT_TRUE(absl::StartsWith(Resolve(job).status().message(),
                               "existing[1].description.gpu: names 'h100-80gb'"))
      << Resolve(job).status();
}

}  // namespace
}  // namespace gpuest::placement
