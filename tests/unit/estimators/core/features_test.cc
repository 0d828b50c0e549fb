#include "estimators/core/features.h"

#include "gtest/gtest.h"
#include "lab/data/measured_rows.h"
#include "tests/support/datasets.h"

namespace gpuest::core {
namespace {

v1::ModelDescription SmallMlp() {
  v1::ModelDescription m;
  m.set_batch_size(64);
  auto add = [&](const char* type, int64_t acts, int64_t params) {
    v1::Layer* l = m.add_layers();
    l->set_type(type);
    l->set_output_activations(acts);
    l->set_parameters(params);
  };
  add("linear", 100, 1000);
  add("batch_normalization", 100, 200);
  add("GELU", 100, 0);
  add("dropout", 100, 0);
  add("linear", 10, 1010);
  add("ReLU", 10, 0);
  add("GELU", 10, 0);
  return m;
}

TEST(Features, TotalsCountsFamilyAndActivation) {
  const v1::FeatureVector f = ExtractFeatures(SmallMlp());
  EXPECT_EQ(f.batch_size(), 64);
  EXPECT_EQ(f.total_parameters(), 2210);
  EXPECT_EQ(f.total_activations(), 430);
  EXPECT_EQ(f.depth(), 7);
  EXPECT_EQ(f.layer_counts().at("Linear"), 2);
  EXPECT_EQ(f.layer_counts().at("BatchNorm1d"), 1);
  EXPECT_EQ(f.layer_counts().at("Dropout"), 1);
  EXPECT_EQ(f.family(), v1::MODEL_FAMILY_MLP);
  EXPECT_EQ(f.activation_function(), "GELU");  // Most common activation layer.
}

TEST(Features, GivenFamilyAndActivationWin) {
  v1::ModelDescription m = SmallMlp();
  m.set_family(v1::MODEL_FAMILY_OTHER);
  m.set_activation_function("relu");
  const v1::FeatureVector f = ExtractFeatures(m);
  EXPECT_EQ(f.family(), v1::MODEL_FAMILY_OTHER);
  EXPECT_EQ(f.activation_function(), "ReLU");
}

TEST(Features, FeatureVectorRequestsAreCanonicalised) {
  v1::EstimateRequest request;
  v1::FeatureVector* given = request.mutable_features();
  given->set_batch_size(8);
  given->set_total_parameters(10);
  (*given->mutable_layer_counts())["conv2d"] = 3;
  (*given->mutable_layer_counts())["Conv2d"] = 2;
  (*given->mutable_layer_counts())["linear"] = 1;
  const v1::FeatureVector f = FeaturesOf(request);
  EXPECT_EQ(f.layer_counts().at("Conv2d"), 5);
  EXPECT_EQ(f.layer_counts().at("Linear"), 1);
  EXPECT_EQ(f.family(), v1::MODEL_FAMILY_CNN);
  EXPECT_TRUE(UnknownLayerTypes(f).empty());
}

// The feature function agrees with the totals the file's maker computed for every row:
// the study's (measured data) or the Python generator's (the project's fixture rows).
void CheckDataset(const std::string& path, v1::ModelFamily family,
                  const std::map<std::string, std::string>& count_columns,
                  size_t min_rows) {
  auto read = data::ReadGpuMemNetCsv(path, family);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_GT(read->rows.size(), min_rows);
  for (const data::MeasuredRow& run : read->rows) {
    const v1::FeatureVector f = ExtractFeatures(run.model);
    ASSERT_EQ(f.total_parameters(), run.columns.at("Total Parameters")) << run.file_name;
    ASSERT_EQ(f.total_activations(), run.columns.at("Total Activations"))
        << run.file_name;
    ASSERT_EQ(f.family(), family) << run.file_name;
    ASSERT_TRUE(UnknownLayerTypes(f).empty()) << run.file_name;
    for (const auto& [canonical, column] : count_columns) {
      const auto it = f.layer_counts().find(canonical);
      const int64_t count = it == f.layer_counts().end() ? 0 : it->second;
      ASSERT_EQ(count, run.columns.at(column)) << run.file_name << " " << canonical;
    }
  }
}

const std::map<std::string, std::string> kMlpCounts = {
    {"BatchNorm1d", "Batch Normalization Layers"}, {"Dropout", "Dropout Layers"}};
const std::map<std::string, std::string> kCnnCounts = {
    {"Conv2d", "Conv2d Count"},
    {"BatchNorm2d", "BatchNorm2d Count"},
    {"Dropout", "Dropout Count"},
    {"AdaptiveAvgPool2d", "AdaptiveAvgPool2d Count"},
    {"Linear", "Linear Count"}};

TEST(Features, MatchTheMlpDatasetTotals) {
  GPUEST_DATASET_OR_SKIP(path, "gpumemnet/mlp.csv");
  CheckDataset(path, v1::MODEL_FAMILY_MLP, kMlpCounts, 1000);
}

TEST(Features, MatchTheCnnDatasetTotals) {
  GPUEST_DATASET_OR_SKIP(path, "gpumemnet/cnn.csv");
  CheckDataset(path, v1::MODEL_FAMILY_CNN, kCnnCounts, 1000);
}

// The same reader and features on rows the project's generator wrote: the C++ totals and
// counts agree with gpuest.synthetic's recorder (tests/data/fixture-datasets).
TEST(Features, MatchTheFixtureMlpTotals) {
  CheckDataset(testing::FixtureRoot() + "/gpumemnet/mlp.csv", v1::MODEL_FAMILY_MLP,
               kMlpCounts, 300);
}

TEST(Features, MatchTheFixtureCnnTotals) {
  CheckDataset(testing::FixtureRoot() + "/gpumemnet/cnn.csv", v1::MODEL_FAMILY_CNN,
               kCnnCounts, 250);
}

}  // namespace
}  // namespace gpuest::core
