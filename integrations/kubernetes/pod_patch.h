// File: pod_patch.h
//
// gpuest's requirement as the GPU-sharing schedulers read it from a pod, and
// the JSON Patch (RFC 6902, what a mutating webhook returns and `kubectl patch --type
// json` takes) that sets it. Always rounded up: a request a byte short of the
// requirement is how a job gets killed.
//
//   hami     resources.limits nvidia.com/gpumem   MiB (HAMi)
//   volcano  resources.limits volcano.sh/gpu-memory  MiB (Volcano GPU share)
//   kai      annotation gpu-memory                 MiB (NVIDIA KAI scheduler)
//   alibaba  resources.limits aliyun.com/gpu-mem   GiB (gpushare-scheduler-extender)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::kubernetes {

enum class SharingScheduler { kHami, kVolcano, kKai, kAlibaba };

// "hami", "volcano", "kai", "alibaba"; InvalidArgument naming --scheduler otherwise.
absl::StatusOr<SharingScheduler> ParseSharingScheduler(const std::string& name);

struct MemoryRequest {
  std::string key;          // "nvidia.com/gpumem", "gpu-memory", ...
  bool annotation = false;  // A pod annotation (KAI) rather than a container limit.
  uint64_t amount = 0;      // In unit, rounded up.
  std::string unit;         // "MiB" or "GiB".
  // Whether the scheduler's stack enforces the figure on the job (HAMi: HAMi-core
  // limits the process's device memory); the others only count it when placing.
  bool enforced = false;
};

// What the user must know beside the patch: for a scheduler that does not enforce
// memory, that it does not and how the job caps itself (the recommendation's cap),
// more urgently when the job has a transient (cap.needed). Empty for HAMi.
std::string EnforcementNote(SharingScheduler scheduler, const MemoryRequest& request,
                            bool cap_needed, double per_process_memory_fraction);

// The request for requirement_bytes (the recommendation's memory_bytes), rounded up to
// the scheduler's unit; InvalidArgument for 0 bytes (no figure to request).
absl::StatusOr<MemoryRequest> MemoryRequestFor(SharingScheduler scheduler,
                                               uint64_t requirement_bytes);

// key as one reference token of a JSON Pointer (RFC 6901: "~" as "~0", "/" as "~1"),
// the path of an annotation or a resource in a JSON Patch (the DRA claim's too).
std::string JsonPointerToken(const std::string& key);

// The annotations the patch writes: gpuest's figures, so that the extender and
// operators read them without estimating again, and what it did to the request.
inline constexpr char kRequirementAnnotation[] = "gpuest.io/requirement-bytes";
inline constexpr char kUncappedPeakAnnotation[] = "gpuest.io/uncapped-peak-bytes";
inline constexpr char kModelsVersionAnnotation[] = "gpuest.io/models-version";
inline constexpr char kMemoryRequestAnnotation[] = "gpuest.io/memory-request";

// gpuest's figures for the pod's job (its EstimateResponse's recommendation).
struct PodFigures {
  uint64_t requirement_bytes = 0;    // What the request covers.
  uint64_t uncapped_peak_bytes = 0;  // What the job reaches uncapped (its transient).
  std::string models_version;
};

PodFigures PodFiguresOf(const v1::EstimateResponse& response);

// The pod where the patch writes, as it is now. The defaults: the annotations and the
// container's resources.limits exist (every pod asking for a shared GPU has them) and
// the pod asks for no memory of its own.
struct PodShape {
  int container_index = 0;
  bool has_annotations = true;
  bool has_resources = true;  // spec.containers[i].resources
  bool has_limits = true;     // spec.containers[i].resources.limits
  // The request's key as the user set it, in the request's unit: a larger one is kept,
  // a smaller one raised, and the kMemoryRequestAnnotation says which.
  std::optional<uint64_t> existing_amount;
};

// The patch: any missing parent object, the request (added, raised, or left as the
// user set it), then the annotations. One line, ending in a newline.
std::string PodPatchJson(const MemoryRequest& request, const PodFigures& figures,
                         const PodShape& shape);

}  // namespace gpuest::kubernetes
