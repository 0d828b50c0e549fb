#include "estimators/layer_types.h"

#include "gtest/gtest.h"

namespace gpuest {
namespace {

TEST(LayerTypes, DatasetSpellingsMeetPyTorchNames) {
  EXPECT_EQ(CanonicalLayerType("linear"), "Linear");
  EXPECT_EQ(CanonicalLayerType("Linear"), "Linear");
  EXPECT_EQ(CanonicalLayerType("batch_normalization"), "BatchNorm1d");
  EXPECT_EQ(CanonicalLayerType("BatchNorm1d"), "BatchNorm1d");
  EXPECT_EQ(CanonicalLayerType("batchnorm2d"), "BatchNorm2d");
  EXPECT_EQ(CanonicalLayerType("conv2d"), "Conv2d");
  EXPECT_EQ(CanonicalLayerType("adaptive_avg_pool2d"), "AdaptiveAvgPool2d");
  EXPECT_EQ(CanonicalLayerType("softmax"), "Softmax");
  EXPECT_EQ(CanonicalLayerType("dropout"), "Dropout");
  EXPECT_EQ(CanonicalLayerType("GELU"), "GELU");
}

TEST(LayerTypes, UnknownTypesKeepTheirSpelling) {
  const LayerTypeInfo info = ClassifyLayerType("FancyCapsule");
  EXPECT_EQ(info.canonical, "FancyCapsule");
  EXPECT_EQ(info.kind, LayerKind::kUnknown);
  EXPECT_EQ(ClassifyLayerType("Conv1D").kind, LayerKind::kLinear);  // GPT-2's.
  EXPECT_EQ(ClassifyLayerType("Conv1d").kind, LayerKind::kConv);    // torch's.
  EXPECT_EQ(ClassifyLayerType("conv1d").kind, LayerKind::kConv);
}

google::protobuf::Map<std::string, int64_t> Counts(
    std::initializer_list<std::pair<const char*, int64_t>> counts) {
  google::protobuf::Map<std::string, int64_t> out;
  for (const auto& [type, n] : counts) out[type] = n;
  return out;
}

TEST(LayerTypes, InfersFamilyFromCounts) {
  EXPECT_EQ(InferFamily(Counts({{"Linear", 3}, {"BatchNorm1d", 2}, {"ReLU", 2}})),
            v1::MODEL_FAMILY_MLP);
  EXPECT_EQ(InferFamily(Counts({{"Conv2d", 3}, {"Linear", 1}})), v1::MODEL_FAMILY_CNN);
  EXPECT_EQ(InferFamily(Counts({{"Embedding", 1}, {"LayerNorm", 4}, {"Linear", 8}})),
            v1::MODEL_FAMILY_TRANSFORMER);
  EXPECT_EQ(InferFamily(Counts({{"MultiheadAttention", 2}, {"Linear", 4}})),
            v1::MODEL_FAMILY_TRANSFORMER);
  EXPECT_EQ(InferFamily(Counts({{"Linear", 2}, {"LSTM", 1}})), v1::MODEL_FAMILY_OTHER);
  EXPECT_EQ(InferFamily(Counts({})), v1::MODEL_FAMILY_OTHER);
  EXPECT_EQ(InferFamily(Counts({{"Conv2d", 0}, {"Linear", 1}})), v1::MODEL_FAMILY_MLP);
}

}  // namespace
}  // namespace gpuest
