#include "estimators/core/layer_types.h"

#include <fstream>
#include <iterator>
#include <string>

#include "estimators/core/layer_types_json.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::core {
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
  // An MLP has dense layers; activations and dropout alone are not one.
  EXPECT_EQ(InferFamily(Counts({{"ReLU", 2}, {"Dropout", 1}})), v1::MODEL_FAMILY_OTHER);
}

// The layer counts `python3 -m gpuest.describe` gives for real models (torchvision
// 0.14's vit_b_16, resnet18 and convnext_tiny at 3 x 224 x 224; an nn.LSTM text
// classifier): one rule, the same as the describer's (python/tests/test_layer_types.py
// describes the same models).
TEST(LayerTypes, FamilyOfRealModelsAsDescribed) {
  // Attention outranks the patch-embedding convolution.
  EXPECT_EQ(InferFamily(Counts({{"VisionTransformer", 1},
                                {"Conv2d", 1},
                                {"Encoder", 1},
                                {"Dropout", 37},
                                {"LayerNorm", 25},
                                {"MultiheadAttention", 12},
                                {"Linear", 25},
                                {"GELU", 12}})),
            v1::MODEL_FAMILY_TRANSFORMER);
  EXPECT_EQ(InferFamily(Counts({{"Conv2d", 20},
                                {"BatchNorm2d", 20},
                                {"ReLU", 17},
                                {"MaxPool2d", 1},
                                {"AdaptiveAvgPool2d", 1},
                                {"Linear", 1}})),
            v1::MODEL_FAMILY_CNN);
  // Layer norms and GELUs, but convolutions and no attention: a CNN.
  EXPECT_EQ(InferFamily(Counts({{"Conv2d", 22},
                                {"LayerNorm2d", 5},
                                {"CNBlock", 18},
                                {"Permute", 36},
                                {"LayerNorm", 18},
                                {"Linear", 37},
                                {"GELU", 18},
                                {"StochasticDepth", 18},
                                {"AdaptiveAvgPool2d", 1},
                                {"Flatten", 1}})),
            v1::MODEL_FAMILY_CNN);
  // Recurrent networks are none of the three, with an embedding or without.
  EXPECT_EQ(InferFamily(Counts({{"Embedding", 1}, {"LSTM", 1}, {"Linear", 1}})),
            v1::MODEL_FAMILY_OTHER);
  EXPECT_EQ(InferFamily(Counts({{"GRU", 1}, {"Linear", 1}})), v1::MODEL_FAMILY_OTHER);
  EXPECT_EQ(InferFamily(Counts({{"rnn", 1}, {"Linear", 1}})), v1::MODEL_FAMILY_OTHER);
}

TEST(LayerTypes, AttentionLikeTypesMakeATransformer) {
  // A Hugging Face attention block that owns parameters itself, beside GPT-2's Conv1D.
  EXPECT_EQ(InferFamily(Counts({{"GPT2Attention", 12}, {"Conv1D", 48}})),
            v1::MODEL_FAMILY_TRANSFORMER);
  EXPECT_EQ(InferFamily(Counts({{"TransformerEncoderLayer", 2}, {"Conv2d", 1}})),
            v1::MODEL_FAMILY_TRANSFORMER);
}

TEST(LayerTypes, WhatEachTypeSavesForBackward) {
  EXPECT_EQ(ClassifyLayerType("Linear").saves, SavedForBackward::kInput);
  EXPECT_EQ(ClassifyLayerType("ReLU").saves, SavedForBackward::kOutput);
  EXPECT_EQ(ClassifyLayerType("GELU").saves, SavedForBackward::kInput);
  EXPECT_EQ(ClassifyLayerType("batch_normalization").saves,
            SavedForBackward::kInputAndStats);
  EXPECT_EQ(ClassifyLayerType("dropout").saves, SavedForBackward::kMask);
  EXPECT_EQ(ClassifyLayerType("max_pool2d").saves, SavedForBackward::kInputAndIndices);
  EXPECT_EQ(ClassifyLayerType("AdaptiveAvgPool2d").saves, SavedForBackward::kNothing);
  EXPECT_EQ(ClassifyLayerType("MultiheadAttention").saves,
            SavedForBackward::kFusedAttention);
  EXPECT_EQ(ClassifyLayerType("FancyCapsule").saves, SavedForBackward::kInput);
}

// The server carries the table the Python side reads: the build embeds the file.
TEST(LayerTypes, TheEmbeddedTableIsTheSharedFile) {
  std::ifstream in(GPUEST_LAYER_TYPES_JSON, std::ios::binary);
  ASSERT_TRUE(in) << GPUEST_LAYER_TYPES_JSON;
  const std::string file((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(std::string(LayerTypesJson()), file);
}

// An edit of the shared table that the old lenient reader took without a word (a
// misspelt key, a kind the glossary does not define) stops the build's self-check and
// is named by key.
TEST(LayerTypes, TheTableIsReadStrictly) {
  const nlohmann::json table = nlohmann::json::parse(std::string(LayerTypesJson()));
  EXPECT_TRUE(CheckLayerTypeTable(table.dump(), "t.json").ok());
  auto refusal = [](const nlohmann::json& edited) {
    return std::string(CheckLayerTypeTable(edited.dump(), "t.json").message());
  };
  nlohmann::json edited = table;
  edited["types"][0]["alias"] = nlohmann::json::array({"dense"});
  EXPECT_EQ(refusal(edited), "t.json: 'types[0].alias' is not a known key");
  edited = table;
  edited["types"][2]["saves"] = "inputs";
  EXPECT_EQ(refusal(edited), "t.json: 'types[2].saves' is not a known saves: 'inputs'");
  edited = table;
  edited["kinds"]["recurrent"] = "LSTM and GRU";
  EXPECT_EQ(refusal(edited), "t.json: 'kinds.recurrent' is not a word the code knows");
  edited = table;
  edited["family_rule"]["clauses"][1]["any_of"] = {"atention"};
  EXPECT_EQ(refusal(edited),
            "t.json: 'family_rule.clauses[1]' names an unknown signal 'atention'");
  edited = table;
  edited["family_rule"]["clauses"].erase(5);
  EXPECT_EQ(refusal(edited),
            "t.json: 'family_rule.clauses' must end with a clause that "
            "holds for every model");
}

}  // namespace
}  // namespace gpuest::core
