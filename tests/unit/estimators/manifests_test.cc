// The typed manifests (estimators/*manifest*.h): every shipped artifact reads into its
// type and writes back to the very same text, and a broken manifest is refused with
// the file and the key named.
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/text_file.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/gpu_profiles_manifest.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "gtest/gtest.h"

namespace gpuest::estimators {
namespace {

const std::string kModels = GPUEST_MODELS_DIR;

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text =
      common::ReadTextFile(path, common::kMaxConfigFileBytes);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// Replaces exactly one occurrence of `from`, so that a test breaks one key.
std::string ReplaceOnce(const std::string& text, const std::string& from,
                        const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from << " is not unique";
  std::string out = text;
  return at == std::string::npos ? out : out.replace(at, from.size(), to);
}

TEST(Manifests, GpuProfilesRoundTrip) {
  const std::string path = kModels + "/gpu_profiles.json";
  auto manifest = core::GpuProfilesManifest::Load(path);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->default_id, "a100-40gb");
  EXPECT_GE(manifest->gpus.size(), 2u);
  EXPECT_EQ(manifest->Text(), Read(path));
}

// Both calibrations change the file through SetMeasuredContext: the measured GPU's
// context, constants and basis (its cuBLAS part kept); rows of another card refused.
TEST(Manifests, AMeasuredContextChangesOneGpuOrTheAssumedOnesToo) {
  auto loaded = core::GpuProfilesManifest::Load(kModels + "/gpu_profiles.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  core::GpuProfilesManifest profiles = *loaded;
  const core::GpuProfile* h200_before = nullptr;
  for (const core::GpuProfile& g : loaded->gpus) {
    if (g.id == "h200") h200_before = &g;
  }
  ASSERT_NE(h200_before, nullptr);
  EXPECT_EQ(
      profiles.SetMeasuredContext("h200", "NVIDIA A100-SXM4-40GB", 600, "rows", false)
          .message(),
      "gpu: 'h200' is '" + h200_before->name +
          "', but the rows were measured on 'NVIDIA A100-SXM4-40GB'");
  EXPECT_TRUE(absl::StartsWith(
      profiles.SetMeasuredContext("h300", "", 600, "rows", false).message(),
      "gpu: 'h300' is not in the profiles (a100-40gb"));
  ASSERT_TRUE(
      profiles.SetMeasuredContext("h200", h200_before->name, 600, "rows", false).ok());
  for (size_t i = 0; i < profiles.gpus.size(); ++i) {
    const core::GpuProfile& g = profiles.gpus[i];
    if (g.id != "h200") {
      EXPECT_EQ(g.context_bytes, loaded->gpus[i].context_bytes) << g.id;
      continue;
    }
    EXPECT_EQ(g.context_bytes, 600ull << 20);
    EXPECT_TRUE(g.constants_calibrated);
    const size_t workspace = h200_before->constants_basis.find("; cuBLAS workspace:");
    ASSERT_NE(workspace, std::string::npos);
    EXPECT_EQ(g.constants_basis,
              "context: rows" + h200_before->constants_basis.substr(workspace));
  }
  // The A100's calibration sets the GPUs whose constants are assumed as well.
  ASSERT_TRUE(profiles.SetMeasuredContext("a100-40gb", "", 1500, "fit", true).ok());
  for (const core::GpuProfile& g : profiles.gpus) {
    if (g.id == "a100-40gb" || !g.constants_calibrated) {
      EXPECT_EQ(g.context_bytes, 1500ull << 20) << g.id;
    }
  }
}

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

TEST(Manifests, EveryGpuMemNetManifestRoundTrips) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kModels)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "gpumemnet-")) continue;
    const std::string path = entry.path().string() + "/manifest.json";
    auto manifest = gpumemnet::GpuMemNetManifest::Load(path);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_EQ(manifest->id, name);
    EXPECT_FALSE(manifest->members.empty());
    EXPECT_EQ(manifest->Text(), Read(path)) << path;
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// The text with the first `"key": value,` after `after` taken out (the value is
// whatever the last calibration wrote).
std::string WithoutFirst(const std::string& text, const std::string& key,
                         const std::string& after = "") {
  const size_t from = text.find(after);
  EXPECT_NE(from, std::string::npos) << after;
  const size_t at = text.find("\"" + key + "\": ", from == std::string::npos ? 0 : from);
  EXPECT_NE(at, std::string::npos) << key;
  const size_t comma = text.find(',', at);
  std::string out = text;
  return at == std::string::npos ? out : out.erase(at, comma + 1 - at);
}

TEST(Manifests, AMissingKeyIsNamedWithItsFile) {
  const std::string sim_path = kModels + "/allocsim/manifest.json";
  const std::string sim = Read(sim_path);
  auto no_factor =
      allocsim::SimulationManifest::Parse(WithoutFirst(sim, "safe_factor"), sim_path);
  ASSERT_FALSE(no_factor.ok());
  EXPECT_EQ(no_factor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(no_factor.status().message(), sim_path))
      << no_factor.status();
  EXPECT_TRUE(absl::StrContains(no_factor.status().message(),
                                "'calibration.families.mlp.safe_factor' is missing"))
      << no_factor.status();

  const std::string gpus_path = kModels + "/gpu_profiles.json";
  auto no_context = core::GpuProfilesManifest::Parse(
      WithoutFirst(Read(gpus_path), "context_mib", "\"h100-pcie\""), gpus_path);
  ASSERT_FALSE(no_context.ok());
  EXPECT_TRUE(absl::StrContains(no_context.status().message(),
                                "'gpus[2].context_mib' is missing"))
      << no_context.status();

  const std::string net_path = kModels + "/gpumemnet-cnn-mlp/manifest.json";
  auto no_seed = gpumemnet::GpuMemNetManifest::Parse(
      ReplaceOnce(Read(net_path), "\"the training split only\",\n   \"seed\": 2026",
                  "\"the training split only\""),
      net_path);
  ASSERT_FALSE(no_seed.ok());
  EXPECT_TRUE(absl::StrContains(no_seed.status().message(),
                                "'training.cross_validation.seed' is missing"))
      << no_seed.status();
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
}  // namespace gpuest::estimators
