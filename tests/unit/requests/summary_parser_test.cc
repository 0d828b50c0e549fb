#include "requests/summary_parser.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace gpuest::requests {
namespace {

std::string Fixture(const std::string& name) {
  const std::string path = std::string(GPUEST_TEST_DATA_DIR) + "/summaries/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first n lines of text, each with its newline.
std::string Head(const std::string& text, size_t n) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  lines.resize(std::min(n, lines.size()));
  return absl::StrJoin(lines, "\n") + "\n";
}

int64_t ParameterSum(const v1::ModelDescription& model) {
  int64_t sum = 0;
  for (const v1::Layer& layer : model.layers()) sum += layer.parameters();
  return sum;
}

struct Expected {
  const char* file;
  int layers;
  int64_t total_params;  // The file's "Total params".
};

TEST(SummaryParser, EveryFixtureMatchesItsTotals) {
  for (const Expected& e : {Expected{"gpumemnet_resnet50_32.model", 174, 25557032},
                            Expected{"gpumemnet_vgg_32.model", 39, 138357544},
                            Expected{"gpumemnet_mnistcnn_64.model", 6, 1199882},
                            Expected{"torchinfo_resnet50.out", 154, 25557032},
                            Expected{"torchinfo_bert.out", 19, 109482240},
                            Expected{"torchinfo_single_input_all_cols.out", 5, 21840},
                            Expected{"torchinfo_lstm.out", 3, 3784580},
                            Expected{"torchinfo_ascii_only.out", 57, 11689512}}) {
    auto model = ParseModelSummary(Fixture(e.file), e.file);
    ASSERT_TRUE(model.ok()) << e.file << ": " << model.status();
    EXPECT_EQ(model->layers_size(), e.layers) << e.file;
    EXPECT_EQ(ParameterSum(*model), e.total_params) << e.file;
    EXPECT_EQ(model->family(), v1::MODEL_FAMILY_UNSPECIFIED) << e.file;
    EXPECT_EQ(model->batch_size(), 0) << e.file << ": the caller gives the batch size";
    for (const v1::Layer& layer : model->layers()) {
      EXPECT_FALSE(layer.type().empty()) << e.file;
      EXPECT_GE(layer.output_activations(), 0) << e.file;
    }
  }
}

TEST(SummaryParser, TorchsummaryRows) {
  auto model = ParseModelSummary(Fixture("gpumemnet_resnet50_32.model"), "resnet50");
  ASSERT_TRUE(model.ok()) << model.status();
  const v1::Layer& conv = model->layers(0);
  EXPECT_EQ(conv.type(), "Conv2d");
  EXPECT_EQ(conv.name(), "Conv2d-1");
  EXPECT_EQ(conv.output_activations(), 64 * 112 * 112);  // [32, 64, 112, 112] per sample.
  EXPECT_EQ(conv.parameters(), 9408);
  // A flat format: torchsummary's composite blocks are rows too.
  EXPECT_EQ(model->layers(15).type(), "Bottleneck");
  EXPECT_EQ(model->layers(15).parameters(), 0);
  // The row whose label touches the left margin.
  EXPECT_EQ(model->layers(172).type(), "AdaptiveAvgPool2d");
  EXPECT_EQ(model->layers(172).output_activations(), 2048);
  EXPECT_EQ(model->layers(173).type(), "Linear");
  EXPECT_EQ(model->layers(173).output_activations(), 1000);
  EXPECT_EQ(model->layers(173).parameters(), 2049000);
  EXPECT_TRUE(model->input_shape().empty()) << "torchsummary prints no input shape";

  // torchsummary's default -1 batch dimension.
  model = ParseModelSummary(Fixture("gpumemnet_mnistcnn_64.model"), "mnist");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers(0).output_activations(), 32 * 26 * 26);
  EXPECT_EQ(model->layers(3).type(), "Linear");
  EXPECT_EQ(model->layers(3).output_activations(), 128);
  EXPECT_EQ(model->layers(3).parameters(), 1179776);
}

TEST(SummaryParser, TorchinfoLeavesAndDepthLimit) {
  auto model = ParseModelSummary(Fixture("torchinfo_resnet50.out"), "resnet50.out");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers(0).type(), "Conv2d");
  EXPECT_EQ(model->layers(0).name(), "1-1");
  EXPECT_EQ(model->layers(0).output_activations(), 64 * 112 * 112);  // [2, 64, 112, 112]
  EXPECT_EQ(model->layers(0).parameters(), 9408);
  // No container (ResNet, Sequential 1-5, Bottleneck 2-1) is a layer; the downsample
  // Sequential at the depth limit stands for its hidden Conv2d + BatchNorm2d.
  for (const v1::Layer& layer : model->layers()) EXPECT_NE(layer.type(), "Bottleneck");
  EXPECT_EQ(model->layers(4).name(), "3-1");
  EXPECT_EQ(model->layers(12).type(), "Sequential");
  EXPECT_EQ(model->layers(12).name(), "3-9");
  EXPECT_EQ(model->layers(12).parameters(), 16896);
  EXPECT_EQ(model->layers(153).type(), "Linear");
  EXPECT_TRUE(model->input_shape().empty());

  model = ParseModelSummary(Fixture("torchinfo_bert.out"), "bert.out");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers(0).type(), "Embedding");
  EXPECT_EQ(model->layers(0).output_activations(), 512 * 768);
  EXPECT_EQ(model->layers(0).parameters(), 23440896);
  EXPECT_EQ(model->layers(2).output_activations(), 512 * 768);  // [1, 512, 768]
  EXPECT_EQ(model->layers(5).type(), "BertLayer");  // ModuleList 2-6 is a container.
  EXPECT_EQ(model->layers(5).parameters(), 7087872);
  EXPECT_EQ(model->layers(18).type(), "Tanh");
  EXPECT_EQ(model->layers(18).output_activations(), 768);

  // The same ResNet-18 as torchinfo's ASCII tree without depth-idx.
  model = ParseModelSummary(Fixture("torchinfo_ascii_only.out"), "ascii");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->layers(0).type(), "Conv2d");
  EXPECT_EQ(model->layers(0).output_activations(), 64 * 32 * 32);
  EXPECT_EQ(model->layers(56).type(), "Linear");
}

TEST(SummaryParser, TorchinfoColumnsInputShapeAndVarNames) {
  auto model = ParseModelSummary(Fixture("torchinfo_single_input_all_cols.out"), "all");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(
      std::vector<int64_t>(model->input_shape().begin(), model->input_shape().end()),
      (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(model->layers(0).output_activations(), 10 * 24 * 24);
  EXPECT_EQ(model->layers(0).parameters(), 260);
  EXPECT_EQ(model->layers(2).type(), "Dropout2d");
  EXPECT_EQ(model->layers(2).parameters(), 0);
  EXPECT_EQ(model->layers(2).output_activations(), 20 * 8 * 8);

  // Verbose per-parameter rows are not layers; var names make the layer names.
  model = ParseModelSummary(Fixture("torchinfo_lstm.out"), "lstm");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers_size(), 3);
  EXPECT_EQ(model->layers(1).type(), "LSTM");
  EXPECT_EQ(model->layers(1).name(), "encoder");
  EXPECT_EQ(model->layers(1).output_activations(), 100 * 512);
  EXPECT_EQ(model->layers(1).parameters(), 3768320);
}

TEST(SummaryParser, TorchinfoContainerWithItsOwnParameters) {
  const std::string text = Fixture("torchinfo_parameters_with_other_layers.out");
  // As published the file holds two summaries: one model per input, please.
  auto model = ParseModelSummary(text, "params.out");
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::StrContains(model.status().message(), "params.out line 22: a second"))
      << model.status();

  // The first one: the model's own nn.Parameters (8,256) sit on its container row.
  model = ParseModelSummary(Head(text, 20), "params.out");
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->layers_size(), 2);
  EXPECT_EQ(model->layers(0).type(), "ParameterFCNet");
  EXPECT_EQ(model->layers(0).parameters(), 8256);
  EXPECT_EQ(model->layers(1).type(), "Linear");
  EXPECT_EQ(model->layers(1).parameters(), 2080);
  EXPECT_EQ(ParameterSum(*model), 10336);
}

void ExpectError(const absl::StatusOr<v1::ModelDescription>& model,
                 const std::string& want) {
  ASSERT_FALSE(model.ok()) << "parsed, wanted: " << want;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(model.status().message(), want))
      << "got: " << model.status().message() << "\nwant: " << want;
}

TEST(SummaryParser, TruncatedTextNamesTheLine) {
  for (const char* file : {"gpumemnet_resnet50_32.model", "torchinfo_resnet50.out"}) {
    const std::string text = Fixture(file);
    // Cut in the middle of the table.
    ExpectError(ParseModelSummary(Head(text, 50), "summary.txt"),
                "summary.txt line 50: the table ends without its closing '=====' rule");
    // Cut after the closing rule, before the totals.
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    size_t rule = 3;
    while (lines[rule].empty() || lines[rule][0] != '=') ++rule;
    ExpectError(ParseModelSummary(Head(text, rule + 1), "summary.txt"),
                absl::StrCat("summary.txt line ", rule + 1,
                             ": the summary ends before its 'Total params' line"));
    // Cut between the totals.
    ExpectError(ParseModelSummary(Head(text, rule + 2), "summary.txt"),
                absl::StrCat("summary.txt line ", rule + 2,
                             ": the summary ends before its 'Trainable params' line"));
  }
}

TEST(SummaryParser, BadRowsNameTheLine) {
  const std::string mnist = Fixture("gpumemnet_mnistcnn_64.model");
  ExpectError(
      ParseModelSummary(
          absl::StrReplaceAll(mnist, {{"[-1, 64, 24, 24]", "[-1, 64, x, 24]"}}), "m.txt"),
      "m.txt line 5: output shape '[-1, 64, x, 24]' is not a shape");
  ExpectError(
      ParseModelSummary(absl::StrReplaceAll(mnist, {{"18,496", "18,4z6"}}), "m.txt"),
      "m.txt line 5: parameter count '18,4z6' is not a number");
  // A row that went missing: the numbering and the total both notice.
  std::vector<std::string> lines = absl::StrSplit(mnist, '\n');
  lines.erase(lines.begin() + 4);
  ExpectError(ParseModelSummary(absl::StrJoin(lines, "\n"), "m.txt"),
              "m.txt line 5: row 'Dropout-3' should be number 2");
  // An altered count: the rows no longer add up to the total.
  ExpectError(
      ParseModelSummary(absl::StrReplaceAll(mnist, {{"18,496", "18,497"}}), "m.txt"),
      "m.txt line 11: Total params is 1199882 but the rows add up to 1199883");
  ExpectError(ParseModelSummary(absl::StrReplaceAll(Fixture("torchinfo_bert.out"),
                                                    {{"590,592", "590,593"}}),
                                "b"),
              "b line 29: Total params is 109482240 but the rows add up to 109482241");
  // A torchinfo tree whose depth-idx disagrees with its indentation.
  ExpectError(
      ParseModelSummary(absl::StrReplaceAll(Fixture("torchinfo_bert.out"),
                                            {{"Embedding: 2-1", "Embedding: 3-1"}}),
                        "b"),
      "b line 6: depth-idx '3-1'");
}

TEST(SummaryParser, GarbageAndHeaderlessTables) {
  ExpectError(ParseModelSummary("hello\nworld\n", "g.txt"), "g.txt: not a model summary");
  ExpectError(ParseModelSummary("", "g.txt"), "g.txt: not a model summary");
  // The table without its header lines.
  std::vector<std::string> lines =
      absl::StrSplit(Fixture("gpumemnet_mnistcnn_64.model"), '\n');
  lines.erase(lines.begin(), lines.begin() + 3);
  ExpectError(ParseModelSummary(absl::StrJoin(lines, "\n"), "g.txt"),
              "g.txt line 1: a model-summary row without the table header");
  lines = absl::StrSplit(Fixture("torchinfo_bert.out"), '\n');
  lines.erase(lines.begin(), lines.begin() + 4);
  ExpectError(ParseModelSummary(absl::StrJoin(lines, "\n"), "g.txt"),
              "g.txt line 1: a model-summary row without the table header");
  // torchinfo without input_size prints no Output Shape column.
  ExpectError(ParseModelSummary("=================================\n"
                                "Layer (type:depth-idx)      Param #\n"
                                "=================================\n"
                                "Net                         --\n"
                                "+-Linear: 1-1               10\n"
                                "=================================\n"
                                "Total params: 10\n"
                                "Trainable params: 10\n"
                                "Non-trainable params: 0\n",
                                "n"),
              "n line 2: the table has no 'Output Shape' column");
}

}  // namespace
}  // namespace gpuest::requests
