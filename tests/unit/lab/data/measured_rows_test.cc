// The one row reader (lab/data/measured_rows.h), on small files of both formats.
#include "lab/data/measured_rows.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::data {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(common::WriteTextFile(path, text).ok());
  return path;
}

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

TEST(MeasuredRows, ReadsTheExportersJsonLines) {
  const std::string text =
      R"({"fileName":"t1","description":{"name":"t1","batchSize":"4","layers":[)"
      R"({"type":"Linear","outputActivations":"8","parameters":"72"}]},)"
      R"("maxMemoryMib":1234.5,"status":"SUCCESSFUL","matched":true})"
      "\n"
      R"({"fileName":"t2","description":{"name":"t2"},"maxMemoryMib":0,)"
      R"("status":"OOM_CRASH","matched":true})"
      "\n";
  const std::string path = TempFile("rows.jsonl", text);
  auto file = ReadExportedRows(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->name, "rows.jsonl");
  EXPECT_EQ(file->sha256, common::Sha256Hex(text));
  ASSERT_EQ(file->rows.size(), 2u);
  EXPECT_EQ(file->rows[0].file_name, "t1");
  EXPECT_EQ(file->rows[0].model.batch_size(), 4);
  EXPECT_EQ(file->rows[0].model.layers(0).parameters(), 72);
  EXPECT_EQ(file->rows[0].peak_mib, 1234.5);
  EXPECT_FALSE(file->rows[0].oom);
  EXPECT_TRUE(file->rows[1].oom);
  EXPECT_TRUE(file->rows[1].utilization.empty());

  auto bad =
      ReadExportedRows(TempFile("bad.jsonl", std::string(R"({"fileName":"t1"})") + "\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "bad.jsonl line 1"))
      << bad.status();

  // Strict: a misspelt key, or a peak written as text, is named; the old reader let the
  // first pass unseen.
  auto message = [](const std::string& line) {
    auto rows = ReadExportedRows(TempFile("strict.jsonl", line + "\n"));
    return rows.ok() ? std::string("accepted") : std::string(rows.status().message());
  };
  const std::string misspelt = message(R"({"fileName":"t","description":{},)"
                                       R"("maxMemoryMib":1,"status":"SUCCESSFUL",)"
                                       R"("fakeTensorMiB":3})");
  EXPECT_TRUE(
      absl::EndsWith(misspelt, "strict.jsonl line 1: 'fakeTensorMiB' is not a known key"))
      << misspelt;
  const std::string text_peak = message(R"({"fileName":"t","description":{},)"
                                        R"("maxMemoryMib":"1","status":"SUCCESSFUL"})");
  EXPECT_TRUE(
      absl::EndsWith(text_peak, "strict.jsonl line 1: 'maxMemoryMib' must be a number"))
      << text_peak;
}

// Each timm row keeps what it shows (measuredStatus): the calibration fits OK rows,
// reports SPIKE rows apart and ignores CRASHED ones. A status it does not know, or one
// at odds with the exporter's, is refused with the line.
TEST(MeasuredRows, ReadsEachRowsMeasuredStatus) {
  auto line = [](const std::string& status, const std::string& measured) {
    const std::string own =
        measured.empty() ? "" : absl::StrCat(R"(,"measuredStatus":")", measured, R"(")");
    return absl::StrCat(R"({"fileName":"t","description":{"name":"t"},)",
                        R"("maxMemoryMib":100,"status":")", status, R"(")", own, "}\n");
  };
  auto file = ReadExportedRows(TempFile(
      "statuses.jsonl", line("SUCCESSFUL", "SPIKE") + line("OOM_CRASH", "OOM_INFERRED") +
                            line("CRASHED", "CRASHED") + line("SUCCESSFUL", "")));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->rows.size(), 4u);
  EXPECT_EQ(file->rows[0].status, "SPIKE");
  EXPECT_FALSE(file->rows[0].oom);
  EXPECT_EQ(file->rows[1].status, "OOM_INFERRED");
  EXPECT_TRUE(file->rows[1].oom);
  EXPECT_EQ(file->rows[2].status, "CRASHED");
  EXPECT_EQ(file->rows[3].status, "OK");  // An older export: from the status.
  for (const std::string& bad :
       {line("SUCCESSFUL", "MAYBE"), line("SUCCESSFUL", "OOM_INFERRED")}) {
    auto refused = ReadExportedRows(TempFile("bad_status.jsonl", bad));
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(refused.status().message(), "bad_status.jsonl line 1"))
        << refused.status();
  }
}

}  // namespace
}  // namespace gpuest::data
