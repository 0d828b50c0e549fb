// The gpuest CLI and the server's own command line, run as a user would.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/render.h"
#include "google/protobuf/util/json_util.h"
#include "gpuest/v1/estimate.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_fixture.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::ServerProcess;

const std::string kCli = GPUEST_CLI_PATH;
std::string Example(const std::string& name) {
  return std::string(GPUEST_EXAMPLES_DIR) + "/" + name;
}
std::string Summary(const std::string& name) {
  return std::string(GPUEST_TEST_DATA_DIR) + "/summaries/" + name;
}

class CliTest : public testing::CliAgainstServer {};

TEST_F(CliTest, EstimatePrintsATable) {
  for (const char* file : {"mlp.json", "cnn.json", "transformer.json"}) {
    const CommandResult r = Cli({"estimate", Example(file), "--gpu", "a100-40gb"});
    EXPECT_EQ(r.exit_code, 0) << file << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "horus")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "recommended:")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "fits a100-40gb")) << r.out;
  }
}

// The table and --json print the same answer (estimates are deterministic), and the
// JSON keeps `fits: false`, which protobuf leaves out by default.
TEST_F(CliTest, TableAndJsonAgreeAndJsonSaysItDoesNotFit) {
  const std::vector<std::string> args = {"estimate", Example("cnn.json"), "--gpu",
                                         "t4",       "--batch-size",      "100000"};
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const CommandResult table = Cli(args);
  const CommandResult json = Cli(json_args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  const nlohmann::json& rec = doc.at("recommendation");
  ASSERT_TRUE(rec.at("fit").contains("fits")) << json.out;
  EXPECT_EQ(rec.at("fit").at("fits"), false) << json.out;
  const uint64_t bytes = std::stoull(rec.at("memoryBytes").get<std::string>());
  EXPECT_TRUE(absl::StrContains(table.out,
                                absl::StrCat("recommended: ", cli::FormatBytes(bytes),
                                             " to reserve: the requirement (",
                                             rec.at("basis").get<std::string>(), ")\n")))
      << table.out << json.out;
  EXPECT_TRUE(absl::StrContains(table.out, "fits t4 (15.00 GiB): NO, short by "))
      << table.out;
}

TEST_F(CliTest, EstimateReadsStdin) {
  const CommandResult r =
      Cli({"estimate", "-"}, testing::ReadFileOrDie(Example("mlp.json")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "synthetic-mlp-pyramid")) << r.out;
}

TEST_F(CliTest, BadInputExitsTwo) {
  CommandResult r = Cli({"estimate", "/nonexistent.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "/nonexistent.json")) << r.err;

  r = Cli({"estimate", "-"}, "{ this is not json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "not a ModelDescription")) << r.err;

  r = Cli({"estimate", "-"},
          R"({"batchSize": 0, "layers": [{"type": "Linear", "parameters": 4}]})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "INVALID_ARGUMENT: model.batch_size")) << r.err;

  r = Cli({"estimate", Example("mlp.json"), "--gpu", "abacus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "gpu: unknown GPU 'abacus'")) << r.err;

  EXPECT_EQ(Cli({"estimate"}).exit_code, 2);
  EXPECT_EQ(Cli({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Cli({"--no-such-flag", "models"}).exit_code, 2);
  EXPECT_EQ(RunCommand({kCli}).exit_code, 2);
}

// The deadline covers reading the file: a description too large to parse within
// --timeout is refused as that (exit 2, the file named), not answered late and not
// blamed on the server (exit 3), which the Slurm plugin reads as an outage.
TEST_F(CliTest, TheDeadlineCoversReadingTheDescription) {
  const std::string path = ::testing::TempDir() + "/huge_description.json";
  {
    std::ofstream out(path);
    out << R"({"name": "huge", "batchSize": 8, "layers": [{"type": "Linear",
      "outputActivations": 10, "parameters": 10}], "trace": {"sizeBytes": [)";
    constexpr int kEvents = 1500000;
    for (int i = 0; i < kEvents; ++i) out << (i ? ",512" : "512");
    out << R"(], "allocAt": [)";
    for (int i = 0; i < kEvents; ++i) out << (i ? "," : "") << i + 1;
    out << R"(], "freeAt": [)";
    for (int i = 0; i < kEvents; ++i) out << (i ? ",0" : "0");
    out << R"(], "category": [)";
    for (int i = 0; i < kEvents; ++i) out << (i ? ",5" : "5");
    out << "]}}";
  }
  const CommandResult r = Cli({"estimate", path, "--timeout", "20ms"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "too large to be answered in time")) << r.err;
  std::filesystem::remove(path);
}

// A trace answers for the batch it was recorded at only. The CLI refuses another
// --batch-size itself, before any call: pointed at no server, it still exits 2 (bad
// input), not 3 (unavailable).
TEST_F(CliTest, ATracedDescriptionAtAnotherBatchSizeIsRefused) {
  const std::string traced =
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json";
  CommandResult r = Cli({"estimate", traced, "--batch-size", "256"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  for (const char* says : {"INVALID_ARGUMENT", "--batch-size 256", "batch size 8",
                           "model.trace", "describe the model again at batch 256",
                           "python3 -m gpuest.describe", "--no-trace"}) {
    EXPECT_TRUE(absl::StrContains(r.err, says)) << says << "\n" << r.err;
  }
  r = RunCommand(
      {kCli, "--target", "127.0.0.1:1", "estimate", traced, "--batch-size", "256"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "model.trace")) << r.err;

  // Its own batch size is no change.
  r = Cli({"estimate", traced, "--batch-size", "8"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "(transformer, batch 8)")) << r.out;
}

// A job over several GPUs (issue "llm"): the flags set the description's parallelism,
// and the estimate is per GPU; ZeRO-3 over 8 GPUs needs less per GPU than one GPU.
TEST_F(CliTest, DataParallelFlagsGiveAPerGpuEstimate) {
  const std::string traced =
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json";
  auto allocated = [&](std::vector<std::string> extra) -> std::pair<double, std::string> {
    std::vector<std::string> args = {"estimate", traced, "--estimators", "allocsim",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j.contains("results") || j["results"].empty()) return {0, ""};
    const nlohmann::json& result = j["results"][0];
    return {std::stod(result["memory"]["allocatedPeakBytes"].get<std::string>()),
            result["basis"].get<std::string>()};
  };
  const auto [one, one_basis] = allocated({});
  const auto [zero3, zero3_basis] =
      allocated({"--data-parallel", "8", "--sharding", "zero3"});
  EXPECT_LT(zero3, one);
  EXPECT_TRUE(absl::StrContains(zero3_basis, "ZeRO-3 / FSDP FULL_SHARD over 8 GPUs"))
      << zero3_basis;
  EXPECT_FALSE(absl::StrContains(one_basis, "per GPU, one rank")) << one_basis;
  // A word the flag does not know is bad input, naming the flag and the choices.
  const CommandResult bad =
      Cli({"estimate", traced, "--data-parallel", "8", "--sharding", "zero9"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "--sharding: 'zero9'")) << bad.err;
  EXPECT_TRUE(absl::StrContains(bad.err, "fsdp-full-shard")) << bad.err;
}

TEST_F(CliTest, EstimateTakesAModelSummary) {
  for (const char* file : {"gpumemnet_resnet50_32.model", "torchinfo_bert.out"}) {
    const CommandResult r = Cli({"estimate", Summary(file), "--batch-size", "32"});
    EXPECT_EQ(r.exit_code, 0) << file << r.err;
    EXPECT_TRUE(absl::StrContains(r.out, "horus")) << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, file)) << "named after the file\n" << r.out;
  }
  // A summary does not say the training batch size.
  CommandResult r = Cli({"estimate", Summary("gpumemnet_resnet50_32.model")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--batch-size")) << r.err;

  // Cut off in the middle of the table: the error names the line.
  // In a directory of this process's own: TempDir() is shared by every checkout.
  const std::string dir = ::testing::TempDir() + "/cli_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string truncated = dir + "/truncated_summary.txt";
  {
    const std::string text =
        testing::ReadFileOrDie(Summary("gpumemnet_resnet50_32.model"));
    const size_t cut = text.rfind('\n', text.find("Conv2d-37")) + 1;  // After row 36.
    std::ofstream(truncated) << text.substr(0, cut);
  }
  r = Cli({"estimate", truncated, "--batch-size", "32"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "truncated_summary.txt line 39: ")) << r.err;
  std::filesystem::remove_all(dir);
}

TEST_F(CliTest, ModelsAndHealth) {
  CommandResult r = Cli({"models"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "horus")) << r.out;
  r = Cli({"health"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "SERVING")) << r.out;
}

TEST_F(CliTest, TargetComesFromTheEnvironment) {
  // health names the target it asked, so a server on the default 127.0.0.1:50051
  // (deploy/serve.sh) cannot pass this test for the one it started.
  const CommandResult r =
      RunCommand({kCli, "health"}, "", {"GPUEST_TARGET=" + server_->target()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, server_->target() + " SERVING\n");
}

TEST(CliUnavailable, NoServerExitsThree) {
  // Calls wait for a server up to the deadline: a short one keeps this test short.
  CommandResult r =
      RunCommand({kCli, "--target", "127.0.0.1:1", "--timeout=1s", "health"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  r = RunCommand(
      {kCli, "--target", "127.0.0.1:1", "--timeout=1s", "estimate", Example("mlp.json")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "UNAVAILABLE")) << r.err;
}

TEST(CliHelp, TellsTheCommandsAndExitCodes) {
  const CommandResult r = RunCommand({kCli, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word :
       {"estimate FILE", "models", "health", "--target", "--gpu", "--json",
        "--batch-size", "torchsummary", "torchinfo", "GPUEST_TARGET", "Exit codes"}) {
    EXPECT_TRUE(absl::StrContains(r.out, word)) << word << "\n" << r.out;
  }
}

TEST(ServerCommandLine, HelpBadFlagsAndMissingModels) {
  CommandResult r = RunCommand({GPUEST_SERVER_PATH, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--listen", "--metrics-listen", "--models", "--device", "--workers",
        "--max-message-size", "--log-level", "--log-format", "--grace-period"}) {
    EXPECT_TRUE(absl::StrContains(r.out, flag)) << flag;
  }
  EXPECT_EQ(RunCommand({GPUEST_SERVER_PATH, "--bogus"}).exit_code, 2);
  EXPECT_EQ(RunCommand({GPUEST_SERVER_PATH, "--workers=many"}).exit_code, 2);
  EXPECT_EQ(RunCommand({GPUEST_SERVER_PATH, "--inline_max_request_bytes=-1"}).exit_code,
            2);
  EXPECT_EQ(RunCommand({GPUEST_SERVER_PATH, "--log-format=xml"}).exit_code, 2);
  r = RunCommand({GPUEST_SERVER_PATH, "--models=/nonexistent", "--listen=127.0.0.1:0",
                  "--metrics-listen="});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "/nonexistent")) << r.err;
}

TEST(ServerCommandLine, AnEmptyMetricsAddressServesNoMetrics) {
  auto server = ServerProcess::Start({"--metrics-listen="});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->metrics_port(), 0);
  EXPECT_GT((*server)->grpc_port(), 0);
}

TEST(ServerCommandLine, PerRequestLinesOnlyAtDebugLevel) {
  for (const char* level : {"info", "debug"}) {
    auto server = ServerProcess::Start({std::string("--log-level=") + level});
    ASSERT_TRUE(server.ok()) << server.status();
    const CommandResult r = RunCommand(
        {kCli, "--target", (*server)->target(), "estimate", Example("mlp.json")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    (*server)->Signal(SIGTERM);
    ASSERT_TRUE((*server)->WaitForExit(absl::Seconds(15)).ok());
    EXPECT_EQ(absl::StrContains((*server)->Log(), " results in "),
              std::string(level) == "debug")
        << level << ":\n"
        << (*server)->Log();
  }
}

TEST(ServerCommandLine, JsonLogsAreOneObjectPerLine) {
  auto server = ServerProcess::Start({"--log-format=json"});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForExit(absl::Seconds(15)).ok());
  int lines = 0;
  for (absl::string_view line :
       absl::StrSplit((*server)->Log(), '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "{\"time\":\"") && absl::EndsWith(line, "}"))
        << line;
    ++lines;
  }
  EXPECT_GE(lines, 4);
}

}  // namespace
}  // namespace gpuest
