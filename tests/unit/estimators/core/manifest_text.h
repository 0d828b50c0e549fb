// The manifests' tests' shared steps (gpu_profiles_manifest_test, manifest_json_test,
// allocsim's simulation_manifest_test, gpumemnet's gpumemnet_manifest_test): a shipped
// manifest's text, and that text with one key broken.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::core::manifest_text {

inline std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text =
      common::ReadTextFile(path, common::kMaxConfigFileBytes);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// Replaces exactly one occurrence of `from`, so that a test breaks one key.
inline std::string ReplaceOnce(const std::string& text, const std::string& from,
                               const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from << " is not unique";
  std::string out = text;
  return at == std::string::npos ? out : out.replace(at, from.size(), to);
}

}  // namespace gpuest::core::manifest_text
