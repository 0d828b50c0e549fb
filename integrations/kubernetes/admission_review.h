// File: admission_review.h
//
// The admission.k8s.io/v1 AdmissionReview that kube-apiserver POSTs to a mutating
// webhook, read for a Pod: the request's uid, operation and dryRun, and of the pod
// (request.object) what sizing it needs: its name, its annotations gpuest reads, and
// each container's name and resources.limits; or for a resource.k8s.io/v1
// ResourceClaim or ResourceClaimTemplate: its annotations (a template's spec.metadata)
// and each device request's name and `exactly`. Read with simdjson's DOM parser, nesting
// bounded by kMaxJsonDepth (common/json_guard.h); everything else is skipped. And the
// AdmissionReview that answers it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuest::kubernetes {

// More containers than any pod has; a pod with more is refused.
inline constexpr size_t kMaxPodContainers = 256;

// The annotation a pod opts into being admitted unsized with, when its description is
// refused or cannot be sized: gpuest.io/on-error: allow ("refuse", the default).
inline constexpr char kOnErrorAnnotation[] = "gpuest.io/on-error";

struct AdmissionContainer {
  std::string name;
  bool has_resources = false;
  bool has_limits = false;
  // resources.limits whose values are strings (quantities) or whole numbers, as text.
  std::map<std::string, std::string> limits;
};

// More requests than a claim may hold (resource/v1 DeviceRequestsMax is 32).
inline constexpr size_t kMaxClaimRequests = 32;

// A request of a ResourceClaim (or of a ResourceClaimTemplate's spec.spec):
// spec.devices.requests[index].
struct AdmissionClaimRequest {
  size_t index = 0;
  std::string name;
  bool exactly = false;      // Else firstAvailable: a list already, gpuest's to leave.
  std::string device_class;  // exactly.deviceClassName
  std::string exactly_json;  // exactly, as minified JSON text.
};

// The object of the review: a Pod, or a resource.k8s.io ResourceClaim or
// ResourceClaimTemplate (kind), read for what sizing it needs.
struct AdmissionPod {
  std::string uid;        // request.uid: echoed in the response.
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT.
  std::string kind;       // request.kind.kind: "Pod" for what gpuest sizes.
  bool dry_run = false;
  std::string pod;  // namespace/name (or namespace/generateName*), for messages.
  bool has_annotations = false;
  // The pod's annotations whose values are strings (metadata.annotations).
  std::map<std::string, std::string> annotations;
  std::vector<AdmissionContainer> containers;
  // A claim's or template's. annotations are then those the claims carry (a template's
  // spec.metadata.annotations, over its own metadata.annotations), has_annotations
  // whether that object has them, has_spec_metadata whether a template has
  // spec.metadata, has_config whether its spec has devices.config.
  bool has_metadata = false;
  bool has_spec_metadata = false;
  bool has_config = false;
  std::vector<AdmissionClaimRequest> claim_requests;
};

// InvalidArgument naming the field for a body that is not an AdmissionReview v1 with a
// request and its uid, or whose pod's fields have the wrong types; JSON nested deeper
// than kMaxJsonDepth is refused. body must have simdjson's padding room past its end
// (kAdmissionBodyPadding bytes of capacity), or it is copied.
absl::StatusOr<AdmissionPod> ParseAdmissionReview(const std::string& body);

inline constexpr size_t kAdmissionBodyPadding = 64;

// The response AdmissionReview. A patch (the JSON Patch text) is sent base64-encoded
// with patchType JSONPatch; a refusal (allowed false) carries status code and message.
struct AdmissionVerdict {
  bool allowed = true;
  std::optional<std::string> patch;
  std::vector<std::string> warnings;
  int code = 0;  // For a refusal: the HTTP-like code kubectl shows (400).
  std::string message;
};
std::string AdmissionResponseText(const std::string& uid,
                                  const AdmissionVerdict& verdict);

// The body of an HTTP error (the API server logs it and applies the failurePolicy):
// {"error": "gpuest admission webhook: <why>"}.
std::string AdmissionErrorText(const std::string& why);

}  // namespace gpuest::kubernetes
