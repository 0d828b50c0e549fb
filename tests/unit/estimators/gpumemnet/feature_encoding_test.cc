#include "estimators/gpumemnet/feature_encoding.h"

#include <cmath>

#include "absl/strings/match.h"
#include "estimators/core/features.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/targets.h"
#include "gtest/gtest.h"

namespace gpuest::gpumemnet {
namespace {

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

// A part read by the strict reader as a manifest reads it, from "m.json".
template <typename Part>
absl::StatusOr<Part> Read(const nlohmann::json& json) {
  absl::StatusOr<common::strict_json::Fields<nlohmann::json>> fields =
      common::strict_json::Fields<nlohmann::json>::Of(json, "m.json");
  if (!fields.ok()) return fields.status();
  return Part::FromJson(*fields);
}

// The error's message, for checking that it names the file and the key.
template <typename Part>
std::string Refusal(const nlohmann::json& json) {
  absl::StatusOr<Part> part = Read<Part>(json);
  return part.ok() ? "accepted" : std::string(part.status().message());
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

TEST(Targets, MemoryBinsAndTheTopClass) {
  const HeadSpec h = MemoryHead(8);
  EXPECT_EQ(h.classes(), 6);  // [0,8) ... [32,40), and > 40 GiB.
  EXPECT_EQ(h.MemoryClass(7.9 * common::kGiB, false), 0);
  EXPECT_EQ(h.MemoryClass(8.0 * common::kGiB, false), 1);
  EXPECT_EQ(h.MemoryClass(39.9 * common::kGiB, false), 4);
  EXPECT_EQ(h.MemoryClass(3.0 * common::kGiB, true),
            5);  // OOM: whatever the column says.
  EXPECT_EQ(MemoryHead(1).classes(), 41);
  auto back = Read<HeadSpec>(h.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->edges, h.edges);
  nlohmann::json bad = h.ToJson();
  bad["classes"] = 5;
  EXPECT_EQ(Refusal<HeadSpec>(bad), "m.json: 'classes' is 5, but the edges make 6");
  bad = h.ToJson();
  bad["width_gib"] = 4;
  EXPECT_EQ(Refusal<HeadSpec>(bad), "m.json: 'width_gib' does not match width_bytes");
  bad = h.ToJson();
  bad["target"] = "Memory";
  EXPECT_EQ(Refusal<HeadSpec>(bad),
            "m.json: 'target' must be \"memory\" or \"utilization\"");

  const HeadSpec u = UtilizationHead("SMACT", {0, 0.3, 0.9, 1}, "paper");
  EXPECT_EQ(u.classes(), 3);
  auto u_back = Read<HeadSpec>(u.ToJson());
  ASSERT_TRUE(u_back.ok()) << u_back.status();
  EXPECT_EQ(u_back->target, HeadTarget::kUtilization);
  EXPECT_EQ(u_back->metric, "SMACT");
  EXPECT_EQ(u.UtilizationClass(0.29), 0);
  EXPECT_EQ(u.UtilizationClass(0.3), 1);
  EXPECT_EQ(u.UtilizationClass(1.0), 2);
  EXPECT_EQ(u.UtilizationClass(-1), -1);  // Not measured.
}

TEST(NetworkConfig, RoundTripsAndRejectsNonsense) {
  NetworkConfig c;
  c.kind = NetworkKind::kTransformer;
  c.global_features = 12;
  c.head_classes = {21, 11, 6};
  c.hidden = {128};
  c.vocabulary = 7;
  auto back = Read<NetworkConfig>(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->kind, NetworkKind::kTransformer);
  EXPECT_EQ(back->total_classes(), 38);
  nlohmann::json bad = c.ToJson();
  bad["attention_heads"] = 5;  // 32 is not divisible by 5.
  EXPECT_EQ(Refusal<NetworkConfig>(bad), "m.json: holds inconsistent hyperparameters");
  bad = c.ToJson();
  bad["kind"] = "lstm";
  EXPECT_EQ(Refusal<NetworkConfig>(bad),
            "m.json: 'kind' must be \"mlp\" or \"transformer\"");
  bad = c.ToJson();
  bad["hidden"] = {128, -1.5};
  EXPECT_EQ(Refusal<NetworkConfig>(bad),
            "m.json: 'hidden' must be an array of the right type");
  // An MLP's config holds no encoder keys; one left in is a writer's mistake.
  bad = c.ToJson();
  bad["kind"] = "mlp";
  EXPECT_EQ(Refusal<NetworkConfig>(bad), "m.json: 'attention_heads' is not a known key");
}

}  // namespace
}  // namespace gpuest::gpumemnet
