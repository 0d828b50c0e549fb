// lab/data/exported_rows: the JSON lines of gpuest.synthetic.export and the timm
// describer (measured_rows.h's second reader), read strictly, with each row's
// measured status.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "lab/data/measured_rows.h"
#include "tests/unit/lab/data/row_files.h"

namespace gpuest::data {
namespace {

using row_files::TempFile;

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
