// File: dataset.h
//
// The trainer's input: the measured rows of one family (measured_rows.h) that can be
// learnt from, each with its features. The MLP and CNN rows come from their CSVs; the
// Transformer rows from the JSON lines that gpuest.synthetic.export writes, since its
// CSV has no layer list. Rows that cannot be learnt from are dropped and counted, with
// the reason, for the report.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"
#include "lab/data/measured_rows.h"

namespace gpuest::data {

struct Example {
  data::MeasuredRow measured;  // Its utilization: none for OOM runs.
  v1::FeatureVector features;  // ExtractFeatures(measured.model): the one function.
  double memory_bytes() const;
};

struct DatasetFile {
  std::string name;  // "cnn.csv"
  std::string sha256;
  std::string role;  // "measurements", "layer sequences (gpuest.synthetic.export)"
};

struct Dataset {
  v1::ModelFamily family = v1::MODEL_FAMILY_UNSPECIFIED;
  std::vector<DatasetFile> files;
  int64_t rows = 0;  // Rows read, before dropping.
  std::vector<Example> examples;
  std::vector<std::pair<std::string, int64_t>> dropped;  // (reason, rows).
  std::vector<std::string> utilization_metrics;          // Measured in this dataset.
};

// MLP or CNN CSV (mlp.csv, cnn.csv).
absl::StatusOr<Dataset> LoadCsvDataset(const std::string& path, v1::ModelFamily family);

// The Transformer sample: JSON lines of gpuest.synthetic.export, with the source CSV
// for its digest.
absl::StatusOr<Dataset> LoadExportedDataset(const std::string& jsonl_path,
                                            const std::string& source_csv_path);

}  // namespace gpuest::data
