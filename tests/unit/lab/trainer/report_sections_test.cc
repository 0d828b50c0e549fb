// lab/trainer/report_sections: docs/accuracy.md's two writers each rewrite only their
// own part, split at the calibration's marker.
#include "lab/trainer/report_sections.h"

#include <unistd.h>

#include <string>

#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::trainer {
namespace {

std::string Scratch(const std::string& name) {
  return ::testing::TempDir() + "/report_sections_" + std::to_string(getpid()) + "_" +
         name;
}

TEST(ReportSections, TheMarkerSplitsTheTrainersPartFromTheCalibrations) {
  const std::string path = Scratch("both.md");
  const std::string head = "# Accuracy\n\nthe classifiers\n";
  const std::string tail = std::string(kSimulationMarker) + "\n## Simulation\n";
  ASSERT_TRUE(WriteReportFile(path, head, tail).ok());
  EXPECT_EQ(common::ReadTextFile(path, common::kMaxConfigFileBytes).value_or(""),
            head + tail);
  EXPECT_EQ(ReportHead(path), head);
  EXPECT_EQ(ReportTail(path), tail);
  // Each writer keeps the other's part.
  ASSERT_TRUE(WriteReportFile(path, "# New head\n", ReportTail(path)).ok());
  EXPECT_EQ(ReportTail(path), tail);
  ASSERT_TRUE(WriteReportFile(path, ReportHead(path), kSimulationMarker).ok());
  EXPECT_EQ(ReportHead(path), "# New head\n");
  std::remove(path.c_str());
}

TEST(ReportSections, AReportWithoutTheMarkerIsAllHeadAndNoneIsEmpty) {
  const std::string path = Scratch("head_only.md");
  ASSERT_TRUE(WriteReportFile(path, "only the classifiers\n", "").ok());
  EXPECT_EQ(ReportHead(path), "only the classifiers\n");
  EXPECT_EQ(ReportTail(path), "");
  std::remove(path.c_str());
  EXPECT_EQ(ReportHead(Scratch("missing.md")), "");
  EXPECT_EQ(ReportTail(Scratch("missing.md")), "");
}

}  // namespace
}  // namespace gpuest::trainer
