// placement/placement_reasons: the words of a placement, each said one way: a fit, a
// target GPU, a utilization's source, a GPU too full for a pod, and the contention
// reasons, which name the candidate and the slowest others and count the rest.
#include "placement/placement_reasons.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/units.h"
#include "gtest/gtest.h"
#include "placement/memory_fit.h"

namespace gpuest::placement {
namespace {

TEST(PlacementReasons, AFitInWords) {
  EXPECT_EQ(GibWords(1.5 * common::kGiB), "1.50 GiB");
  const MemoryFit fits = FitMemory(32 * common::kGiB, {common::kGiB}, 3 * common::kGiB);
  EXPECT_EQ(MemoryFitWords(fits),
            "needs 3.00 GiB beside 1.00 GiB used of 32.00 GiB, 28.00 GiB left");
  const MemoryFit short_by =
      FitMemory(32 * common::kGiB, {30 * common::kGiB}, 3 * common::kGiB);
  EXPECT_EQ(MemoryFitWords(short_by),
            "needs 3.00 GiB beside 30.00 GiB used of 32.00 GiB, short by 1.00 GiB");
  EXPECT_EQ(GpuShortWords(3, "h100-80gb", false, short_by),
            "GPU 3 (h100-80gb, free not reported): " + MemoryFitWords(short_by));
  EXPECT_EQ(GpuShortWords(0, "a100-40gb", true, fits),
            "GPU 0 (a100-40gb): " + MemoryFitWords(fits));
}

TEST(PlacementReasons, TheTargetAndTheSourcesInWords) {
  EXPECT_EQ(TargetGpuWords(false, "a100-40gb", "", 40 * common::kGiB),
            "a100-40gb (40.00 GiB)");
  EXPECT_EQ(TargetGpuWords(true, "", "h100-80gb", 80 * common::kGiB),
            "the node-reported GPU (80.00 GiB, a h100-80gb's context size)");
  EXPECT_EQ(UtilizationSourceWords(v1::UTILIZATION_SOURCE_NVIDIA_SMI),
            "measured by nvidia-smi");
  EXPECT_EQ(UtilizationSourceWords(v1::UTILIZATION_SOURCE_UNKNOWN),
            "unknown, assumed to saturate the GPU");
  ResolvedJob job;
  job.name = "train";
  job.requirement_basis = "an earlier estimate's peak";
  job.gpus = 4;
  EXPECT_TRUE(
      absl::StartsWith(SeveralGpusReason(job), "candidate 'train' runs on 4 GPUs"));
  const MemoryFit fit = FitMemory(40 * common::kGiB, {}, common::kGiB);
  EXPECT_EQ(MemoryFitReason(fit, job, "a100-40gb (40.00 GiB)"),
            "fits: candidate 'train' (an earlier estimate's peak) on a100-40gb (40.00 "
            "GiB): " +
                MemoryFitWords(fit) + "; each process pays its own CUDA context");
  EXPECT_TRUE(absl::StartsWith(ManyJobsReason(5), "5 jobs on one GPU: "));
  EXPECT_TRUE(absl::StartsWith(MigSliceReason("a100-40gb-1g.5gb"),
                               "a100-40gb-1g.5gb is a MIG slice: "));
  EXPECT_EQ(NodeReportedUseReason(2 * common::kGiB, 1, common::kGiB),
            "the node reports 2.00 GiB in use; the 1 existing jobs listed hold 1.00 "
            "GiB; the larger counts as used (a job not yet started is not in the "
            "node's figure)");
}

// Eleven existing jobs and the candidate: the candidate and the seven slowest others
// get a reason each, in the request's order, and one reason counts the other four.
TEST(PlacementReasons, ContentionNamesTheSlowestAndCountsTheRest) {
  auto contention = ContentionModel::Load(core::ContentionModelPath(GPUEST_MODELS_DIR));
  ASSERT_TRUE(contention.ok()) << contention.status();
  std::vector<ResolvedJob> jobs(12);
  std::vector<SpeedPrediction> predictions(12);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].name = absl::StrCat("job", i);
    jobs[i].util = {0.1, 0.1, 0.1};
    predictions[i].speed = 0.9 - 0.05 * static_cast<double>(i % 6);
  }
  jobs.back().name = "candidate";
  v1::CheckPlacementResponse response;
  AddContentionReasons(jobs, predictions, *contention, response);
  ASSERT_EQ(response.reasons_size(), 9);
  std::vector<std::string> named;
  for (int r = 0; r < 8; ++r) {
    named.push_back(response.reasons(r).substr(0, response.reasons(r).find(' ')));
  }
  // Speeds 0.9 - 0.05 (i % 6): the slowest are jobs 5, 11 (the candidate), 4 and 10,
  // 3 and 9, then 2 of the 0.80s; the candidate's reason comes last.
  EXPECT_EQ(named,
            (std::vector<std::string>{"'job2'", "'job3'", "'job4'", "'job5'", "'job8'",
                                      "'job9'", "'job10'", "'candidate'"}));
  EXPECT_TRUE(absl::StrContains(response.reasons(7),
                                "beside 'job0', 'job1', 'job2' "
                                "and 8 more jobs"))
      << response.reasons(7);
  EXPECT_TRUE(absl::StartsWith(
      response.reasons(8), "4 other jobs predicted at 0.85..0.90 of their speed alone"))
      << response.reasons(8);
}

}  // namespace
}  // namespace gpuest::placement
