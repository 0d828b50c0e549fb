// File: report_sections.h
//
// docs/accuracy.md has two writers: gpuest-train (the classifiers) and
// gpuest-calibrate-memory (the allocator simulation). Each rewrites only its own part:
// the trainer everything before kSimulationMarker, the calibration everything after it.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuest::trainer {

inline constexpr char kSimulationMarker[] =
    "<!-- gpuest-calibrate-memory writes below this line -->";

// The report's text before the marker (or all of it), and from the marker on (or "").
std::string ReportHead(const std::string& path);
std::string ReportTail(const std::string& path);

// Writes head + tail to path, replacing it.
absl::Status WriteReportFile(const std::string& path, const std::string& head,
                             const std::string& tail);

}  // namespace gpuest::trainer
