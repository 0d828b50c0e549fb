// File: dra_claim.h
//
// GPU memory as Kubernetes' Dynamic Resource Allocation asks for it (resource.k8s.io/v1):
// a ResourceClaim's (or a ResourceClaimTemplate's) request for a configured device class
// becomes a prioritized list (firstAvailable), one subrequest per GPU model the job
// fits, in RankGpus's order (tightest fit first), each with a CEL selector for that
// model and, for a shared device (KEP-5075 consumable capacity), capacity.requests of
// that model's own requirement, rounded up as the device's requestPolicy rounds. The
// driver's names (attributes, capacity, the opaque config that caps a share) are the
// table of dra_device_classes.json, not code.
//
// One writer: ClaimPatchJson is the JSON Patch the admission webhook answers and the
// patch `gpuest claim` applies to its template (ClaimTemplateJson), so both write the
// same bytes. Needs no estimator: the figures come in as a RankGpusResponse.
//
// Sources: the API's types (DeviceRequest.firstAvailable, DeviceSubRequest.selectors
// and .capacity.requests, DeviceClaimConfiguration.requests "<request>/<subrequest>")
// and CapacityRequestPolicyRange's rounding are k8s.io/api resource/v1 (k8s-openapi's
// v1_36 resource/v1 docs quote them); the driver's names are in the JSON file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuest/v1/placement.pb.h"

namespace gpuest::kubernetes {

// A capacity's requestPolicy (resource/v1 CapacityRequestPolicy) for the memory share.
struct DraRequestPolicy {
  // validRange: below min rounds up to min; with step, up to min + n * step; above max
  // the device cannot be allocated.
  uint64_t min_bytes = 0;
  std::optional<uint64_t> step_bytes;
  std::optional<uint64_t> max_bytes;
  // validValues (ascending): the smallest not below the request; above all of them the
  // device cannot be allocated. Empty: validRange.
  std::vector<uint64_t> valid_values;
};

struct DraDeviceClass {
  std::string device_class;       // A request's deviceClassName.
  std::string driver;             // The attributes' and capacities' domain.
  bool mig = false;               // Catalog MIG profiles, else whole GPUs.
  std::string product_attribute;  // "productName"
  std::string profile_attribute;  // "profile" (MIG)
  // Consumable capacity: the devices allow multiple allocations and a claim asks for a
  // share of memory_capacity; else the selector alone picks a whole device.
  bool shared = false;
  std::string memory_capacity;  // "memory"
  std::optional<DraRequestPolicy> policy;
  // The opaque parameters that hold the job to its share, as JSON text in which the
  // string "$LIMIT" stands for the share; empty: no mechanism (the answer warns).
  std::string cap_parameters;
  // The catalog GPUs the cluster has of this class (ids, aliases or names): the only
  // alternatives, and the only models estimated. Empty: every model of the catalog of
  // the class's kind (at most kMaxAlternatives of them make the list).
  std::vector<std::string> gpus;
};

struct DraClasses {
  std::vector<DraDeviceClass> classes;
  // nullptr for a class gpuest does not size.
  const DraDeviceClass* Find(std::string_view device_class) const;
};

// The table's text; InvalidArgument naming what and the field.
absl::StatusOr<DraClasses> ParseDraClasses(std::string_view text,
                                           const std::string& what);
// dra_device_classes.json as built in.
const DraClasses& BuiltInDraClasses();
// path's table, or the built-in one for an empty path.
absl::StatusOr<DraClasses> LoadDraClasses(const std::string& path);

// A Kubernetes quantity of bytes ("10Gi", "512Mi", "1G", "1048576"); InvalidArgument
// naming field otherwise (fractions and milli-units are not bytes).
absl::StatusOr<uint64_t> ParseByteQuantity(std::string_view text,
                                           const std::string& field);
// The shortest exact binary form: "10Gi", "9638Mi", or plain bytes.
std::string ByteQuantityText(uint64_t bytes);
// What the scheduler consumes for a request of bytes under policy (resource/v1
// CapacityRequestPolicyRange / validValues); nullopt when no valid value holds it.
std::optional<uint64_t> RoundedByPolicy(uint64_t bytes, const DraRequestPolicy& policy);

// The most alternatives a request may list (resource/v1
// FirstAvailableDeviceRequestMaxSize); the job's ninth-best fitting model and beyond are
// left out.
inline constexpr size_t kMaxAlternatives = 8;

// One GPU model the job may land on.
struct ClaimAlternative {
  std::string gpu;                 // Catalog id.
  std::string subrequest;          // Its DNS-label form, the subrequest's name.
  std::string selector;            // The CEL expression that picks this model's devices.
  uint64_t requirement_bytes = 0;  // gpuest's requirement on this model.
  uint64_t request_bytes = 0;      // What the claim asks (shared: rounded), else 0.
  uint64_t capacity_bytes = 0;
  bool needs_cap = false;
};

struct ClaimSizing {
  std::vector<ClaimAlternative> alternatives;  // RankGpus's order.
  std::vector<std::string> left_out;           // "t4 (needs 20.1 GiB of 15.0)", ...
  std::vector<std::string> warnings;
  std::string models_version;
};

// The RankGpus request for job sized for classes: restricted to their gpus when each
// of them lists some.
v1::RankGpusRequest RankRequestFor(const v1::EstimateRequest& job,
                                   const std::vector<const DraDeviceClass*>& classes);

// The models of cls's kind that the job fits (ranking: RankGpus's answer for it), in
// the ranking's order; only_gpu (a catalog id or nvidia-smi name; empty: any) keeps one.
// FailedPrecondition naming where when none is left.
absl::StatusOr<ClaimSizing> SizeClaim(const v1::RankGpusResponse& ranking,
                                      const DraDeviceClass& cls,
                                      const std::string& only_gpu,
                                      const std::string& where);

// The claim where the patch writes, as it is now.
struct ClaimRequestShape {
  size_t index = 0;
  std::string name;
  std::string exactly_json;  // The request's `exactly` object, as JSON text.
};
struct ClaimShape {
  bool is_template = false;       // Writes under /spec/spec and /spec/metadata.
  bool has_metadata = true;       // A claim's metadata.
  bool has_spec_metadata = true;  // A template's spec.metadata.
  bool has_annotations = true;    // metadata (claim) or spec.metadata (template).
  bool has_config = false;        // spec.devices.config
};
struct SizedRequest {
  ClaimRequestShape shape;
  const DraDeviceClass* cls = nullptr;
  ClaimSizing sizing;
};

// The annotations the patch writes.
inline constexpr char kClaimSizedAnnotation[] = "gpuest.io/claim-sized";
inline constexpr char kClaimRequirementsAnnotation[] = "gpuest.io/requirement-bytes";

// The JSON Patch (RFC 6902): each request replaced by its firstAvailable list (the
// user's own fields of `exactly` kept on every subrequest, the user's selectors
// before gpuest's), the caps as devices.config entries, then the annotations. One line,
// ending in a newline. InvalidArgument naming the field for an `exactly` that is not a
// JSON object.
absl::StatusOr<std::string> ClaimPatchJson(const ClaimShape& shape,
                                           const std::vector<SizedRequest>& requests);

// What `gpuest claim` prints: a ResourceClaimTemplate named name whose spec.metadata
// carries the description (description_value) and whose one request "gpu" asks for
// cls, before sizing (the object the webhook would be sent) ...
std::string ClaimTemplateSkeleton(const std::string& name,
                                  const std::string& description_value,
                                  const DraDeviceClass& cls);
// ... and after: the skeleton with ClaimPatchJson applied, indented JSON.
absl::StatusOr<std::string> ClaimTemplateJson(const std::string& name,
                                              const std::string& description_value,
                                              const DraDeviceClass& cls,
                                              const ClaimSizing& sizing);

}  // namespace gpuest::kubernetes
