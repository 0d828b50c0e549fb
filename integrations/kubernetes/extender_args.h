// File: extender_args.h
//
// kube-scheduler's ExtenderArgs (k8s.io/kube-scheduler/extender/v1: Pod, and Nodes or
// NodeNames), read with simdjson's on-demand parser. A real Node object is 5-10 KB
// (its status lists conditions, capacity and every image on the node), a filter of a
// 5,000-node cluster some 40 MB, and the extender needs a few keys of each: the node's
// name, the gpuest.io/gpus annotation and the GPU labels (kube_nodes.h). The parser
// reads those and skips the rest without building it; each Node's JSON text is kept as
// a view into the body, to be echoed unchanged in the filter's result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "integrations/kubernetes/kube_nodes.h"
#include "integrations/kubernetes/pod_description.h"

namespace gpuest::kubernetes {

// More GPUs than any node holds: a pod asking for more is refused.
inline constexpr uint32_t kMaxPodGpus = 1024;

// One Node of ExtenderArgs.Nodes.items.
struct ExtenderNode {
  NodeKeys keys;
  std::string_view json;  // The Node object's text, inside the body.
};

struct ExtenderArgs {
  std::string pod;  // namespace/name, for reasons and logs.
  // Pod annotation kDescriptionAnnotation when it is a string; nullopt: none.
  std::optional<std::string> description;
  // The GPUs the pod asks for: its containers' nvidia.com/gpu limits, summed; 0 when
  // none says (judged as one). Each must take one rank of the job.
  uint32_t gpus_requested = 0;
  bool names_only = false;          // NodeNames given (nodeCacheCapable), not Nodes.
  std::vector<ExtenderNode> nodes;  // Nodes.items, in order.
  // Nodes (the v1.NodeList) and its items array, as their text inside the body.
  std::string_view node_list_json, items_json;
  std::vector<std::string> names;  // NodeNames, in order (names_only).
};

// The body as it arrived; parsing may add simdjson's padding to its end (it reads up to
// 64 bytes past the text), so body must outlive the result, whose node views point into
// it. InvalidArgument names what is wrong: not JSON, a field of the wrong type, nesting
// deeper than kMaxJsonDepth (common/json_guard.h).
absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string& body);

// The room past a body's end that the parser reads: a body read into a string with
// this much more capacity is not copied again.
inline constexpr size_t kExtenderBodyPadding = 64;

// A copy of text with that room.
std::string PaddedCopy(std::string_view text);

}  // namespace gpuest::kubernetes
