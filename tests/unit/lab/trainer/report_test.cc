// lab/trainer/report: the report written from the shipped manifests is the trainer's
// part of docs/accuracy.md as committed (the command line and the models' path as
// they were when it was written), and the calibration's part after the marker stays.
#include "lab/trainer/report.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/text_file.h"
#include "gtest/gtest.h"
#include "lab/trainer/report_sections.h"

namespace gpuest::trainer {
namespace {

const std::string kModels = GPUEST_MODELS_DIR;
const std::string kAccuracy = kModels + "/../docs/accuracy.md";
const char kCommand[] =
    "./build/lab/trainer/gpuest-train --report-only --out models --report "
    "docs/accuracy.md";

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text =
      common::ReadTextFile(path, common::kMaxConfigFileBytes);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

TEST(Report, TheShippedModelsReportIsDocsAccuracy) {
  const std::string path =
      ::testing::TempDir() + "/report_test_" + std::to_string(getpid()) + ".md";
  const std::string committed = Read(kAccuracy);
  ASSERT_TRUE(absl::StrContains(committed, kSimulationMarker));
  ASSERT_TRUE(common::WriteTextFile(path, committed).ok());
  ASSERT_TRUE(WriteReport(kModels, path, kCommand).ok());
  EXPECT_EQ(absl::StrReplaceAll(Read(path), {{"`" + kModels + "/`", "`models/`"}}),
            committed);
  std::remove(path.c_str());
}

TEST(Report, AFolderWithoutManifestsIsRefused) {
  const std::string empty =
      ::testing::TempDir() + "/report_test_empty_" + std::to_string(getpid());
  std::filesystem::create_directories(empty);
  const absl::Status s = WriteReport(empty, empty + "/accuracy.md", kCommand);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "no gpumemnet-* manifests in " + empty))
      << s;
  EXPECT_FALSE(std::filesystem::exists(empty + "/accuracy.md"));
  std::filesystem::remove_all(empty);
}

}  // namespace
}  // namespace gpuest::trainer
