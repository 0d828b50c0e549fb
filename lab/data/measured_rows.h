// File: measured_rows.h
//
// The measured datasets as one kind of row: a ModelDescription paired with what the
// A100 40GB measured when that model trained. One reader per file format:
// - the GPUMemNet CSVs (mlp.csv, cnn.csv): the layers and the measurements in one row;
// - the JSON lines of python3 -m gpuest.synthetic.export: the model rebuilt and
//   described (with --trace, its allocation trace too), beside the CSV's measurements.
// The trainer (lab/data/dataset.h) and the calibration read the data through here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::data {

struct MeasuredRow {
  v1::ModelDescription model;  // Its name is file_name.
  std::string file_name;       // The generator configuration (the CSV's Filename).
  // Peak nvidia-smi memory; not a peak for OOM rows, 0 where the monitor missed it.
  double peak_mib = 0;
  bool oom = false;  // Status OOM_CRASH: did not fit in the A100's 40 GB.
  // What the row shows (shared/data/README.md, timm section): "OK" (a completed run,
  // its peak the job's footprint), "OOM" / "OOM_INFERRED" (did not fit: oom is true),
  // "SPIKE" (completed, but its peak holds cuDNN benchmark mode's search transient: not
  // a requirement) or "CRASHED" (died for another reason: says nothing about the job).
  // GPUMemNet's rows are "OK" or "OOM".
  std::string status = "OK";
  // "SMACT" -> 0.2: the utilization metrics measured for this row (the CSV's "Avg ..."
  // columns; a -1 there, not measured, leaves the metric out).
  std::map<std::string, double> utilization;
  // The CSV's other numeric columns by header ("Total Activations", "Conv2d Count"),
  // for checking the features against the study's own totals; for JSON lines, their
  // other numeric keys ("fakeTensorMib": FakeTensor's estimate of the timm rows).
  std::map<std::string, double> columns;
};

struct MeasuredFile {
  std::string name;    // "cnn.csv": the base name.
  std::string sha256;  // Of the whole file, for the manifests.
  // The utilization metrics the file has columns for ("SMACT", ...), in file order.
  std::vector<std::string> utilization_metrics;
  std::vector<MeasuredRow> rows;  // Every row, in file order.
};

// A GPUMemNet CSV. family is MLP or CNN: batch size, layers, activation function and
// input shape come from the row. InvalidArgument names the file and row of a malformed
// line.
absl::StatusOr<MeasuredFile> ReadGpuMemNetCsv(const std::string& path,
                                              v1::ModelFamily family);

// JSON lines of gpuest.synthetic.export. InvalidArgument names the file and line.
absl::StatusOr<MeasuredFile> ReadExportedRows(const std::string& path);

// "[('linear', 1173, 2753031), ...]" -> layers, in the dataset's own spelling.
absl::StatusOr<std::vector<v1::Layer>> ParseLayerList(absl::string_view text);

// One CSV record split into fields (RFC 4180 quoting).
std::vector<std::string> SplitCsvRecord(absl::string_view line);

}  // namespace gpuest::data
