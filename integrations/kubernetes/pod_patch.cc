#include "integrations/kubernetes/pod_patch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/units.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

uint64_t CeilDiv(uint64_t bytes, uint64_t unit) {
  return bytes / unit + (bytes % unit != 0 ? 1 : 0);
}

}  // namespace

std::string JsonPointerToken(const std::string& key) {
  return absl::StrReplaceAll(key, {{"~", "~0"}, {"/", "~1"}});
}

absl::StatusOr<SharingScheduler> ParseSharingScheduler(const std::string& name) {
  if (name == "hami") return SharingScheduler::kHami;
  if (name == "volcano") return SharingScheduler::kVolcano;
  if (name == "kai") return SharingScheduler::kKai;
  if (name == "alibaba") return SharingScheduler::kAlibaba;
  return absl::InvalidArgumentError(absl::StrCat(
      "--scheduler: '", name, "' is not one of hami, volcano, kai, alibaba"));
}

absl::StatusOr<MemoryRequest> MemoryRequestFor(SharingScheduler scheduler,
                                               uint64_t requirement_bytes) {
  if (requirement_bytes == 0) {
    return absl::InvalidArgumentError(
        "the recommended memory is 0 bytes: nothing to request");
  }
  MemoryRequest r;
  switch (scheduler) {
    case SharingScheduler::kHami:
      r.key = "nvidia.com/gpumem";
      r.enforced = true;  // HAMi-core: a limit on the process's device memory.
      break;
    case SharingScheduler::kVolcano:
      r.key = "volcano.sh/gpu-memory";
      break;
    case SharingScheduler::kKai:
      r.key = "gpu-memory";
      r.annotation = true;
      break;
    case SharingScheduler::kAlibaba:
      r.key = "aliyun.com/gpu-mem";
      r.amount = CeilDiv(requirement_bytes, common::kGiB);
      r.unit = "GiB";
      return r;
  }
  r.amount = CeilDiv(requirement_bytes, common::kMiB);
  r.unit = "MiB";
  return r;
}

std::string EnforcementNote(SharingScheduler scheduler, const MemoryRequest& request,
                            bool cap_needed, double per_process_memory_fraction) {
  if (request.enforced) return "";
  const char* name = scheduler == SharingScheduler::kVolcano ? "Volcano"
                     : scheduler == SharingScheduler::kKai   ? "KAI"
                                                             : "gpushare";
  const std::string fraction =
      per_process_memory_fraction > 0
          ? absl::StrFormat("torch.cuda.set_per_process_memory_fraction(%.3f)",
                            per_process_memory_fraction)
          : std::string(
                "torch.cuda.set_per_process_memory_fraction (estimate with "
                "--gpu for its value)");
  return absl::StrCat(
      "note: ", name, " schedules by ", request.key,
      " but nothing enforces it on the job. ",
      cap_needed ? "This job has a transient (cuDNN benchmark search): uncapped, its "
                   "first step can take the GPU's free memory, other jobs' headroom "
                   "included. Cap it in the job: "
                 : "To hold the job to it, cap it in the job: ",
      fraction,
      " before the first CUDA allocation, or torch.backends.cudnn.benchmark = "
      "False; or use HAMi (--scheduler hami), whose nvidia.com/gpumem HAMi-core "
      "enforces.\n");
}

PodFigures PodFiguresOf(const v1::EstimateResponse& response) {
  return {response.recommendation().memory_bytes(),
          response.recommendation().uncapped_peak_bytes(), response.models_version()};
}

std::string PodPatchJson(const MemoryRequest& request, const PodFigures& figures,
                         const PodShape& shape) {
  nlohmann::ordered_json patch = nlohmann::ordered_json::array();
  auto add = [&patch](const std::string& path, nlohmann::ordered_json value,
                      const char* op = "add") {
    patch.push_back({{"op", op}, {"path", path}, {"value", std::move(value)}});
  };
  const std::string container =
      absl::StrCat("/spec/containers/", shape.container_index, "/resources");
  // RFC 6902 adds a member only to an object that exists.
  if (!shape.has_annotations)
    add("/metadata/annotations", nlohmann::ordered_json::object());
  if (!request.annotation && !shape.has_resources) {
    add(container, {{"limits", nlohmann::ordered_json::object()}});
  } else if (!request.annotation && !shape.has_limits) {
    add(container + "/limits", nlohmann::ordered_json::object());
  }
  const std::string path =
      request.annotation
          ? absl::StrCat("/metadata/annotations/", JsonPointerToken(request.key))
          : absl::StrCat(container, "/limits/", JsonPointerToken(request.key));
  const std::string ours = absl::StrCat(request.amount, " ", request.unit);
  std::string done;
  if (!shape.existing_amount) {
    add(path, std::to_string(request.amount));
    done = absl::StrCat("set ", ours, " of ", request.key);
  } else if (*shape.existing_amount >= request.amount) {
    done = absl::StrCat("kept the pod's ", *shape.existing_amount, " ", request.unit,
                        " of ", request.key, ": not less than gpuest's ", ours);
  } else {
    add(path, std::to_string(request.amount), "replace");
    done = absl::StrCat("raised the pod's ", *shape.existing_amount, " ", request.unit,
                        " of ", request.key, " to gpuest's ", ours);
  }
  auto annotate = [&add](const char* key, std::string value) {
    add(absl::StrCat("/metadata/annotations/", JsonPointerToken(key)), std::move(value));
  };
  annotate(kRequirementAnnotation, std::to_string(figures.requirement_bytes));
  annotate(kUncappedPeakAnnotation, std::to_string(figures.uncapped_peak_bytes));
  if (!figures.models_version.empty()) {
    annotate(kModelsVersionAnnotation, figures.models_version);
  }
  annotate(kMemoryRequestAnnotation, std::move(done));
  return patch.dump() + "\n";
}

}  // namespace gpuest::kubernetes
