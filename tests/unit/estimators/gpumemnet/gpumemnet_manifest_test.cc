// estimators/gpumemnet/gpumemnet_manifest: every shipped ensemble's manifest reads
// into its type and writes back to the very same text.
#include "estimators/gpumemnet/gpumemnet_manifest.h"

#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/core/manifest_text.h"

namespace gpuest::gpumemnet {
namespace {

using core::manifest_text::Read;

const std::string kModels = GPUEST_MODELS_DIR;

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

}  // namespace
}  // namespace gpuest::gpumemnet
