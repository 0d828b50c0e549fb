#include "lab/trainer/report_sections.h"

#include "absl/strings/str_cat.h"
#include "common/text_file.h"

namespace gpuest::trainer {
namespace {

// The report as it is; "" before it exists.
std::string ReadAll(const std::string& path) {
  return common::ReadTextFile(path, common::kMaxConfigFileBytes).value_or("");
}

}  // namespace

std::string ReportHead(const std::string& path) {
  const std::string text = ReadAll(path);
  return text.substr(0, text.find(kSimulationMarker));
}

std::string ReportTail(const std::string& path) {
  const std::string text = ReadAll(path);
  const size_t at = text.find(kSimulationMarker);
  return at == std::string::npos ? "" : text.substr(at);
}

absl::Status WriteReportFile(const std::string& path, const std::string& head,
                             const std::string& tail) {
  return common::WriteTextFile(path, absl::StrCat(head, tail));
}

}  // namespace gpuest::trainer
