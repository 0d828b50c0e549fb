// estimators/allocsim/simulation_manifest: the shipped simulations' manifests read
// into their type and write back to the very same text; an unknown key or a wrong
// type is refused by name; a manifest made in code reads back as the same value.
#include "estimators/allocsim/simulation_manifest.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/core/manifest_text.h"

namespace gpuest::allocsim {
namespace {

using core::manifest_text::Read;
using core::manifest_text::ReplaceOnce;

const std::string kModels = GPUEST_MODELS_DIR;

TEST(Manifests, SimulationManifestsRoundTrip) {
  for (const char* id : {"allocsim", "analytic"}) {
    const std::string path = kModels + "/" + id + "/manifest.json";
    const std::string text = Read(path);
    auto manifest = allocsim::SimulationManifest::Parse(text, path);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_EQ(manifest->id, id);
    // mlp, cnn, transformer, and the transformers without a convolution.
    EXPECT_EQ(manifest->families.size(), 4u);
    EXPECT_EQ(manifest->Text(), text) << path;
  }
}

TEST(Manifests, AnUnknownKeyOrAWrongTypeIsRefusedByName) {
  const std::string path = kModels + "/analytic/manifest.json";
  const std::string text = Read(path);
  auto misspelt = allocsim::SimulationManifest::Parse(
      ReplaceOnce(text, "\"steps\": 2,", "\"steps\": 2, \"stepz\": 3,"), path);
  EXPECT_TRUE(absl::StrContains(misspelt.status().message(),
                                "'calibration.stepz' is not a known key"))
      << misspelt.status();
  auto quoted = allocsim::SimulationManifest::Parse(
      ReplaceOnce(text, "\"steps\": 2,", "\"steps\": \"2\","), path);
  EXPECT_TRUE(absl::StrContains(quoted.status().message(),
                                "'calibration.steps' must be an integer"))
      << quoted.status();
  auto twice = allocsim::SimulationManifest::Parse(
      ReplaceOnce(text, "\"steps\": 2,", "\"steps\": 2, \"steps\": 3,"), path);
  EXPECT_TRUE(absl::StrContains(twice.status().message(),
                                "key \"steps\" appears twice in one object, at "
                                "calibration"))
      << twice.status();
  auto fractional = allocsim::SimulationManifest::Parse(
      ReplaceOnce(text, "\"steps\": 2,", "\"steps\": 2.5,"), path);
  EXPECT_FALSE(fractional.ok());
  auto not_json = allocsim::SimulationManifest::Parse("{", path);
  EXPECT_TRUE(absl::StrContains(not_json.status().message(), path));
}

// The writers' side: a manifest made in code reads back as the same value.
TEST(Manifests, ASimulationManifestMadeInCodeReadsBack) {
  allocsim::SimulationManifest m;
  m.id = "sim";
  m.version = "7";
  m.trace_source = allocsim::TraceSource::kLayers;
  m.description = "a test";
  m.made_by = "this test";
  m.gpu = "card";
  m.context_mib = 1000.5;
  m.steps = 3;
  m.safe_quantile = 0.9;
  allocsim::FamilyTerms& t = m.families.emplace_back();
  t.family = "transformer";
  t.calibration = {100, 1.25, 50, 0.75, 2.5};
  t.held_out = allocsim::HeldOutScores{12, 3.5, 0.917, 0.833};
  t.datasets.push_back({"rows.jsonl", "abc", ""});
  allocsim::FamilyTerms apart = t;
  apart.without_convolutions = true;
  apart.calibration.safe_factor = 1.1;
  apart.calibration.conv_output_factor = 0;  // Nothing to multiply without one.
  m.families.push_back(apart);
  allocsim::GpuTerms& own = m.by_gpu.emplace_back();
  own.gpu = "other-card";
  own.context_mib = 700;
  own.made_by = "clean runs";
  own.families.push_back(m.families[0]);
  own.families[0].held_out.reset();
  own.families[0].unseen_architectures = allocsim::HeldOutScores{30, 4.5, 0.967, 0.9};
  auto back = allocsim::SimulationManifest::Parse(m.Text(), "made.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Text(), m.Text());
  // The terms of the family's models without a convolution have a key of their own.
  EXPECT_TRUE(absl::StrContains(m.Text(), "\"transformer-without-convolutions\": {"));
  ASSERT_EQ(back->families.size(), 2u);
  EXPECT_EQ(back->families[1].family, "transformer");
  EXPECT_TRUE(back->families[1].without_convolutions);
  EXPECT_FALSE(back->families[0].without_convolutions);
  EXPECT_EQ(back->families[1].calibration.safe_factor, 1.1);
  ASSERT_EQ(back->by_gpu.size(), 1u);
  EXPECT_EQ(back->by_gpu[0].gpu, "other-card");
  EXPECT_EQ(back->by_gpu[0].families[0].unseen_architectures->rows, 30);
  // A GPU's terms are read as strictly as the others.
  auto misspelt = allocsim::SimulationManifest::Parse(
      ReplaceOnce(m.Text(), "\"made_by\": \"clean runs\"", "\"madeby\": \"clean runs\""),
      "misspelt.json");
  ASSERT_FALSE(misspelt.ok());
  EXPECT_TRUE(absl::StrContains(misspelt.status().message(),
                                "'calibration.by_gpu.other-card.made_by' is missing"))
      << misspelt.status();
  m.by_gpu.clear();
  EXPECT_EQ(back->trace_source, allocsim::TraceSource::kLayers);
  EXPECT_EQ(back->families[0].calibration.safe_factor, 1.25);
  EXPECT_EQ(back->families[0].calibration.conv_output_factor, 2.5);
  // A manifest written before the conv term has none; a negative one is refused.
  auto older = allocsim::SimulationManifest::Parse(
      ReplaceOnce(m.Text(), "\"conv_output_factor\": 2.5,", ""), "older.json");
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_EQ(older->families[0].calibration.conv_output_factor, 0);
  auto negative = allocsim::SimulationManifest::Parse(
      ReplaceOnce(m.Text(), "\"conv_output_factor\": 2.5", "\"conv_output_factor\": -1"),
      "negative.json");
  ASSERT_FALSE(negative.ok());
  EXPECT_TRUE(absl::StrContains(negative.status().message(),
                                "'calibration.families.transformer.conv_output_factor' "
                                "must be at least 0"))
      << negative.status();
  ASSERT_TRUE(back->families[0].held_out.has_value());
  EXPECT_EQ(back->families[0].held_out->rows, 12);
}

}  // namespace
}  // namespace gpuest::allocsim
