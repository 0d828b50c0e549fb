// File: report.h
//
// docs/accuracy.md, written from the manifests that gpuest-train left in a model
// directory: held-out and cross-validation accuracy and macro-F1 per (dataset,
// estimator, bin width), the utilization classes, side by side with the paper, and
// the split, seeds, row counts, drops and uncertainty.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuest::trainer {

// Reads every gpumemnet-*/manifest.json under models_dir and writes the report.
absl::Status WriteReport(const std::string& models_dir, const std::string& path,
                         const std::string& command_line);

}  // namespace gpuest::trainer
