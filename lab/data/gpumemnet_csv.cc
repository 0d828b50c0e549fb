#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "lab/data/measured_rows.h"

namespace gpuest::data {
namespace {

// "input_channels:3_..._input_size:174_..." -> value of key, or "".
std::string ConfigValue(absl::string_view file_name, absl::string_view key) {
  const std::string needle = absl::StrCat(key, ":");
  size_t pos = 0;
  while ((pos = file_name.find(needle, pos)) != absl::string_view::npos) {
    if (pos == 0 || file_name[pos - 1] == '_') {
      const size_t start = pos + needle.size();
      const size_t end = file_name.find('_', start);
      return std::string(file_name.substr(start, end - start));
    }
    pos += needle.size();
  }
  return "";
}

}  // namespace

std::vector<std::string> SplitCsvRecord(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back().push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back().push_back(c);
    }
  }
  return fields;
}

absl::StatusOr<std::vector<v1::Layer>> ParseLayerList(absl::string_view text) {
  std::vector<v1::Layer> layers;
  size_t pos = 0;
  while ((pos = text.find('(', pos)) != absl::string_view::npos) {
    const size_t close = text.find(')', pos);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unclosed tuple at offset ", pos));
    }
    std::vector<absl::string_view> parts =
        absl::StrSplit(text.substr(pos + 1, close - pos - 1), ',');
    if (parts.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("tuple at offset ", pos, " does not have 3 fields"));
    }
    absl::string_view type = absl::StripAsciiWhitespace(parts[0]);
    absl::ConsumePrefix(&type, "'");
    absl::ConsumeSuffix(&type, "'");
    int64_t activations = 0, parameters = 0;
    if (type.empty() ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[1]), &activations) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[2]), &parameters)) {
      return absl::InvalidArgumentError(absl::StrCat("bad tuple at offset ", pos));
    }
    v1::Layer& layer = layers.emplace_back();
    layer.set_type(std::string(type));
    layer.set_output_activations(activations);
    layer.set_parameters(parameters);
    pos = close + 1;
  }
  return layers;
}

namespace {

// A CSV's columns by name.
using Columns = std::map<std::string, size_t>;

// The model a row describes: its layers, batch, input shape from its file name, and
// what the study ran it with (Adam in fp32, PyTorch 2.4.1).
absl::StatusOr<v1::ModelDescription> ModelOfRow(const std::vector<std::string>& f,
                                                Columns& column, v1::ModelFamily family,
                                                const std::string& file_name) {
  v1::ModelDescription m;
  GPUEST_ASSIGN_OR_RETURN(std::vector<v1::Layer> layers,
                          ParseLayerList(f[column["Activations-Params"]]));
  m.set_name(file_name);
  m.set_family(family);
  for (v1::Layer& layer : layers) *m.add_layers() = std::move(layer);
  int64_t batch = 0;
  if (!absl::SimpleAtoi(f[column["Batch Size"]], &batch)) {
    return absl::InvalidArgumentError("bad Batch Size");
  }
  m.set_batch_size(batch);
  // The study trained with Adam in fp32.
  m.set_optimizer(v1::OPTIMIZER_ADAM);
  m.set_dtype(v1::DTYPE_FLOAT32);
  m.set_framework("pytorch");
  m.set_framework_version("2.4.1");
  if (f[column["Activation Function"]] != "None") {
    m.set_activation_function(f[column["Activation Function"]]);
  }
  int64_t dim = 0;
  if (family == v1::MODEL_FAMILY_CNN) {
    int64_t channels = 0;
    if (absl::SimpleAtoi(ConfigValue(file_name, "input_channels"), &channels) &&
        absl::SimpleAtoi(ConfigValue(file_name, "input_size"), &dim)) {
      m.add_input_shape(channels);
      m.add_input_shape(dim);
      m.add_input_shape(dim);
    }
  } else if (absl::SimpleAtoi(ConfigValue(file_name, "input"), &dim)) {
    m.add_input_shape(dim);
  }
  return m;
}

// One measured row: the model, its peak, whether it crashed out of memory, its
// utilization ("Avg " columns) and every other numeric column.
absl::StatusOr<MeasuredRow> RowOf(const std::vector<std::string>& f,
                                  const std::vector<std::string>& header, Columns& column,
                                  v1::ModelFamily family) {
  MeasuredRow row;
  row.file_name = f[column["Filename"]];
  GPUEST_ASSIGN_OR_RETURN(row.model, ModelOfRow(f, column, family, row.file_name));
  if (!absl::SimpleAtod(f[column["Max GPU Memory (MiB)"]], &row.peak_mib)) {
    return absl::InvalidArgumentError("bad Max GPU Memory (MiB)");
  }
  row.oom = column.count("Status") && f[column["Status"]] == "OOM_CRASH";
  row.status = row.oom ? "OOM" : "OK";
  for (size_t i = 0; i < header.size(); ++i) {
    double value = 0;
    if (!absl::SimpleAtod(f[i], &value)) continue;
    if (absl::StartsWith(header[i], "Avg ")) {
      if (value >= 0) row.utilization[header[i].substr(4)] = value;
    } else {
      row.columns[header[i]] = value;
    }
  }
  return row;
}

}  // namespace

absl::StatusOr<MeasuredFile> ReadGpuMemNetCsv(const std::string& path,
                                              v1::ModelFamily family) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text,
                          common::ReadTextFile(path, common::kMaxDatasetFileBytes));
  MeasuredFile file;
  file.name = std::filesystem::path(path).filename().string();
  file.sha256 = common::Sha256Hex(text);
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const std::vector<std::string> header = SplitCsvRecord(lines[0]);
  Columns column;
  for (size_t i = 0; i < header.size(); ++i) {
    column[header[i]] = i;
    if (absl::StartsWith(header[i], "Avg ")) {
      file.utilization_metrics.push_back(header[i].substr(4));
    }
  }
  for (const char* required : {"Filename", "Activations-Params", "Batch Size",
                               "Max GPU Memory (MiB)", "Activation Function"}) {
    if (!column.count(required)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no column '", required, "'"));
    }
  }
  for (size_t line = 1; line < lines.size(); ++line) {
    if (lines[line].empty()) continue;
    const std::vector<std::string> f = SplitCsvRecord(lines[line]);
    absl::StatusOr<MeasuredRow> row =
        absl::InvalidArgumentError("wrong number of fields");
    if (f.size() == header.size()) row = RowOf(f, header, column, family);
    if (!row.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " row ", line + 1, ": ", row.status().message()));
    }
    file.rows.push_back(*std::move(row));
  }
  return file;
}

}  // namespace gpuest::data
