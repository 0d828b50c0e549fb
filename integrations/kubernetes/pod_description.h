// File: pod_description.h
//
// A pod's job, as its annotation gpuest.io/description gives it: inline JSON of a
// ModelDescription or EstimateRequest (first character '{'), or a ConfigMap reference
// NAME or NAME/KEY read from the file <descriptions_dir>/NAME/KEY (KEY defaults to
// description.json): the layout of ConfigMaps mounted as volumes under one directory.
// The extender and the admission webhook read it with PodJob, the one way from the
// annotation to the EstimateRequest; nothing here calls the API server.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::kubernetes {

// The device plugin's resource a pod asks GPUs with.
inline constexpr char kGpuResource[] = "nvidia.com/gpu";

// The pod annotation that holds the job's description (inline JSON or a ConfigMap).
inline constexpr char kDescriptionAnnotation[] = "gpuest.io/description";

// A ConfigMap holds at most 1 MiB of data (Kubernetes refuses a larger one), so a
// mounted file over it is not a ConfigMap's.
inline constexpr uint64_t kMaxConfigMapBytes = uint64_t{1} << 20;

// The annotation's text: value itself when it is inline JSON, else the mounted
// ConfigMap file it names. InvalidArgument naming where (the pod and annotation) for a
// value that is neither, a ConfigMap not mounted, or no descriptions_dir to read it
// from.
absl::StatusOr<std::string> DescriptionText(const std::string& value,
                                            const std::string& descriptions_dir,
                                            const std::string& where);

// How errors name the annotation on object ("pod ml/train", "ResourceClaim ml/gpu"):
// "<object>: annotation gpuest.io/description".
std::string DescriptionWhere(const std::string& object);

// The job an annotation's value describes, and the text it was read from (the value,
// or the ConfigMap's file).
struct PodJob {
  v1::EstimateRequest request;
  std::string text;
};

// value read as DescriptionText reads it, then parsed as a ModelDescription or an
// EstimateRequest (requests/request_files.h); errors name where (DescriptionWhere).
absl::StatusOr<PodJob> ReadPodJob(const std::string& value,
                                  const std::string& descriptions_dir,
                                  const std::string& where);

}  // namespace gpuest::kubernetes
