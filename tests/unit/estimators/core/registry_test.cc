// The estimator registry (estimators/core/registry.h): loading a model repository through
// the factories a program passes in.
#include "estimators/core/registry.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "estimators/core/model_repository.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

TEST(Registry, AManifestWithoutAFactoryIsAnError) {
  const std::string dir =
      ::testing::TempDir() + "/registry_unknown_type_" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/some-model");
  std::filesystem::copy_file(std::string(GPUEST_MODELS_DIR) + "/gpu_profiles.json",
                             dir + "/gpu_profiles.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/some-model/manifest.json")
      << R"({"estimator_type": "gpumemnet"})";
  auto registry = EstimatorRegistry::Load({dir, "cpu"});
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(registry.status().message(), "unknown estimator_type"))
      << registry.status();

  // A factory for the type is used, and what it says counts.
  RegistryOptions options{dir, "cpu"};
  options.factories["gpumemnet"] =
      [](const ModelArtifact& artifact,
         const RegistryOptions&) -> absl::StatusOr<std::unique_ptr<Estimator>> {
    return absl::DataLossError("factory called for " + artifact.id);
  };
  registry = EstimatorRegistry::Load(options);
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(registry.status().message(), "some-model"));
}

// A context `gpuest-collect context` measured on a node is taken from the repository's
// contexts/ at load, without a rebuild: the GPU it names gets it (and the repository's
// version changes with it); a file that names no known GPU or is malformed is refused
// by name.
TEST(Registry, ContextsMeasuredOnNodesAreReadFromTheRepository) {
  const std::string dir =
      ::testing::TempDir() + "/registry_contexts_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/contexts");
  std::filesystem::copy_file(std::string(GPUEST_MODELS_DIR) + "/gpu_profiles.json",
                             dir + "/gpu_profiles.json");
  auto before = ScanModelRepository(dir);
  ASSERT_TRUE(before.ok()) << before.status();
  // The collector's own output, as the H100 lease wrote it.
  std::ifstream shipped(std::string(GPUEST_MODELS_DIR) +
                        "/contexts/h100-80gb-cuda13-torch2.11-lazy.json");
  std::string text((std::istreambuf_iterator<char>(shipped)),
                   std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  const std::string a100 =
      absl::StrReplaceAll(text, {{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"}});
  std::ofstream(dir + "/contexts/a100-node.json") << a100;
  auto registry = EstimatorRegistry::Load({dir, "cpu"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  const GpuProfile* gpu = (*registry)->gpus().Find("a100-80gb");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->contexts.size(), 1u);
  EXPECT_EQ(gpu->contexts[0].context_bytes, uint64_t{758} << 20);
  EXPECT_EQ(gpu->contexts[0].cuda_major, 13u);
  EXPECT_EQ(gpu->contexts[0].torch, "2.11");
  EXPECT_TRUE(absl::StrContains(gpu->contexts[0].basis, "a100-node.json"));
  auto after = ScanModelRepository(dir);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(before->version, after->version);

  std::ofstream(dir + "/contexts/a100-node.json")
      << absl::StrReplaceAll(text, {{"NVIDIA H100 80GB HBM3", "NVIDIA B300"}});
  registry = EstimatorRegistry::Load({dir, "cpu"});
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(registry.status().message(), "a100-node.json"))
      << registry.status();
  std::ofstream(dir + "/contexts/a100-node.json")
      << absl::StrReplaceAll(a100, {{"\"LAZY\"", "\"SOMETIMES\""}});
  registry = EstimatorRegistry::Load({dir, "cpu"});
  EXPECT_TRUE(absl::StrContains(registry.status().message(), "module_loading"))
      << registry.status();
  std::filesystem::remove_all(dir);
}

TEST(Registry, MissingRepositoryIsAnError) {
  auto registry = EstimatorRegistry::Load({"/nonexistent/models", "cpu"});
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuest::core
