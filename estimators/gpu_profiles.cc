#include "estimators/gpu_profiles.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace gpuest {

absl::StatusOr<GpuProfiles> GpuProfiles::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open GPU profiles ", path));
  std::stringstream text;
  text << in.rdbuf();
  auto profiles = Parse(text.str());
  if (!profiles.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", profiles.status().message()));
  }
  return profiles;
}

absl::StatusOr<GpuProfiles> GpuProfiles::Parse(const std::string& json_text) {
  GpuProfiles out;
  try {
    const nlohmann::json doc = nlohmann::json::parse(json_text);
    const std::string default_id = doc.at("default").get<std::string>();
    for (const auto& g : doc.at("gpus")) {
      GpuProfile p;
      p.id = g.at("id").get<std::string>();
      p.name = g.at("name").get<std::string>();
      p.architecture = g.at("architecture").get<std::string>();
      p.memory_bytes = g.at("memory_mib").get<uint64_t>() << 20;
      if (g.contains("aliases"))
        p.aliases = g.at("aliases").get<std::vector<std::string>>();
      p.context_bytes = g.at("context_mib").get<uint64_t>() << 20;
      p.cublas_workspace_bytes = g.at("cublas_workspace_bytes").get<uint64_t>();
      const std::string constants = g.at("constants").get<std::string>();
      if (constants != "calibrated" && constants != "assumed") {
        return absl::InvalidArgumentError(absl::StrCat(
            p.id, ": constants must be \"calibrated\" or \"assumed\", not \"", constants,
            "\""));
      }
      p.constants_calibrated = constants == "calibrated";
      p.constants_basis = g.at("constants_basis").get<std::string>();
      if (p.id.empty() || p.memory_bytes == 0) {
        return absl::InvalidArgumentError("every GPU needs an id and memory_mib > 0");
      }
      out.profiles_.push_back(std::move(p));
    }
    const GpuProfile* def = out.Find(default_id);
    if (def == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("default GPU '", default_id, "' is not in the list"));
    }
    out.default_index_ = static_cast<size_t>(def - out.profiles_.data());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad GPU profiles: ", e.what()));
  }
  if (out.profiles_.empty()) return absl::InvalidArgumentError("no GPU profiles");
  return out;
}

const GpuProfile* GpuProfiles::Find(absl::string_view name) const {
  const std::string wanted = absl::AsciiStrToLower(name);
  for (const GpuProfile& p : profiles_) {
    if (absl::AsciiStrToLower(p.id) == wanted) return &p;
    for (const std::string& alias : p.aliases) {
      if (absl::AsciiStrToLower(alias) == wanted) return &p;
    }
  }
  return nullptr;
}

std::string GpuProfiles::KnownIds() const {
  return absl::StrJoin(profiles_, ", ",
                       [](std::string* out, const GpuProfile& p) { out->append(p.id); });
}

}  // namespace gpuest
