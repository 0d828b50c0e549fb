// lab/data/gpumemnet_csv: GPUMemNet's CSVs (measured_rows.h's first reader), on small
// files: a row's layers, shape, activation and measurements; a bad row named.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "lab/data/measured_rows.h"
#include "tests/unit/lab/data/row_files.h"

namespace gpuest::data {
namespace {

using row_files::TempFile;

TEST(MeasuredRows, ReadsAGpuMemNetCsv) {
  const std::string text =
      "Filename,Activations-Params,Batch Size,Max GPU Memory (MiB),Activation "
      "Function,Status,Avg SMACT,Avg GPUTL,Total Parameters\n"
      "input_channels:3_input_size:32_x,\"[('conv2d', 100, 10), ('linear', 10, "
      "5)]\",16,2048,ReLU,SUCCESSFUL,0.25,-1,15\n"
      "\n"
      "input_channels:1_input_size:8_y,\"[('linear', 4, 4)]\",8,40000,None,OOM_CRASH,"
      "0.5,0.1,4\n";
  const std::string path = TempFile("rows.csv", text);
  auto file = ReadGpuMemNetCsv(path, v1::MODEL_FAMILY_CNN);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->name, "rows.csv");
  EXPECT_EQ(file->sha256, common::Sha256Hex(text));
  EXPECT_EQ(file->utilization_metrics, (std::vector<std::string>{"SMACT", "GPUTL"}));
  ASSERT_EQ(file->rows.size(), 2u);

  const MeasuredRow& first = file->rows[0];
  EXPECT_EQ(first.file_name, "input_channels:3_input_size:32_x");
  EXPECT_EQ(first.model.name(), first.file_name);
  EXPECT_EQ(first.model.family(), v1::MODEL_FAMILY_CNN);
  EXPECT_EQ(first.model.batch_size(), 16);
  ASSERT_EQ(first.model.layers_size(), 2);
  EXPECT_EQ(first.model.layers(0).type(), "conv2d");
  EXPECT_EQ(first.model.layers(1).parameters(), 5);
  EXPECT_EQ(first.model.input_shape_size(), 3);
  EXPECT_EQ(first.model.activation_function(), "ReLU");
  EXPECT_EQ(first.peak_mib, 2048);
  EXPECT_FALSE(first.oom);
  // -1: not measured, so absent.
  EXPECT_EQ(first.utilization, (std::map<std::string, double>{{"SMACT", 0.25}}));
  EXPECT_EQ(first.columns.at("Total Parameters"), 15);

  const MeasuredRow& second = file->rows[1];
  EXPECT_TRUE(second.oom);
  EXPECT_EQ(second.model.activation_function(), "");  // "None" in the file.
}

TEST(MeasuredRows, ABadCsvRowIsNamed) {
  const std::string path = TempFile(
      "bad.csv",
      "Filename,Activations-Params,Batch Size,Max GPU Memory (MiB),Activation Function\n"
      "a,\"[('linear', 4, 4)]\",8,100,ReLU\n"
      "b,\"[('linear', 4, 4)]\",eight,100,ReLU\n");
  auto file = ReadGpuMemNetCsv(path, v1::MODEL_FAMILY_MLP);
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(absl::StrContains(file.status().message(), path + " row 3: bad Batch Size"))
      << file.status();

  auto no_column = ReadGpuMemNetCsv(TempFile("short.csv", "Filename,Batch Size\n"),
                                    v1::MODEL_FAMILY_MLP);
  EXPECT_TRUE(absl::StrContains(no_column.status().message(), "no column"))
      << no_column.status();
  EXPECT_EQ(ReadGpuMemNetCsv("/nonexistent.csv", v1::MODEL_FAMILY_MLP).status().code(),
            absl::StatusCode::kNotFound);
}

// The CSV's pieces: a record split as RFC 4180 quotes it, and the layer list's text.
TEST(GpuMemNetCsv, SplitsQuotedRecordsAndReadsLayerLists) {
  EXPECT_EQ(SplitCsvRecord(R"(a,"b, c",,"say ""hi""")"),
            (std::vector<std::string>{"a", "b, c", "", "say \"hi\""}));
  auto layers = ParseLayerList("[('conv2d', 100, 10), ('linear', 10, 5)]");
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_EQ((*layers)[0].type(), "conv2d");
  EXPECT_EQ((*layers)[0].output_activations(), 100);
  EXPECT_EQ((*layers)[0].parameters(), 10);
  EXPECT_EQ((*layers)[1].type(), "linear");
  EXPECT_FALSE(ParseLayerList("[('linear', ten, 5)]").ok());
}

}  // namespace
}  // namespace gpuest::data
