// The GPUMemNet estimators served by the real gpuest-server, asked through the CLI as a
// user would: every example family is answered by its family's two ensembles, and a
// GPT-2-style description (Conv1D layers) is answered with an out-of-distribution
// warning.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "gpuest/v1/estimate.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_fixture.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::ServerProcess;

class GpuMemNetCliTest : public testing::CliAgainstServer {
 protected:
  static v1::EstimateResponse EstimateJson(const std::string& path,
                                           std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"estimate", "--json", path};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    v1::EstimateResponse response;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &response).ok())
        << r.out;
    return response;
  }
};

TEST_F(GpuMemNetCliTest, ExamplesAreAnsweredByTheirFamilysEnsembles) {
  for (const std::string family : {"mlp", "cnn", "transformer"}) {
    const v1::EstimateResponse response =
        EstimateJson(std::string(GPUEST_EXAMPLES_DIR) + "/" + family + ".json");
    std::vector<std::string> ids;
    for (const v1::EstimatorResult& r : response.results()) {
      if (!absl::StartsWith(r.estimator_id(), "gpumemnet-")) continue;
      ids.push_back(r.estimator_id());
      EXPECT_EQ(r.kind(), v1::ESTIMATOR_KIND_CLASSIFIER);
      ASSERT_GT(r.memory().bins_size(), 1);
      double sum = 0;
      for (const auto& b : r.memory().bins()) sum += b.probability();
      EXPECT_NEAR(sum, 1.0, 1e-4);
      EXPECT_GT(r.memory().point_bytes(), 0u);
      EXPECT_TRUE(absl::StrContains(r.basis(), "ensemble")) << r.basis();
      EXPECT_EQ(r.utilization_size(), family == "transformer" ? 0 : 4)
          << r.estimator_id();
    }
    EXPECT_EQ(ids, (std::vector<std::string>{"gpumemnet-" + family + "-mlp",
                                             "gpumemnet-" + family + "-transformer"}))
        << family;
    // The layer-rules simulator outranks the classifiers, which outrank the formula
    // (recommendation.h; the ranking itself is unit-tested).
    EXPECT_EQ(response.recommendation().estimator_id(), "analytic")
        << response.recommendation().ShortDebugString();
  }
  // The table form shows the classifiers and their utilization classes.
  const CommandResult r =
      Cli({"estimate", std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "gpumemnet-cnn-transformer")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "utilization (gpumemnet-cnn-mlp")) << r.out;
}

TEST_F(GpuMemNetCliTest, Gpt2StyleConv1DIsOutOfDistribution) {
  std::ifstream in(std::string(GPUEST_EXAMPLES_DIR) + "/transformer.json");
  nlohmann::json description = nlohmann::json::parse(in);
  int renamed = 0;
  for (auto& layer : description["layers"]) {
    if (layer["type"] == "Linear") {
      layer["type"] = "Conv1D";
      ++renamed;
    }
  }
  ASSERT_GT(renamed, 0);
  // Named for this process: TempDir() is shared by every checkout.
  const std::string path =
      ::testing::TempDir() + "/gpt2_style_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << description.dump();
  const v1::EstimateResponse response = EstimateJson(path);
  EXPECT_EQ(response.family(), v1::MODEL_FAMILY_TRANSFORMER);
  int warned = 0;
  for (const v1::Warning& w : response.warnings()) {
    if (w.code() == v1::WARNING_CODE_OUT_OF_DISTRIBUTION &&
        absl::StrContains(w.message(), "Conv1D") &&
        absl::StartsWith(w.estimator_id(), "gpumemnet-transformer-")) {
      ++warned;
    }
  }
  EXPECT_EQ(warned, 2) << response.ShortDebugString();
  // The JSON says so in each result, false printed as false: those two are out of
  // their distribution.
  int out = 0;
  for (const v1::EstimatorResult& r : response.results()) {
    EXPECT_TRUE(r.has_in_distribution()) << r.estimator_id();
    if (absl::StartsWith(r.estimator_id(), "gpumemnet-transformer-")) {
      out += !r.in_distribution();
    }
  }
  EXPECT_EQ(out, 2) << response.ShortDebugString();
}

TEST_F(GpuMemNetCliTest, AnotherGpuIsAnExtrapolation) {
  const v1::EstimateResponse response = EstimateJson(
      std::string(GPUEST_EXAMPLES_DIR) + "/mlp.json", {"--gpu", "h100-80gb"});
  int warned = 0;
  for (const v1::Warning& w : response.warnings()) {
    warned += w.code() == v1::WARNING_CODE_GPU_EXTRAPOLATION;
  }
  EXPECT_EQ(warned, 2);
}

TEST_F(GpuMemNetCliTest, ModelsListsTheEnsembles) {
  const CommandResult r = Cli({"--json", "models"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v1::ListEstimatorsResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &list).ok()) << r.out;
  int gpumemnet = 0;
  for (const v1::EstimatorInfo& e : list.estimators()) {
    if (!absl::StartsWith(e.id(), "gpumemnet-")) continue;
    ++gpumemnet;
    EXPECT_GT(e.training_metrics().at("memory_accuracy"), 0.5) << e.id();
  }
  EXPECT_EQ(gpumemnet, 6);
}

// Where the ensembles run, said three ways by a server started with --device auto:
// the models command (JSON and table), /metrics and the log. This build's libtorch is
// Debian's CPU-only one, so "cpu"; a run on a CUDA build sets
// GPUEST_TEST_EXPECT_DEVICE=cuda.
TEST(ServerDevice, AutoSaysWhereEachEstimatorRuns) {
  const char* env = std::getenv("GPUEST_TEST_EXPECT_DEVICE");
  const std::string ml_device = env != nullptr ? env : "cpu";
  auto server = ServerProcess::Start({"--device", "auto"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = "--target=" + (*server)->target();

  const CommandResult json = RunCommand({GPUEST_CLI_PATH, target, "--json", "models"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::ListEstimatorsResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &list).ok())
      << json.out;
  ASSERT_GT(list.estimators_size(), 6);
  int ml = 0;
  for (const v1::EstimatorInfo& e : list.estimators()) {
    const bool is_ml = absl::StartsWith(e.id(), "gpumemnet-");
    ml += is_ml;
    EXPECT_EQ(e.device(), is_ml ? ml_device : "cpu") << e.id();
  }
  EXPECT_EQ(ml, 6);

  // The table's DEVICE column, the fifth.
  const CommandResult table = RunCommand({GPUEST_CLI_PATH, target, "models"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  bool header = false, row = false;
  for (absl::string_view line : absl::StrSplit(table.out, '\n')) {
    const std::vector<absl::string_view> cells =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() < 5) continue;
    header = header || (cells[0] == "ID" && cells[4] == "DEVICE");
    row = row || (cells[0] == "gpumemnet-cnn-transformer" && cells[4] == ml_device);
  }
  EXPECT_TRUE(header && row) << table.out;

  auto text = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = testing::ParsePrometheusText(*text);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(testing::SumSamples(*samples, "gpuest_estimator_info"),
            list.estimators_size());
  for (const v1::EstimatorInfo& e : list.estimators()) {
    EXPECT_EQ(testing::SumSamples(*samples, "gpuest_estimator_info",
                                  {{"estimator", e.id()}, {"device", e.device()}}),
              1)
        << e.id();
  }

  const std::string log = (*server)->Log();
  EXPECT_TRUE(absl::StrContains(log, "device=auto")) << log;
  EXPECT_TRUE(absl::StrContains(log, "loaded estimator gpumemnet-mlp-mlp (version ") &&
              absl::StrContains(log, "family mlp) on " + ml_device))
      << log;
}

// --device cuda where libtorch sees no CUDA device: the server does not start, and
// says why in one line.
TEST(ServerDevice, CudaWithoutCudaRefusesToStartInOneLine) {
  if (std::getenv("GPUEST_TEST_EXPECT_DEVICE") != nullptr) {
    GTEST_SKIP() << "a CUDA machine: --device cuda starts there";
  }
  auto server = ServerProcess::Start({"--device", "cuda"});
  ASSERT_FALSE(server.ok()) << "started with --device cuda on a machine without CUDA";
  const std::string message(server.status().message());
  EXPECT_TRUE(absl::StrContains(message, "exited with 1")) << message;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    if (!absl::StrContains(line, "cannot start")) continue;
    ++lines;
    EXPECT_TRUE(absl::StrContains(
        line, "device 'cuda' requested, but libtorch sees no CUDA device"))
        << line;
  }
  EXPECT_EQ(lines, 1) << message;
}

}  // namespace
}  // namespace gpuest
