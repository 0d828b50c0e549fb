// estimators/allocsim/memory_model: a replayed step's peak turned into the answer by a
// family's calibration (the breakdown adds up to the bound), uncertain bytes and the
// conv term on the upper bound only, and what the allocator may hold on a card.
#include "estimators/allocsim/memory_model.h"

#include "gtest/gtest.h"
#include "tests/unit/estimators/allocsim/simulation_test_requests.h"

namespace gpuest::allocsim {
namespace {

using test_requests::Card;
using test_requests::MiB;
using test_requests::MlpRequest;
using test_requests::Sum;

TEST(MemoryModel, CalibratedEstimateAndABreakdownThatAddsUp) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  const FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 0);
  const double reserved = replay->peak_reserved_bytes;
  EXPECT_NEAR(m.point_bytes(), 1050.0 * MiB + 1.1 * reserved, 1);
  EXPECT_NEAR(m.upper_bytes(), 1100.0 * MiB + 1.5 * reserved, 1);
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  // Three layers of 1024 x 1024 + 1024 fp32 weights; Adam's state twice that.
  const uint64_t weights = 3 * ((1024 * 1024 + 1024) * 4);
  EXPECT_EQ(m.breakdown().weights_bytes(), weights);
  EXPECT_EQ(m.breakdown().optimizer_state_bytes(), 2 * weights);
  // The context, and the forward's and the backward's cuBLAS workspaces.
  EXPECT_EQ(m.breakdown().context_bytes(), 1000 * MiB + 2 * kDefaultCublasWorkspaceBytes);
  EXPECT_EQ(m.gpu_constants(), v1::GPU_CONSTANTS_CALIBRATED);
  EXPECT_EQ(
      CalibratedEstimate(*replay, Card(40960, false), calibration, 0).gpu_constants(),
      v1::GPU_CONSTANTS_ASSUMED);
}

TEST(MemoryModel, UncertainBytesWidenTheUpperBoundOnlyAndShowApart) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  const FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate settled = CalibratedEstimate(*replay, gpu, calibration, 0);
  replay->uncertain_bytes = 64 * MiB;
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 0);
  EXPECT_EQ(m.point_bytes(), settled.point_bytes());
  EXPECT_NEAR(m.upper_bytes(), settled.upper_bytes() + 1.5 * 64 * MiB, 1);
  EXPECT_EQ(m.uncertain_bytes(), 64 * MiB);
  EXPECT_NEAR(m.breakdown().uncertain_layers_bytes(), 1.5 * 64 * MiB, 1);
  EXPECT_EQ(m.breakdown().calibration_bytes(), settled.breakdown().calibration_bytes());
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
}

TEST(MemoryModel, ConvTermAddsToTheUpperBoundOnlyAndShowsAsCalibration) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate plain = CalibratedEstimate(*replay, gpu, calibration, 300);
  calibration.conv_output_factor = 2.5;
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 300);
  EXPECT_EQ(m.point_bytes(), plain.point_bytes());
  EXPECT_EQ(m.upper_bytes(), plain.upper_bytes() + 750 * MiB);
  EXPECT_EQ(m.breakdown().calibration_bytes(),
            plain.breakdown().calibration_bytes() + 750 * MiB);
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  // What the allocator may hold on the card shrinks by the same amount, over the factor.
  EXPECT_EQ(AllocatorCapacity(Card(4000), {1000, 2.0, 0, 1.0, 2.5}, 100),
            (1000 - 125) * MiB);
}

TEST(MemoryModel, LargestConvOutputIsPerBatchAndNeverWraps) {
  v1::ModelDescription model;
  model.set_batch_size(8);
  v1::Layer* conv = model.add_layers();
  conv->set_type("Conv2d");
  conv->set_output_activations(64 * 56 * 56);
  v1::Layer* bigger = model.add_layers();
  bigger->set_type("Linear");
  bigger->set_output_activations(1 << 30);  // Not a convolution: not counted.
  model.add_layers()->set_type("Conv2d");
  EXPECT_DOUBLE_EQ(LargestConvOutputMib(model), 4.0 * 64 * 56 * 56 * 8 / MiB);
  // 2^62 activations x 2^30 samples x 4 bytes: far beyond 2^64 bytes, still growing.
  conv->set_output_activations(int64_t{1} << 62);
  model.set_batch_size(1 << 30);
  EXPECT_GT(LargestConvOutputMib(model), 1e19 / MiB);
  FamilyCalibration calibration{0, 1, 0, 1, 1};
  ReplayResult replay;
  EXPECT_EQ(
      CalibratedEstimate(replay, Card(40960), calibration, LargestConvOutputMib(model))
          .upper_bytes(),
      UINT64_MAX);
}

TEST(MemoryModel, AllocatorCapacityIsWhatTheSafeEstimateLeaves) {
  const FamilyCalibration calibration{1000, 2.0, 0, 1.0};
  // (4000 - 1000 context - 1000 intercept) / 2.
  EXPECT_EQ(AllocatorCapacity(Card(4000), calibration, 0), 1000 * MiB);
  EXPECT_EQ(AllocatorCapacity(Card(1500), calibration, 0), 1u);  // Nothing left: not 0.
}

}  // namespace
}  // namespace gpuest::allocsim
