// File: kube_nodes.h
//
// A Kubernetes node's GPUs as the extender reads them from the Node object's labels
// and annotations (never from the API server: kube-scheduler sends the Node, or the
// node cache file below holds it). Keys, in the order they are tried:
//
//   annotation gpuest.io/gpus   JSON array, one object per GPU, written by a node agent:
//                               {"model": "a100-80gb", "totalMiB": 81920,
//                                "freeMiB": 40000, "utilPercent": 35}
//                               model: catalog id, alias or nvidia-smi name (optional:
//                               else the model label below); utilPercent: nvidia-smi's
//                               utilization.gpu of what runs on it now (optional).
//   label gpuest.io/gpu-model   catalog id, alias or nvidia-smi name;
//   label nvidia.com/gpu.product  NVIDIA GPU feature discovery's name
//                               ("NVIDIA-A100-SXM4-80GB", "-SHARED" suffix dropped);
//   label nvidia.com/gpu.memory   GFD's MiB per GPU;  nvidia.com/gpu.count  GFD's count.
//
// Without the annotation nothing says what is free: each GPU is taken as empty and
// the reasons say so. A node with none of these keys has no GPU gpuest can judge.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {

inline constexpr char kNodeGpusAnnotation[] = "gpuest.io/gpus";
inline constexpr char kGpuModelLabel[] = "gpuest.io/gpu-model";
inline constexpr char kGfdProductLabel[] = "nvidia.com/gpu.product";
inline constexpr char kGfdMemoryLabel[] = "nvidia.com/gpu.memory";
inline constexpr char kGfdCountLabel[] = "nvidia.com/gpu.count";

// The bounds of what a node says of its GPUs, one set for every key above. A node
// holds at most kMaxNodeGpus GPUs (the label path's cap); the annotation is at most
// Kubernetes' limit on all of an object's annotations together (256 KiB:
// apimachinery's TotalAnnotationSizeLimitB), nests no deeper than kMaxJsonDepth and
// names a model in at most kMaxGpuModelBytes.
inline constexpr int kMaxNodeGpus = 1024;
inline constexpr size_t kMaxGpusAnnotationBytes = size_t{256} << 10;
inline constexpr size_t kMaxGpuModelBytes = 256;

// What the extender reads of a Node object: its name and the keys above, when they
// are strings (extender_args.h reads them from kube-scheduler's body, NodeKeysOf from
// a parsed object).
struct NodeKeys {
  std::string name;
  std::optional<std::string> gpus_annotation;  // kNodeGpusAnnotation
  std::optional<std::string> model_label;      // kGpuModelLabel
  std::optional<std::string> gfd_product, gfd_memory, gfd_count;
};

NodeKeys NodeKeysOf(const nlohmann::json& node);

struct NodeGpu {
  int index = 0;
  std::string model;         // As the node names it; empty: unknown.
  uint64_t total_bytes = 0;  // 0: the catalog's figure for model.
  uint64_t free_bytes = 0;
  bool free_reported = false;          // false: free is not known and taken as total.
  std::optional<double> util_percent;  // Of what runs on it now.
};

// The node's GPUs; empty when the node carries none of the keys. InvalidArgument names
// the node, the key and the field for a malformed value.
absl::StatusOr<std::vector<NodeGpu>> NodeGpus(const NodeKeys& node);
inline absl::StatusOr<std::vector<NodeGpu>> NodeGpus(const nlohmann::json& node) {
  return NodeGpus(NodeKeysOf(node));
}

// The name in metadata.name, or "" when there is none.
std::string NodeName(const nlohmann::json& node);

// For kube-scheduler's nodeCacheCapable mode, where it sends node names only: the
// Node objects of a v1.NodeList JSON file (what `kubectl get nodes -o json` prints,
// refreshed by a sidecar), read again when its modification time changes.
class NodeCache {
 public:
  explicit NodeCache(std::string path) : path_(std::move(path)) {}

  // A node of the file, with its GPUs read once when the file is (re)loaded.
  struct Node {
    NodeKeys keys;
    absl::StatusOr<std::vector<NodeGpu>> gpus;
  };
  using Nodes = std::map<std::string, std::shared_ptr<const Node>, std::less<>>;

  // The file's nodes by name, read again when its modification time has changed (a
  // sidecar replaces it whole: deploy/kubernetes/EXTENDER.md). One call per request:
  // its nodes are then looked up without a lock or a stat each. NotFound without a
  // file; InvalidArgument when the file is not a NodeList or is over
  // kMaxNodeCacheBytes. It stays valid after a reload.
  absl::StatusOr<std::shared_ptr<const Nodes>> Current();

  // The node named name among nodes (Current()'s), or NotFound naming the file.
  absl::StatusOr<std::shared_ptr<const Node>> Find(const Nodes& nodes,
                                                   const std::string& name) const;
  // The same in the file as it is now: Current()'s errors, or the node.
  absl::StatusOr<std::shared_ptr<const Node>> Find(const std::string& name);

 private:
  absl::Status RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  int64_t loaded_mtime_ ABSL_GUARDED_BY(mu_) = -1;
  std::shared_ptr<const Nodes> nodes_ ABSL_GUARDED_BY(mu_) = std::make_shared<Nodes>();
};

// The largest node cache file read: a NodeList of 20,000 real-sized nodes (about 10 KB
// each, deploy/kubernetes/EXTENDER.md).
inline constexpr size_t kMaxNodeCacheBytes = 256u << 20;

}  // namespace gpuest::kubernetes
