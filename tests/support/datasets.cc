#include "tests/support/datasets.h"

#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuest::testing {

std::string DataRoot() {
  const char* from_env = std::getenv("GPUEST_DATA_DIR");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return GPUEST_DEFAULT_DATA_ROOT;
}

absl::StatusOr<std::string> FindDataset(const std::string& relative) {
  const std::string path = DataRoot() + "/" + relative;
  std::error_code error;
  if (std::filesystem::exists(path, error)) return path;
  return absl::NotFoundError(absl::StrCat(
      "dataset ", relative, " not found under ", DataRoot(),
      ": set GPUEST_DATA_DIR to the folder holding gpumemnet/, lucid/ and timm/ "
      "(README.md, \"The measured data\")"));
}

bool DataRequired() {
  const char* value = std::getenv("GPUEST_REQUIRE_DATA");
  return value != nullptr && std::string(value) == "1";
}

std::string FixtureRoot() { return GPUEST_FIXTURE_DATA_ROOT; }

}  // namespace gpuest::testing
