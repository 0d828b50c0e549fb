// The manifests' one strict reader (estimators/core/manifest_json.h): a manifest of
// each kind (the GPU profiles, a simulation's, a GPUMemNet ensemble's) with a key
// missing is refused with the file and the key named.
#include "estimators/core/manifest_json.h"

#include <string>

#include "absl/strings/match.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/gpu_profiles_manifest.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/core/manifest_text.h"

namespace gpuest::core {
namespace {

using manifest_text::Read;
using manifest_text::ReplaceOnce;

const std::string kModels = GPUEST_MODELS_DIR;

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

}  // namespace
}  // namespace gpuest::core
