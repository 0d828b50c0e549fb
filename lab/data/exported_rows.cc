// The JSON lines of python3 -m gpuest.synthetic.export and lab/data/
// describe_timm.py: one object per row with "fileName", "description" (a
// ModelDescription in protobuf's JSON mapping), "maxMemoryMib" and "status", and
// optionally "measuredStatus", "model", "matched" and "fakeTensorMib". Read strictly:
// an unknown key is an error naming the line and the key.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/strict_json.h"
#include "common/text_file.h"
#include "google/protobuf/util/json_util.h"
#include "lab/data/measured_rows.h"
#include "nlohmann/json.hpp"

namespace gpuest::data {
namespace {
using Fields = common::strict_json::Fields<nlohmann::json>;
}  // namespace

absl::StatusOr<MeasuredFile> ReadExportedRows(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text,
                          common::ReadTextFile(path, common::kMaxDatasetFileBytes));
  MeasuredFile file;
  file.name = std::filesystem::path(path).filename().string();
  file.sha256 = common::Sha256Hex(text);
  int number = 0;
  auto where = [&](int line) { return absl::StrCat(path, " line ", line); };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    MeasuredRow row;
    GPUEST_ASSIGN_OR_RETURN(const nlohmann::json json,
                            Fields::Parse(line, where(number)));
    GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, where(number)));
    std::string status;
    GPUEST_RETURN_IF_ERROR(f.Get("fileName", row.file_name));
    GPUEST_RETURN_IF_ERROR(f.Get("maxMemoryMib", row.peak_mib));
    GPUEST_RETURN_IF_ERROR(f.Get("status", status));
    if (status != "SUCCESSFUL" && status != "OOM_CRASH" && status != "CRASHED") {
      return f.Error("status", "must be \"SUCCESSFUL\", \"OOM_CRASH\" or \"CRASHED\"");
    }
    row.oom = status == "OOM_CRASH";
    row.status = row.oom ? "OOM" : status == "CRASHED" ? "CRASHED" : "OK";
    GPUEST_RETURN_IF_ERROR(f.GetOptional("measuredStatus", row.status));
    if (row.status != "OK" && row.status != "OOM" && row.status != "OOM_INFERRED" &&
        row.status != "SPIKE" && row.status != "CRASHED") {
      return f.Error("measuredStatus",
                     absl::StrCat("is not a status: '", row.status, "'"));
    }
    if (row.oom != (row.status == "OOM" || row.status == "OOM_INFERRED") ||
        (status == "CRASHED") != (row.status == "CRASHED")) {
      return f.Error("measuredStatus",
                     absl::StrCat("'", row.status, "' disagrees with status"));
    }
    GPUEST_ASSIGN_OR_RETURN(const nlohmann::json* description, f.Value("description"));
    const auto parsed =
        google::protobuf::util::JsonStringToMessage(description->dump(), &row.model);
    if (!parsed.ok()) return f.Error("description", std::string(parsed.message()));
    // Written by the exporters for people and other tools; nothing here reads them.
    std::string model;
    bool matched = false;
    GPUEST_RETURN_IF_ERROR(f.GetOptional("model", model));
    GPUEST_RETURN_IF_ERROR(f.GetOptional("matched", matched));
    // What else the exporter estimated: FakeTensor's figure of the timm rows.
    double fake_tensor_mib = 0;
    if (f.Has("fakeTensorMib")) {
      GPUEST_RETURN_IF_ERROR(f.Get("fakeTensorMib", fake_tensor_mib));
      row.columns["fakeTensorMib"] = fake_tensor_mib;
    }
    GPUEST_RETURN_IF_ERROR(f.Finish());
    file.rows.push_back(std::move(row));
  }
  return file;
}

}  // namespace gpuest::data
