#include "lab/data/dataset.h"

#include <filesystem>

#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/core/features.h"
#include "estimators/core/request_validation.h"

namespace gpuest::data {
namespace {

// The utilization metrics GPUUtilNet predicts, in the order of the heads.
constexpr const char* kServedMetrics[] = {"SMACT", "SMOCC", "GRACT", "FP32A"};

// Counts drops in first-seen order.
void Drop(Dataset& d, const std::string& reason) {
  for (auto& [r, n] : d.dropped) {
    if (r == reason) {
      ++n;
      return;
    }
  }
  d.dropped.emplace_back(reason, 1);
}

// Whether the model can be featurised: a valid description with at least one layer.
bool Featurisable(const v1::ModelDescription& model, Dataset& d) {
  if (model.layers_size() == 0) {
    Drop(d, "empty layer list (nothing to featurise)");
    return false;
  }
  if (!core::ValidateModel(model, core::ValidationLimits{}).ok()) {
    Drop(d, "model fails validation");
    return false;
  }
  return true;
}

// Keeps the rows that can be learnt from; missed_peak: the reason a successful row
// without a peak is dropped.
void AddExamples(data::MeasuredFile& file, const std::string& missed_peak, Dataset& d) {
  d.rows += static_cast<int64_t>(file.rows.size());
  for (data::MeasuredRow& row : file.rows) {
    if (!row.oom && row.peak_mib <= 0) {
      Drop(d, missed_peak);
      continue;
    }
    if (!Featurisable(row.model, d)) continue;
    // An OOM run crashed before its utilization meant anything.
    if (row.oom) row.utilization.clear();
    Example e;
    e.features = core::ExtractFeatures(row.model);
    e.measured = std::move(row);
    d.examples.push_back(std::move(e));
  }
}

}  // namespace

double Example::memory_bytes() const {
  return measured.peak_mib * static_cast<double>(common::kMiB);
}

absl::StatusOr<Dataset> LoadCsvDataset(const std::string& path, v1::ModelFamily family) {
  GPUEST_ASSIGN_OR_RETURN(data::MeasuredFile file, data::ReadGpuMemNetCsv(path, family));
  Dataset d;
  d.family = family;
  d.files.push_back({file.name, file.sha256, "measurements"});
  for (const char* metric : kServedMetrics) {
    for (const std::string& present : file.utilization_metrics) {
      if (present == metric) d.utilization_metrics.push_back(metric);
    }
  }
  AddExamples(
      file,
      "SUCCESSFUL with 0 MiB (the monitor missed it; generator crash, input under "
      "7 px)",
      d);
  return d;
}

absl::StatusOr<Dataset> LoadExportedDataset(const std::string& jsonl_path,
                                            const std::string& source_csv_path) {
  Dataset d;
  d.family = v1::MODEL_FAMILY_TRANSFORMER;
  GPUEST_ASSIGN_OR_RETURN(const std::string csv_sha,
                          common::Sha256OfFile(source_csv_path));
  GPUEST_ASSIGN_OR_RETURN(data::MeasuredFile file, data::ReadExportedRows(jsonl_path));
  d.files.push_back({std::filesystem::path(source_csv_path).filename().string(), csv_sha,
                     "measurements"});
  d.files.push_back(
      {file.name, file.sha256, "layer sequences rebuilt by gpuest.synthetic.export"});
  AddExamples(file, "SUCCESSFUL with 0 MiB (the monitor missed it)", d);
  return d;
}

}  // namespace gpuest::data
