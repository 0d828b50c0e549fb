// estimators/core/gpu_profiles_manifest: the shipped gpu_profiles.json reads into its
// type and writes back to the very same text, and a calibration's measured context
// changes the GPUs it should.
#include "estimators/core/gpu_profiles_manifest.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/core/manifest_text.h"

namespace gpuest::core {
namespace {

using manifest_text::Read;

const std::string kModels = GPUEST_MODELS_DIR;

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

}  // namespace
}  // namespace gpuest::core
