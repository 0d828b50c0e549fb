// placement/placement_verdict: the arithmetic of a GPU the node reports, as the
// extender judges it: the memory fit with what runs there, and the contention verdict
// of the two beside each other (none for a GPU that holds nothing).
#include "placement/placement_verdict.h"

#include "common/units.h"
#include "gtest/gtest.h"
#include "placement/placement_job.h"

namespace gpuest::placement {
namespace {

class PlacementVerdictTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = ContentionModel::Load(core::ContentionModelPath(GPUEST_MODELS_DIR));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    contention_ = *loaded;
  }
  ContentionModel contention_;
};

TEST_F(PlacementVerdictTest, AnEmptyGpuHoldsTheCandidateAlone) {
  const GpuJudgement j =
      JudgeReportedGpu(contention_, 10 * common::kGiB, MeasuredByNvidiaSmi(100),
                       40 * common::kGiB, 40 * common::kGiB, UnknownUtilization());
  EXPECT_TRUE(j.fit.fits);
  EXPECT_EQ(j.fit.used_bytes, 0u);
  EXPECT_EQ(j.fit.headroom_bytes, static_cast<int64_t>(30 * common::kGiB));
  EXPECT_EQ(j.contention.verdict, v1::CONTENTION_VERDICT_ALONE);
  EXPECT_EQ(j.contention.worst_speed, 1);
}

TEST_F(PlacementVerdictTest, WhatRunsThereHoldsWhatTheNodeReportsInUse) {
  const GpuJudgement light =
      JudgeReportedGpu(contention_, 10 * common::kGiB, MeasuredByNvidiaSmi(5),
                       40 * common::kGiB, 25 * common::kGiB, MeasuredByNvidiaSmi(5));
  EXPECT_TRUE(light.fit.fits);
  EXPECT_EQ(light.fit.used_bytes, 15 * common::kGiB);
  EXPECT_EQ(light.contention.verdict, v1::CONTENTION_VERDICT_ACCEPTABLE);
  EXPECT_LE(light.contention.worst_speed, 1);
  // Two saturating jobs: the slower of the two is called bad.
  const GpuJudgement heavy =
      JudgeReportedGpu(contention_, 30 * common::kGiB, MeasuredByNvidiaSmi(100),
                       40 * common::kGiB, 25 * common::kGiB, UnknownUtilization());
  EXPECT_FALSE(heavy.fit.fits);
  EXPECT_EQ(heavy.fit.headroom_bytes, -static_cast<int64_t>(5 * common::kGiB));
  EXPECT_EQ(heavy.contention.verdict, v1::CONTENTION_VERDICT_BAD);
  EXPECT_LT(heavy.contention.worst_speed, light.contention.worst_speed);
  // More free than total (a node's race) is read as nothing in use.
  EXPECT_EQ(JudgeReportedGpu(contention_, common::kGiB, MeasuredByNvidiaSmi(50),
                             8 * common::kGiB, 9 * common::kGiB, UnknownUtilization())
                .contention.verdict,
            v1::CONTENTION_VERDICT_ALONE);
}

TEST_F(PlacementVerdictTest, ATallyIsBadWhereAnyJobIsAndKeepsTheSlowest) {
  ContentionTally tally;
  SpeedPrediction fine;
  fine.speed = 0.95;
  fine.bad_probability = 0;
  tally.Add(contention_, fine);
  EXPECT_EQ(tally.verdict, v1::CONTENTION_VERDICT_ACCEPTABLE);
  EXPECT_EQ(tally.worst_speed, 0.95);
  SpeedPrediction slow;
  slow.speed = 0.4;
  slow.bad_probability = 1;
  ASSERT_TRUE(contention_.CalledBad(slow));
  tally.Add(contention_, slow);
  tally.Add(contention_, fine);  // A good one after does not undo it.
  EXPECT_EQ(tally.verdict, v1::CONTENTION_VERDICT_BAD);
  EXPECT_EQ(tally.worst_speed, 0.4);
}

}  // namespace
}  // namespace gpuest::placement
