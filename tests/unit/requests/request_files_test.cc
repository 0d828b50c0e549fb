// client/cli/input: what `gpuest estimate FILE|-` reads, from real files and stdin.
#include "requests/request_files.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace gpuest::requests {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes text to a file of its own and returns the path.
std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/cli_input_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Runs ReadRequest("-") with text on std::cin.
absl::StatusOr<v1::EstimateRequest> ReadStdin(const std::string& text,
                                              const ReadOptions& options = {}) {
  std::istringstream in(text);
  std::streambuf* saved = std::cin.rdbuf(in.rdbuf());
  auto request = ReadRequest("-", options);
  std::cin.rdbuf(saved);
  return request;
}

void ExpectInvalid(const absl::StatusOr<v1::EstimateRequest>& request,
                   const std::vector<std::string>& says) {
  ASSERT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument)
      << request.status();
  for (const std::string& s : says) {
    EXPECT_TRUE(absl::StrContains(request.status().message(), s))
        << "want \"" << s << "\" in: " << request.status().message();
  }
}

const std::string kMlp = std::string(GPUEST_EXAMPLES_DIR) + "/mlp.json";
const std::string kSummary =
    std::string(GPUEST_TEST_DATA_DIR) + "/summaries/gpumemnet_mnistcnn_64.model";

TEST(CliInput, AModelDescriptionBecomesTheRequestsModel) {
  v1::ModelDescription want;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadText(kMlp), &want).ok());
  auto request = ReadRequest(kMlp);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->has_model());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(request->model(), want));
  EXPECT_EQ(request->model().batch_size(), 996);
  EXPECT_TRUE(request->gpu().empty());
  EXPECT_TRUE(request->estimators().empty());
}

TEST(CliInput, AWholeEstimateRequestIsTakenAsIs) {
  const std::string path =
      WriteTemp("request.json",
                R"({"features": {"batchSize": 8, "totalParameters": 1000,
                    "layerCounts": {"Conv2d": 3}},
                    "gpu": "t4", "estimators": ["horus"]})");
  auto request = ReadRequest(path);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->has_features());
  EXPECT_EQ(request->features().batch_size(), 8);
  EXPECT_EQ(request->features().total_parameters(), 1000);
  EXPECT_EQ(request->features().layer_counts().at("Conv2d"), 3);
  EXPECT_EQ(request->gpu(), "t4");
  ASSERT_EQ(request->estimators_size(), 1);
  EXPECT_EQ(request->estimators(0), "horus");

  auto with_model =
      ReadStdin(R"({"model": {"name": "m", "batchSize": 4}, "gpu": "a100"})");
  ASSERT_TRUE(with_model.ok()) << with_model.status();
  EXPECT_EQ(with_model->model().name(), "m");
  EXPECT_EQ(with_model->model().batch_size(), 4);
  EXPECT_EQ(with_model->gpu(), "a100");
}

TEST(CliInput, BatchSizeOverridesTheFilesAndMustBePositive) {
  ReadOptions options;
  options.batch_size = 7;
  auto model = ReadRequest(kMlp, options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->model().batch_size(), 7);
  auto features = ReadStdin(R"({"features": {"batchSize": 8}})", options);
  ASSERT_TRUE(features.ok()) << features.status();
  EXPECT_EQ(features->features().batch_size(), 7);
  EXPECT_FALSE(features->has_model());

  options.batch_size = -1;
  ExpectInvalid(ReadRequest(kMlp, options), {"--batch-size", "-1"});
}

// A trace answers for the batch it was recorded at only: another --batch-size is
// refused before any call, with what to do; the same batch, or no trace, is fine.
TEST(CliInput, ATracedDescriptionKeepsItsBatchSize) {
  const std::string traced =
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json";
  ReadOptions options;
  options.batch_size = 256;
  ExpectInvalid(ReadRequest(traced, options),
                {traced, "--batch-size 256", "batch size 8", "model.trace",
                 "describe the model again at batch 256", "--no-trace"});
  // Inside a whole EstimateRequest too.
  v1::EstimateRequest request;
  *request.mutable_model() = ReadRequest(traced)->model();
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(request, &json).ok());
  ExpectInvalid(ReadStdin(json, options), {"stdin", "model.trace"});

  options.batch_size = 8;
  auto same = ReadRequest(traced, options);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->model().batch_size(), 8);
  EXPECT_GT(same->model().trace().size_bytes_size(), 0);

  // A trace that records its batch (today's describer) is held to it by the same rule
  // the server applies, naming the field.
  request.mutable_model()->mutable_trace()->set_batch_size(8);
  json.clear();  // MessageToJsonString appends.
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(request, &json).ok());
  options.batch_size = 256;
  ExpectInvalid(ReadStdin(json, options),
                {"stdin", "--batch-size 256", "model.trace.batch_size",
                 "recorded at batch 8", "describe the model again at batch 256"});

  request.mutable_model()->clear_trace();
  json.clear();
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(request, &json).ok());
  auto untraced = ReadStdin(json, options);
  ASSERT_TRUE(untraced.ok()) << untraced.status();
  EXPECT_EQ(untraced->model().batch_size(), 256);
}

TEST(CliInput, BadJsonNamesTheFileAndThePosition) {
  const std::string path = WriteTemp("broken.json", "{ this is not json");
  ExpectInvalid(ReadRequest(path),
                {path, "not a ModelDescription", "{ this is not json"});
  ExpectInvalid(ReadStdin("{\"batchSize\": 4,\n \"layers\": [}"), {"stdin: "});
}

TEST(CliInput, ABadValueNamesItsField) {
  ExpectInvalid(ReadStdin(R"({"batchSize": "many"})"),
                {"not a ModelDescription", "batch_size", "many"});
  ExpectInvalid(ReadStdin(R"({"layers": [{"type": "Linear", "parameters": "x"}]})"),
                {"layers[0].parameters"});
  ExpectInvalid(ReadStdin(R"({"family": "MODEL_FAMILY_NOPE"})"),
                {"family", "MODEL_FAMILY_NOPE"});
  ExpectInvalid(ReadStdin(R"({"bacthSize": 4})"), {"bacthSize"});
  // Inside an EstimateRequest, the field is named by its path in the request; that it
  // is no ModelDescription is beside the point.
  ExpectInvalid(ReadStdin(R"({"model": {"batchSize": "zz"}, "gpu": "t4"})"),
                {"stdin: not an EstimateRequest", "model.batch_size", "zz"});
  ExpectInvalid(ReadStdin(R"({"model": {"layers": [{"tpye": "Linear"}]}})"),
                {"model.layers[0]", "tpye"});
}

// Each reader is as strict as its sender: gpuest.describe (json.dumps) and the CLI's
// --json write every key once, so a field set twice is refused, not read as whichever
// copy protobuf's parser keeps (the last; a repeated field's two lists appended).
TEST(CliInput, AFieldSetTwiceIsRefusedNamingIt) {
  ExpectInvalid(ReadStdin(R"({"batchSize": 1, "batchSize": 64})"),
                {"stdin: key \"batchSize\" appears twice", "the top level"});
  ExpectInvalid(
      ReadStdin(R"({"batchSize": 1, "batch_size": 64})"),
      {"stdin: field batch_size is given twice", "\"batchSize\"", "\"batch_size\""});
  ExpectInvalid(
      ReadStdin(R"({"layers": [{"type": "Linear"}], "layers": [{"type": "ReLU"}]})"),
      {"key \"layers\" appears twice"});
  ExpectInvalid(ReadStdin(R"({"batchSize": 2, "layers": [{"type": "Linear",
                 "outputActivations": 8}, {"type": "ReLU", "outputActivations": 8,
                 "output_activations": 9}]})"),
                {"field output_activations is given twice", "(in layers[1])"});
  ExpectInvalid(ReadStdin(R"({"model": {"batchSize": 4, "batch_size": 8}, "gpu": "t4"})"),
                {"field batch_size is given twice", "(in model)"});
  // The same key in two objects is two fields.
  EXPECT_TRUE(
      ReadStdin(R"({"batchSize": 2, "layers": [{"type": "Linear", "parameters": 4},
                 {"type": "ReLU", "parameters": 0}]})")
          .ok());
}

TEST(CliInput, AFileOrStdinOverTheBoundIsRefused) {
  const std::string path = WriteTemp("huge.json", "{}");
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxRequestFileBytes) + 1), 0);
  ExpectInvalid(ReadRequest(path), {path, ": 67108865 bytes, over the limit"});
  std::remove(path.c_str());
  ExpectInvalid(ReadStdin(std::string(kMaxRequestFileBytes + 1, ' ')),
                {"stdin: over the limit of 67108864 bytes"});
}

TEST(CliInput, UnreadableAndEmptyInputs) {
  auto missing = ReadRequest("/nonexistent/model.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/nonexistent/model.json"))
      << missing.status();
  ExpectInvalid(ReadStdin(" \n\t "), {"stdin: empty input"});
  ExpectInvalid(ReadRequest(WriteTemp("empty.json", "")), {"empty.json: empty input"});
}

TEST(CliInput, AModelSummaryNeedsTheBatchSizeAndIsNamedAfterTheFile) {
  ExpectInvalid(ReadRequest(kSummary), {kSummary, "--batch-size"});

  ReadOptions options;
  options.batch_size = 64;
  auto request = ReadRequest(kSummary, options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->model().name(), "gpumemnet_mnistcnn_64.model");
  EXPECT_EQ(request->model().batch_size(), 64);
  EXPECT_EQ(request->model().layers_size(), 6);
  EXPECT_EQ(request->model().layers(0).type(), "Conv2d");

  auto from_stdin = ReadStdin(ReadText(kSummary), options);
  ASSERT_TRUE(from_stdin.ok()) << from_stdin.status();
  EXPECT_EQ(from_stdin->model().name(), "stdin");
  EXPECT_EQ(from_stdin->model().layers_size(), 6);

  // Text that is neither JSON nor a summary: the parser's complaint, with the name.
  ExpectInvalid(ReadStdin("hello\nworld\n", options), {"stdin: not a model summary"});
}

}  // namespace
}  // namespace gpuest::requests
