// lab/data/dataset: the trainer's rows of one family, those it cannot learn from
// dropped and counted by reason, each kept row with its features; an OOM row's
// utilization cleared; the served utilization metrics in the heads' order.
#include "lab/data/dataset.h"

#include <string>
#include <utility>
#include <vector>

#include "common/sha256.h"
#include "common/units.h"
#include "gtest/gtest.h"
#include "tests/unit/lab/data/row_files.h"

namespace gpuest::data {
namespace {

using row_files::TempFile;

// A CSV of five rows: two kept, an OOM kept without its utilization, one without a
// peak and one without layers dropped.
const char kCsv[] =
    "Filename,Activations-Params,Batch Size,Max GPU Memory (MiB),Activation Function,"
    "Status,Avg GPUTL,Avg GRACT,Avg SMACT\n"
    "input_size:8_a,\"[('linear', 8, 72), ('linear', 2, 18)]\",4,1000,ReLU,SUCCESSFUL,"
    "0.5,0.4,0.3\n"
    "input_size:8_b,\"[('linear', 8, 72)]\",8,1500,ReLU,SUCCESSFUL,0.6,0.5,0.4\n"
    "input_size:8_c,\"[('linear', 8, 72)]\",4096,40000,ReLU,OOM_CRASH,0.9,0.9,0.9\n"
    "input_size:8_d,\"[('linear', 8, 72)]\",4,0,ReLU,SUCCESSFUL,0.1,0.1,0.1\n"
    "input_size:8_e,\"[]\",4,900,ReLU,SUCCESSFUL,0.1,0.1,0.1\n";

TEST(Dataset, ACsvsRowsAreKeptOrDroppedByReason) {
  const std::string path = TempFile("dataset_rows.csv", kCsv);
  auto d = LoadCsvDataset(path, v1::MODEL_FAMILY_MLP);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->family, v1::MODEL_FAMILY_MLP);
  EXPECT_EQ(d->rows, 5);
  ASSERT_EQ(d->files.size(), 1u);
  EXPECT_EQ(d->files[0].name, "dataset_rows.csv");
  EXPECT_EQ(d->files[0].sha256, common::Sha256Hex(kCsv));
  EXPECT_EQ(d->files[0].role, "measurements");
  // The served metrics only, in the heads' order (SMACT, SMOCC, GRACT, FP32A).
  EXPECT_EQ(d->utilization_metrics, (std::vector<std::string>{"SMACT", "GRACT"}));
  EXPECT_EQ(
      d->dropped,
      (std::vector<std::pair<std::string, int64_t>>{
          {"SUCCESSFUL with 0 MiB (the monitor missed it; generator crash, input under "
           "7 px)",
           1},
          {"empty layer list (nothing to featurise)", 1}}));
  ASSERT_EQ(d->examples.size(), 3u);
  const Example& first = d->examples[0];
  EXPECT_EQ(first.measured.file_name, "input_size:8_a");
  EXPECT_EQ(first.memory_bytes(), 1000.0 * common::kMiB);
  EXPECT_EQ(first.features.batch_size(), 4);
  EXPECT_EQ(first.features.total_parameters(), 90);
  EXPECT_EQ(first.measured.utilization.at("SMACT"), 0.3);
  const Example& oom = d->examples[2];
  EXPECT_TRUE(oom.measured.oom);
  EXPECT_TRUE(oom.measured.utilization.empty());  // Crashed before it meant anything.
}

TEST(Dataset, ExportedRowsNameTheirSourceCsvToo) {
  const std::string csv = TempFile("dataset_source.csv", "the measurements\n");
  const std::string jsonl =
      TempFile("dataset_rows.jsonl",
               R"({"fileName":"t1","description":{"name":"t1","batchSize":"2","layers":[)"
               R"({"type":"Linear","outputActivations":"8","parameters":"72"}]},)"
               R"("maxMemoryMib":700,"status":"SUCCESSFUL"})"
               "\n"
               R"({"fileName":"t2","description":{"name":"t2","batchSize":"2","layers":[)"
               R"({"type":"Linear","outputActivations":"8","parameters":"72"}]},)"
               R"("maxMemoryMib":0,"status":"SUCCESSFUL"})"
               "\n");
  auto d = LoadExportedDataset(jsonl, csv);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->family, v1::MODEL_FAMILY_TRANSFORMER);
  ASSERT_EQ(d->files.size(), 2u);
  EXPECT_EQ(d->files[0].name, "dataset_source.csv");
  EXPECT_EQ(d->files[0].sha256, common::Sha256Hex("the measurements\n"));
  EXPECT_EQ(d->files[1].name, "dataset_rows.jsonl");
  EXPECT_EQ(d->files[1].role, "layer sequences rebuilt by gpuest.synthetic.export");
  EXPECT_EQ(d->rows, 2);
  ASSERT_EQ(d->examples.size(), 1u);
  EXPECT_EQ(d->examples[0].features.batch_size(), 2);
  EXPECT_EQ(d->dropped, (std::vector<std::pair<std::string, int64_t>>{
                            {"SUCCESSFUL with 0 MiB (the monitor missed it)", 1}}));
  EXPECT_FALSE(LoadExportedDataset(jsonl, "/nonexistent.csv").ok());
}

}  // namespace
}  // namespace gpuest::data
