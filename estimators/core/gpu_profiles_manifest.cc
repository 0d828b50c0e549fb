#include "estimators/core/gpu_profiles_manifest.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "estimators/core/manifest_json.h"

namespace gpuest::core {
namespace {

using Json = nlohmann::ordered_json;
using Fields = manifest::Fields<Json>;

constexpr char kCalibrated[] = "calibrated";
constexpr char kAssumed[] = "assumed";

// A context measured on one stack: {"cuda_major": 13, "torch": "2.11",
// "module_loading": "LAZY", "context_mib": 758, "basis": "..."} (torch optional).
absl::StatusOr<StackContext> StackContextFromJson(Fields& f) {
  StackContext c;
  int cuda_major = 0;
  uint64_t context_mib = 0;
  GPUEST_RETURN_IF_ERROR(f.Get("cuda_major", cuda_major));
  GPUEST_RETURN_IF_ERROR(f.GetOptional("torch", c.torch));
  GPUEST_RETURN_IF_ERROR(f.Get("module_loading", c.module_loading));
  GPUEST_RETURN_IF_ERROR(f.Get("context_mib", context_mib));
  GPUEST_RETURN_IF_ERROR(f.Get("basis", c.basis));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  if (cuda_major < 1 || cuda_major > 99) {
    return f.Error("cuda_major", "must be a CUDA major version");
  }
  if (c.module_loading != "LAZY" && c.module_loading != "EAGER") {
    return f.Error("module_loading", "must be LAZY or EAGER");
  }
  c.cuda_major = static_cast<uint32_t>(cuda_major);
  c.context_bytes = context_mib << 20;
  return c;
}

// The stack a profile's own context was calibrated on: {"cuda_major": 12, "torch":
// "2.4", "module_loading": "LAZY"} (torch optional).
absl::StatusOr<StackContext> CalibratedStackFromJson(Fields& f) {
  StackContext c;
  int cuda_major = 0;
  GPUEST_RETURN_IF_ERROR(f.Get("cuda_major", cuda_major));
  GPUEST_RETURN_IF_ERROR(f.GetOptional("torch", c.torch));
  GPUEST_RETURN_IF_ERROR(f.Get("module_loading", c.module_loading));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  if (cuda_major < 1 || cuda_major > 99) {
    return f.Error("cuda_major", "must be a CUDA major version");
  }
  if (c.module_loading != "LAZY" && c.module_loading != "EAGER") {
    return f.Error("module_loading", "must be LAZY or EAGER");
  }
  c.cuda_major = static_cast<uint32_t>(cuda_major);
  return c;
}

absl::StatusOr<GpuProfile> GpuFromJson(Fields& f) {
  GpuProfile p;
  uint64_t memory_mib = 0, context_mib = 0;
  std::string constants;
  GPUEST_RETURN_IF_ERROR(f.Get("id", p.id));
  GPUEST_RETURN_IF_ERROR(f.Get("name", p.name));
  GPUEST_RETURN_IF_ERROR(f.Get("architecture", p.architecture));
  GPUEST_RETURN_IF_ERROR(f.Get("memory_mib", memory_mib));
  GPUEST_RETURN_IF_ERROR(f.GetOptional("aliases", p.aliases));
  GPUEST_RETURN_IF_ERROR(f.Get("context_mib", context_mib));
  GPUEST_RETURN_IF_ERROR(f.Get("cublas_workspace_bytes", p.cublas_workspace_bytes));
  GPUEST_RETURN_IF_ERROR(f.Get("constants", constants));
  GPUEST_RETURN_IF_ERROR(f.Get("constants_basis", p.constants_basis));
  if (f.Has("contexts")) {
    GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> contexts, f.Objects("contexts"));
    for (Fields& c : contexts) {
      GPUEST_ASSIGN_OR_RETURN(StackContext context, StackContextFromJson(c));
      p.contexts.push_back(std::move(context));
    }
  }
  if (f.Has("context_stack")) {
    GPUEST_ASSIGN_OR_RETURN(Fields stack, f.Object("context_stack"));
    GPUEST_ASSIGN_OR_RETURN(p.context_stack, CalibratedStackFromJson(stack));
  }
  GPUEST_RETURN_IF_ERROR(f.Finish());
  if (p.id.empty()) return f.Error("id", "is empty");
  if (memory_mib == 0) return f.Error("memory_mib", "must be more than 0");
  if (constants != kCalibrated && constants != kAssumed) {
    return f.Error(
        "constants",
        absl::StrCat("must be \"calibrated\" or \"assumed\", not \"", constants, "\""));
  }
  p.memory_bytes = memory_mib << 20;
  p.context_bytes = context_mib << 20;
  p.constants_calibrated = constants == kCalibrated;
  return p;
}

}  // namespace

Json GpuProfilesManifest::ToJson() const {
  Json doc;
  if (!comment.empty()) doc["_comment"] = comment;
  doc["default"] = default_id;
  doc["gpus"] = Json::array();
  for (const GpuProfile& p : gpus) {
    Json g;
    g["id"] = p.id;
    g["name"] = p.name;
    g["architecture"] = p.architecture;
    g["memory_mib"] = p.memory_bytes >> 20;
    g["aliases"] = p.aliases;
    g["context_mib"] = p.context_bytes >> 20;
    g["cublas_workspace_bytes"] = p.cublas_workspace_bytes;
    g["constants"] = p.constants_calibrated ? kCalibrated : kAssumed;
    g["constants_basis"] = p.constants_basis;
    if (p.context_stack) {
      Json& stack = g["context_stack"];
      stack["cuda_major"] = p.context_stack->cuda_major;
      if (!p.context_stack->torch.empty()) stack["torch"] = p.context_stack->torch;
      stack["module_loading"] = p.context_stack->module_loading;
    }
    if (!p.contexts.empty()) {
      g["contexts"] = Json::array();
      for (const StackContext& c : p.contexts) {
        Json entry;
        entry["cuda_major"] = c.cuda_major;
        if (!c.torch.empty()) entry["torch"] = c.torch;
        entry["module_loading"] = c.module_loading;
        entry["context_mib"] = c.context_bytes >> 20;
        entry["basis"] = c.basis;
        g["contexts"].push_back(std::move(entry));
      }
    }
    doc["gpus"].push_back(std::move(g));
  }
  return doc;
}

absl::StatusOr<GpuProfilesManifest> GpuProfilesManifest::FromJson(
    const Json& json, const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  GpuProfilesManifest m;
  GPUEST_RETURN_IF_ERROR(f.GetOptional("_comment", m.comment));
  GPUEST_RETURN_IF_ERROR(f.Get("default", m.default_id));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> gpus, f.Objects("gpus"));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  if (gpus.empty()) return f.Error("gpus", "is empty");
  bool has_default = false;
  for (Fields& g : gpus) {
    GPUEST_ASSIGN_OR_RETURN(GpuProfile p, GpuFromJson(g));
    has_default = has_default || p.id == m.default_id;
    m.gpus.push_back(std::move(p));
  }
  if (!has_default) {
    return f.Error("default",
                   absl::StrCat("'", m.default_id, "' is not the id of a listed GPU"));
  }
  return m;
}

absl::StatusOr<GpuProfilesManifest> GpuProfilesManifest::Parse(const std::string& text,
                                                               const std::string& file) {
  return core::manifest::ParseManifest<GpuProfilesManifest, Json>(text, file);
}

absl::StatusOr<GpuProfilesManifest> GpuProfilesManifest::Load(const std::string& path) {
  return core::manifest::LoadManifest<GpuProfilesManifest, Json>(path);
}

std::string GpuProfilesManifest::Text() const { return ToJson().dump(2) + "\n"; }

absl::Status GpuProfilesManifest::SetMeasuredContext(const std::string& gpu_id,
                                                     const std::string& measured_on,
                                                     double context_mib,
                                                     const std::string& context_basis,
                                                     bool assumed_too) {
  if (!(context_mib >= 0) || context_mib > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("context_mib: ", context_mib, " is not a context in MiB"));
  }
  GpuProfile* measured = nullptr;
  std::vector<std::string> ids;
  for (GpuProfile& g : gpus) {
    ids.push_back(g.id);
    if (g.id == gpu_id) measured = &g;
  }
  if (measured == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "gpu: '", gpu_id, "' is not in the profiles (", absl::StrJoin(ids, ", "), ")"));
  }
  if (!measured_on.empty() && measured->name != measured_on) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu: '", gpu_id, "' is '", measured->name,
                     "', but the rows were measured on '", measured_on, "'"));
  }
  const uint64_t context_bytes = static_cast<uint64_t>(std::llround(context_mib)) << 20;
  if (assumed_too) {
    for (GpuProfile& g : gpus) {
      if (!g.constants_calibrated) g.context_bytes = context_bytes;
    }
  }
  constexpr char kWorkspace[] = "; cuBLAS workspace:";
  const size_t kept = measured->constants_basis.find(kWorkspace);
  measured->constants_basis = absl::StrCat(
      "context: ", context_basis,
      kept == std::string::npos ? "" : measured->constants_basis.substr(kept));
  measured->context_bytes = context_bytes;
  measured->constants_calibrated = true;
  return absl::OkStatus();
}

}  // namespace gpuest::core
