#include "estimators/gpumemnet/feature_encoding.h"

#include <cmath>

#include "absl/strings/match.h"
#include "estimators/core/features.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/gpumemnet/manifest_part.h"

namespace gpuest::gpumemnet {
namespace {

using manifest_part::Read;
using manifest_part::Refusal;

v1::ModelDescription Mlp(int64_t batch, int64_t width, const char* activation = "ReLU") {
  v1::ModelDescription m;
  m.set_batch_size(batch);
  for (const char* type :
       {"linear", "batch_normalization", activation, "dropout", "linear"}) {
    v1::Layer* l = m.add_layers();
    l->set_type(type);
    l->set_output_activations(width);
    l->set_parameters(std::string(type) == "linear" ? width * width : 0);
  }
  return m;
}

EncodingSpec FittedMlpSpec(int max_sequence_length = 8) {
  std::vector<v1::ModelDescription> models = {Mlp(32, 100), Mlp(64, 400, "GELU")};
  std::vector<v1::FeatureVector> features;
  std::vector<const v1::ModelDescription*> pointers;
  for (const auto& m : models) {
    features.push_back(core::ExtractFeatures(m));
    pointers.push_back(&m);
  }
  return FitEncoding(EncodingLayout(v1::MODEL_FAMILY_MLP, max_sequence_length), features,
                     pointers);
}

size_t IndexOf(const EncodingSpec& spec, const std::string& name) {
  for (size_t i = 0; i < spec.features.size(); ++i) {
    if (spec.features[i].name == name) return i;
  }
  ADD_FAILURE() << "no feature " << name;
  return 0;
}

TEST(FeatureEncoding, LayoutsFollowThePaper) {
  const EncodingSpec mlp = EncodingLayout(v1::MODEL_FAMILY_MLP, 0);
  std::vector<std::string> names;
  for (const auto& f : mlp.features) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "log1p_batch_size", "log1p_parameters", "log1p_activations",
                       "log1p_activations_x_batch", "log1p_depth", "log1p_count_Linear",
                       "log1p_count_BatchNorm1d", "log1p_count_Dropout", "activation_cos",
                       "activation_sin"}));
  const EncodingSpec cnn = EncodingLayout(v1::MODEL_FAMILY_CNN, 0);
  EXPECT_EQ(cnn.features.size(), 5u + 5u + 2u);
  const EncodingSpec tf = EncodingLayout(v1::MODEL_FAMILY_TRANSFORMER, 64);
  EXPECT_TRUE(tf.activation_functions.empty());
  EXPECT_EQ(tf.features.back().name, "log1p_sequence_length");
  EXPECT_EQ(tf.sequence.max_length, 64);
}

TEST(FeatureEncoding, KnownValues) {
  const EncodingSpec spec = FittedMlpSpec();
  const v1::FeatureVector f = core::ExtractFeatures(Mlp(32, 100));
  const std::vector<double> raw = RawGlobalFeatures(spec, f);
  EXPECT_DOUBLE_EQ(raw[IndexOf(spec, "log1p_batch_size")], std::log1p(32.0));
  EXPECT_DOUBLE_EQ(raw[IndexOf(spec, "log1p_parameters")], std::log1p(20000.0));
  EXPECT_DOUBLE_EQ(raw[IndexOf(spec, "log1p_activations")], std::log1p(500.0));
  EXPECT_DOUBLE_EQ(raw[IndexOf(spec, "log1p_activations_x_batch")], std::log1p(16000.0));
  EXPECT_DOUBLE_EQ(raw[IndexOf(spec, "log1p_count_Linear")], std::log1p(2.0));
  // ReLU is function 6 of the 11 in the list: angle pi * 6 / 11.
  EXPECT_NEAR(raw[IndexOf(spec, "activation_cos")], std::cos(M_PI * 6 / 11), 1e-12);
  EXPECT_NEAR(raw[IndexOf(spec, "activation_sin")], std::sin(M_PI * 6 / 11), 1e-12);

  // Two training rows: each standardised feature is -1 or +1 (or 0 when constant).
  const std::vector<float> encoded = EncodeGlobal(spec, f);
  EXPECT_NEAR(encoded[IndexOf(spec, "log1p_batch_size")], -1.0, 1e-6);
  EXPECT_NEAR(encoded[IndexOf(spec, "log1p_count_Linear")], 0.0, 1e-6);
  EXPECT_NEAR(encoded[IndexOf(spec, "log1p_parameters")], -1.0, 1e-6);
}

TEST(FeatureEncoding, SequenceTokensAndUnknownTypes) {
  const EncodingSpec spec = FittedMlpSpec(/*max_sequence_length=*/4);
  ASSERT_EQ(spec.sequence.vocabulary.front(), "<unknown>");
  // Canonical types, sorted after index 0.
  EXPECT_EQ(spec.sequence.vocabulary,
            (std::vector<std::string>{"<unknown>", "BatchNorm1d", "Dropout", "GELU",
                                      "Linear", "ReLU"}));
  v1::ModelDescription m = Mlp(8, 100);
  m.mutable_layers(2)->set_type("Conv1D");  // GPT-2's linear: never seen here.
  const EncodedSequence seq = EncodeSequence(spec, m);
  EXPECT_TRUE(seq.truncated);  // 5 layers, 4 read.
  EXPECT_EQ(seq.types, (std::vector<int64_t>{4, 1, 0, 2}));
  ASSERT_EQ(seq.numbers.size(), 8u);
  EXPECT_NEAR(seq.numbers[0],
              (std::log1p(100.0) - spec.sequence.activations_mean) /
                  spec.sequence.activations_std,
              1e-5);
}

TEST(FeatureEncoding, RoundTripsThroughJson) {
  const EncodingSpec spec = FittedMlpSpec();
  auto back = Read<EncodingSpec>(nlohmann::json::parse(spec.ToJson().dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), spec.ToJson());
  const v1::FeatureVector f = core::ExtractFeatures(Mlp(48, 250, "GELU"));
  EXPECT_EQ(EncodeGlobal(*back, f), EncodeGlobal(spec, f));

  nlohmann::json broken = spec.ToJson();
  broken["features"][0]["std"] = 0;
  EXPECT_EQ(Refusal<EncodingSpec>(broken), "m.json: 'features[0].std' must be positive");
  broken = spec.ToJson();
  broken["sequence"]["vocabulary"] = {"<unknown>", "ReLU", "Linear"};
  EXPECT_EQ(Refusal<EncodingSpec>(broken),
            "m.json: 'sequence.vocabulary' is not sorted after index 0");
  broken = spec.ToJson();
  broken.erase("features");
  EXPECT_EQ(Refusal<EncodingSpec>(broken), "m.json: 'features' is missing");
}

// The strict reader: a mistyped, unknown or unknown-valued key is refused by name,
// where the lenient at().get<>() readers took 2.5 as a count and ignored typos.
TEST(FeatureEncoding, StrictReaderNamesTheKey) {
  const EncodingSpec spec = FittedMlpSpec();
  nlohmann::json broken = spec.ToJson();
  broken["sequence"]["max_length"] = 2.5;
  EXPECT_EQ(Refusal<EncodingSpec>(broken),
            "m.json: 'sequence.max_length' must be an integer");
  broken = spec.ToJson();
  broken["features"][1]["stdev"] = 1.0;
  EXPECT_EQ(Refusal<EncodingSpec>(broken),
            "m.json: 'features[1].stdev' is not a known key");
  broken = spec.ToJson();
  broken["family"] = "rnn";
  EXPECT_EQ(Refusal<EncodingSpec>(broken), "m.json: 'family' is not a family: 'rnn'");
}

TEST(FeatureEncoding, OutOfDistribution) {
  const EncodingSpec spec = FittedMlpSpec();
  // Inside: the training rows themselves, and one between them.
  EXPECT_TRUE(OutOfDistribution(spec, core::ExtractFeatures(Mlp(32, 100))).empty());
  EXPECT_TRUE(OutOfDistribution(spec, core::ExtractFeatures(Mlp(48, 200))).empty());

  const auto big = OutOfDistribution(spec, core::ExtractFeatures(Mlp(4096, 200)));
  ASSERT_FALSE(big.empty());
  EXPECT_TRUE(absl::StrContains(big[0],
                                "batch_size 4096 is outside the training range "
                                "[32, 64]"))
      << big[0];

  v1::ModelDescription gpt2 = Mlp(32, 200);
  gpt2.mutable_layers(0)->set_type("Conv1D");
  const auto unseen = OutOfDistribution(spec, core::ExtractFeatures(gpt2));
  ASSERT_FALSE(unseen.empty());
  EXPECT_TRUE(absl::StrContains(unseen[0], "never seen in training: Conv1D"))
      << unseen[0];

  const auto sigmoid =
      OutOfDistribution(spec, core::ExtractFeatures(Mlp(32, 200, "Sigmoid")));
  bool named = false;
  for (const auto& s : sigmoid) named = named || absl::StrContains(s, "Sigmoid");
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace gpuest::gpumemnet
