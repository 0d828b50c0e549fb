// The JSON lines of python3 -m gpuest.synthetic.export: one object per row with
// "fileName", "description" (a ModelDescription in protobuf's JSON mapping),
// "maxMemoryMib" and "status".
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "training/data/measured_rows.h"

namespace gpuest::data {

absl::StatusOr<MeasuredFile> ReadExportedRows(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  MeasuredFile file;
  file.name = std::filesystem::path(path).filename().string();
  file.sha256 = Sha256Hex(text);
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", number, ": ", why));
    };
    MeasuredRow row;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      row.file_name = j.at("fileName").get<std::string>();
      row.peak_mib = j.at("maxMemoryMib").get<double>();
      row.oom = j.at("status").get<std::string>() == "OOM_CRASH";
      row.status = j.value("measuredStatus", row.oom ? "OOM" : "OK");
      if (row.status != "OK" && row.status != "OOM" && row.status != "OOM_INFERRED" &&
          row.status != "SPIKE" && row.status != "CRASHED") {
        return bad(absl::StrCat("unknown measuredStatus '", row.status, "'"));
      }
      if (row.oom != (row.status == "OOM" || row.status == "OOM_INFERRED")) {
        return bad(absl::StrCat("status and measuredStatus '", row.status, "' disagree"));
      }
      const auto status = google::protobuf::util::JsonStringToMessage(
          j.at("description").dump(), &row.model);
      if (!status.ok()) return bad(std::string(status.message()));
      // What else the exporter measured or estimated ("fakeTensorMib" of the timm rows).
      for (const auto& [key, value] : j.items()) {
        if (value.is_number() && key != "maxMemoryMib") {
          row.columns[key] = value.get<double>();
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return bad(e.what());
    }
    file.rows.push_back(std::move(row));
  }
  return file;
}

}  // namespace gpuest::data
