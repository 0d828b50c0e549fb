// File: pod_patch.h
//
// The recommended memory figure as the GPU-sharing schedulers read it from a pod, and
// the JSON Patch (RFC 6902, what a mutating webhook returns and `kubectl patch --type
// json` takes) that sets it. Always rounded up: a request a byte short of the
// recommendation is how a job gets killed.
//
//   hami     resources.limits nvidia.com/gpumem   MiB (HAMi)
//   volcano  resources.limits volcano.sh/gpu-memory  MiB (Volcano GPU share)
//   kai      annotation gpu-memory                 MiB (NVIDIA KAI scheduler)
//   alibaba  resources.limits aliyun.com/gpu-mem   GiB (gpushare-scheduler-extender)
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

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

// InvalidArgument for 0 bytes (no figure to request).
absl::StatusOr<MemoryRequest> MemoryRequestFor(SharingScheduler scheduler,
                                               uint64_t bytes);

// The JSON Patch adding the request to container container_index (or the annotation).
// The container's resources.limits (or the pod's annotations) must exist: every pod
// asking for a shared GPU has them.
std::string PodPatchJson(const MemoryRequest& request, int container_index);

}  // namespace gpuest::kubernetes
