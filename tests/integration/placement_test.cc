// gpuest.v1.Placement through the real server on loopback: the client library's calls,
// the metrics they leave, and `gpuest place` / `gpuest rank` as a user runs them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/units.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_fixture.h"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::CommandResult;

std::string Example(const std::string& name) {
  return std::string(GPUEST_EXAMPLES_DIR) + "/" + name;
}

class PlacementServerTest : public testing::ClientAgainstServer {};

TEST_F(PlacementServerTest, DescribedCandidateBesideAMeasuredJobOnAnNvidiaSmiName) {
  auto health = client_->Health("gpuest.v1.Placement");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, ServingState::kServing);

  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("NVIDIA A100-SXM4-80GB");
  *request.add_existing() = testing::MeasuredJob("resnet-running", 20 * common::kGiB, 60);
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  request.mutable_candidate()->set_name("cnn");
  auto r = client_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();

  // The candidate's memory is what the Estimate RPC recommends for the same GPU.
  v1::EstimateRequest estimate = testing::ExampleRequest("cnn.json");
  estimate.set_gpu("a100-80gb");
  auto e = client_->Estimate(estimate);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(r->gpu(), "a100-80gb");
  EXPECT_EQ(r->candidate_bytes(), e->recommendation().memory_bytes());
  EXPECT_EQ(r->used_bytes(), 20 * common::kGiB);
  EXPECT_EQ(r->fits(), 20 * common::kGiB + r->candidate_bytes() <= r->capacity_bytes());
  EXPECT_EQ(r->headroom_bytes(),
            static_cast<int64_t>(r->capacity_bytes()) -
                static_cast<int64_t>(20 * common::kGiB + r->candidate_bytes()));
  ASSERT_EQ(r->jobs_size(), 2);
  EXPECT_EQ(r->jobs(0).utilization_source(), v1::UTILIZATION_SOURCE_NVIDIA_SMI);
  EXPECT_DOUBLE_EQ(r->jobs(0).gpu_util(), 0.6);
  EXPECT_EQ(r->jobs(1).name(), "cnn");
  EXPECT_TRUE(r->jobs(1).candidate());
  EXPECT_EQ(r->jobs(1).utilization_source(), v1::UTILIZATION_SOURCE_ESTIMATE);
  for (const v1::JobOutcome& j : r->jobs()) {
    EXPECT_LE(j.speed_low(), j.predicted_speed()) << j.name();
    EXPECT_GE(j.speed_high(), j.predicted_speed()) << j.name();
    EXPECT_NE(j.verdict(), v1::CONTENTION_VERDICT_ALONE) << j.name();
    // The verdict is the probability at the response's operating point.
    EXPECT_GE(j.bad_probability(), 0.0) << j.name();
    EXPECT_LE(j.bad_probability(), 1.0) << j.name();
    EXPECT_EQ(j.verdict() == v1::CONTENTION_VERDICT_BAD,
              j.bad_probability() >= r->bad_probability_threshold())
        << j.name();
  }
  EXPECT_GT(r->bad_probability_threshold(), 0.0);
  EXPECT_LT(r->bad_probability_threshold(), 1.0);
  EXPECT_FALSE(r->contention_model_version().empty());
  EXPECT_GT(r->server_latency_us(), 0);
  bool memory_reason = false;
  for (const std::string& reason : r->reasons())
    memory_reason |= absl::StrContains(reason, "each process pays its own CUDA context");
  EXPECT_TRUE(memory_reason);
}

TEST_F(PlacementServerTest, BadInputIsInvalidArgumentNamingTheField) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  *request.mutable_candidate() = testing::MeasuredJob("x", common::kGiB, 50);
  request.mutable_candidate()->mutable_measured()->set_gpu_util(250);
  auto r = client_->CheckPlacement(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "candidate.measured.gpu_util"))
      << r.status();

  v1::CheckPlacementRequest described;
  described.mutable_gpu()->set_catalog_id("a100-40gb");
  *described.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("mlp.json");
  described.mutable_candidate()->mutable_description()->mutable_model()->set_batch_size(
      -4);
  r = client_->CheckPlacement(described);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StartsWith(r.status().message(), "candidate.description.model.batch_size"))
      << r.status();
}

TEST_F(PlacementServerTest, RankGpusCoversMigProfilesAndAgreesWithEstimate) {
  v1::RankGpusRequest request;
  *request.mutable_job()->mutable_description() = testing::ExampleRequest("cnn.json");
  auto r = client_->RankGpus(request);
  ASSERT_TRUE(r.ok()) << r.status();
  v1::EstimateRequest estimate = testing::ExampleRequest("cnn.json");
  estimate.set_gpu("a100-40gb");
  auto e = client_->Estimate(estimate);
  ASSERT_TRUE(e.ok()) << e.status();
  bool saw_a100 = false, saw_mig = false;
  for (const v1::GpuRanking& g : r->gpus()) {
    if (g.gpu() == "a100-40gb") {
      saw_a100 = true;
      EXPECT_EQ(g.peak_bytes(), e->recommendation().memory_bytes());
      EXPECT_EQ(g.fits(), e->recommendation().fit().fits());
      EXPECT_EQ(g.headroom_bytes(), e->recommendation().fit().headroom_bytes());
      EXPECT_FALSE(g.mig());
    }
    if (g.gpu() == "h100-80gb-mig-1g.10gb") {
      saw_mig = true;
      EXPECT_TRUE(g.mig());
      EXPECT_EQ(g.name(), "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    }
  }
  EXPECT_TRUE(saw_a100);
  EXPECT_TRUE(saw_mig);
}

// A job over several GPUs (issue "llm"): RankGpus and CheckPlacement answer per GPU,
// one rank's share, and say how many GPUs the job occupies.
TEST_F(PlacementServerTest, AJobOverEightGpusIsAnsweredPerGpuAndSaysSo) {
  v1::EstimateRequest one = testing::ExampleRequest("cnn.json");
  v1::EstimateRequest eight = one;
  v1::Parallelism& layout = *eight.mutable_model()->mutable_parallelism();
  layout.set_data_parallel(4);
  layout.set_tensor_parallel(2);
  layout.set_sharding(v1::SHARDING_PARAMETERS);
  auto peak_on_a100 =
      [&](const v1::EstimateRequest& job) -> std::pair<uint64_t, uint32_t> {
    v1::RankGpusRequest request;
    *request.mutable_job()->mutable_description() = job;
    auto r = client_->RankGpus(request);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {0, 0};
    for (const v1::GpuRanking& g : r->gpus()) {
      if (g.gpu() == "a100-40gb") return {g.peak_bytes(), r->gpus_needed()};
    }
    ADD_FAILURE() << "no a100-40gb in the ranking";
    return {0, 0};
  };
  const auto [alone, alone_gpus] = peak_on_a100(one);
  const auto [rank, rank_gpus] = peak_on_a100(eight);
  EXPECT_EQ(alone_gpus, 1u);
  EXPECT_EQ(rank_gpus, 8u);
  EXPECT_LT(rank, alone);

  v1::CheckPlacementRequest check;
  check.mutable_gpu()->set_catalog_id("a100-40gb");
  *check.mutable_candidate()->mutable_description() = eight;
  auto placed = client_->CheckPlacement(check);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->candidate_gpus(), 8u);
  EXPECT_EQ(placed->candidate_bytes(), rank);
  const bool says_so = std::any_of(
      placed->reasons().begin(), placed->reasons().end(),
      [](const std::string& r) { return absl::StrContains(r, "runs on 8 GPUs"); });
  EXPECT_TRUE(says_so) << placed->DebugString();

  *check.mutable_candidate()->mutable_description() = one;
  placed = client_->CheckPlacement(check);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->candidate_gpus(), 1u);
  EXPECT_EQ(placed->candidate_bytes(), alone);
}

TEST_F(PlacementServerTest, MetricsCountPlacementCallsLikeEstimate) {
  // The suite shares one server: count the calls this test makes.
  auto count = [](const std::string& code) -> double {
    auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    auto samples = testing::ParsePrometheusText(text.ok() ? *text : "");
    EXPECT_TRUE(samples.ok()) << samples.status();
    return testing::SumSamples(*samples, "gpuest_request_duration_seconds_count",
                               {{"method", "RankGpus"}, {"code", code}})
        .value_or(0);
  };
  const double ok_before = count("OK"), bad_before = count("INVALID_ARGUMENT");
  v1::RankGpusRequest good;
  *good.mutable_job() = testing::MeasuredJob("m", 3 * common::kGiB, 30);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->RankGpus(good).ok());
  ASSERT_FALSE(client_->RankGpus(v1::RankGpusRequest()).ok());
  EXPECT_EQ(count("OK") - ok_before, 3);
  EXPECT_EQ(count("INVALID_ARGUMENT") - bad_before, 1);
  auto text = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = testing::ParsePrometheusText(*text);
  ASSERT_TRUE(samples.ok()) << samples.status();
  // Declared for every method from the start, as Estimate's are.
  EXPECT_TRUE(testing::SumSamples(*samples, "gpuest_requests_in_flight",
                                  {{"method", "CheckPlacement"}})
                  .has_value());
}

class PlacementCliTest : public testing::CliAgainstServer {
 protected:
  // A measured job file, as a node agent would write it.
  static std::string MeasuredJobFile() {
    const std::string path =
        (std::filesystem::temp_directory_path() / "gpuest_placement_measured.json")
            .string();
    std::ofstream(path)
        << R"({"name": "running", "measured": {"memoryInUseBytes": "8589934592",
        "gpuUtil": 0.2, "memUtil": 0.1, "source": "UTILIZATION_SOURCE_DCGM_SMACT"}})";
    return path;
  }
};

TEST_F(PlacementCliTest, PlaceJsonPrintsEveryFieldFalseAndZeroIncluded) {
  const CommandResult r = Cli({"--json", "place", Example("cnn.json"), "--gpu",
                               "a100-40gb", "--beside", MeasuredJobFile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  for (const char* key : {"gpu", "capacityBytes", "usedBytes", "candidateBytes", "fits",
                          "headroomBytes", "jobs", "verdict", "worstPredictedSpeed",
                          "reasons", "warnings", "contentionModelVersion"}) {
    EXPECT_TRUE(doc.contains(key)) << key << "\n" << r.out;
  }
  ASSERT_EQ(doc.at("jobs").size(), 2u);
  const nlohmann::json& running = doc.at("jobs")[0];
  EXPECT_EQ(running.at("candidate"), false) << r.out;  // false is printed, not dropped.
  EXPECT_EQ(running.at("extrapolated"), false) << r.out;
  EXPECT_EQ(running.at("utilizationSource"), "UTILIZATION_SOURCE_DCGM_SMACT");
  EXPECT_EQ(running.at("memoryBytes"), "8589934592");
  EXPECT_EQ(doc.at("jobs")[1].at("candidate"), true);
}

TEST_F(PlacementCliTest, PlaceAndRankPrintTables) {
  CommandResult r = Cli({"place", Example("cnn.json"), "--gpu", "a100-40gb-mig-1g.5gb",
                         "--beside", MeasuredJobFile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "GPU a100-40gb-mig-1g.5gb: capacity 4.75 GiB"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "reasons:")) << r.out;
  // A description on stdin, read once.
  r = Cli({"place", "-", "--gpu", "a100-40gb"},
          testing::ReadFileOrDie(Example("mlp.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "stdin (candidate)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "alone")) << r.out;
  r = Cli({"rank", Example("cnn.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "a100-80gb-mig-3g.40gb")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "NVIDIA H100 80GB HBM3")) << r.out;
}

TEST_F(PlacementCliTest, BadInputExitsTwo) {
  // A single job without --gpu is refused before any call.
  CommandResult r = Cli({"place", Example("cnn.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "needs --gpu")) << r.err;
  // The server's INVALID_ARGUMENT names the field.
  r = Cli({"place", Example("cnn.json"), "--gpu", "abacus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "gpu.catalog_id: unknown GPU 'abacus'")) << r.err;
  r = Cli({"rank", "-"}, R"({"job": {"measured": {"memoryInUseBytes": "0"}}})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "job.measured.memory_in_use_bytes")) << r.err;
}

}  // namespace
}  // namespace gpuest
