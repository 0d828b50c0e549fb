#include "integrations/kubernetes/kube_nodes.h"

#include <sys/stat.h>

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_guard.h"
#include "common/text_file.h"
#include "common/units.h"

namespace gpuest::kubernetes {
namespace {

// metadata.<map>[key] when it is a string.
std::optional<std::string> MetadataString(const nlohmann::json& object, const char* map,
                                          const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return std::nullopt;
  auto entries = metadata->find(map);
  if (entries == metadata->end() || !entries->is_object()) return std::nullopt;
  auto value = entries->find(key);
  if (value == entries->end() || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

// GFD writes nvidia-smi's name with dashes for spaces ("NVIDIA-A100-SXM4-80GB") and
// "-SHARED" when time-slicing is on; the catalog knows "NVIDIA A100-SXM4-80GB".
std::string FromGfdProduct(std::string product) {
  if (absl::EndsWith(product, "-SHARED")) product.resize(product.size() - 7);
  if (absl::StartsWith(product, "NVIDIA-")) product[6] = ' ';
  return product;
}

absl::StatusOr<uint64_t> MiBField(const nlohmann::json& gpu, const char* key,
                                  const std::string& where, bool required,
                                  bool* present) {
  auto value = gpu.find(key);
  *present = value != gpu.end();
  if (!*present) {
    if (!required) return 0;
    return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": missing"));
  }
  if (!value->is_number() || value->get<double>() < 0 ||
      !std::isfinite(value->get<double>()) || value->get<double>() > 1e12) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", key,
                     ": not a number of MiB: ", common::Utf8Prefix(value->dump(), 64)));
  }
  return static_cast<uint64_t>(std::llround(value->get<double>() * common::kMiB));
}

absl::StatusOr<std::vector<NodeGpu>> FromAnnotation(const std::string& text,
                                                    const std::string& where,
                                                    const std::string& label_model) {
  // Bounded before it is parsed: nlohmann's parser and dump() recurse once per level,
  // so a deep annotation must never reach them.
  if (text.size() > kMaxGpusAnnotationBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", text.size(), " bytes, over the limit of ", kMaxGpusAnnotationBytes));
  }
  if (absl::Status shape = common::CheckJsonText(text, where); !shape.ok()) return shape;
  const nlohmann::json gpus = nlohmann::json::parse(text, nullptr, false);
  if (gpus.is_discarded() || !gpus.is_array() || gpus.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": not a non-empty JSON array of GPUs: ", common::Utf8Prefix(text, 200)));
  }
  if (gpus.size() > static_cast<size_t>(kMaxNodeGpus)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", gpus.size(), " GPUs, more than ", kMaxNodeGpus));
  }
  std::vector<NodeGpu> out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    const nlohmann::json& gpu = gpus[i];
    if (!gpu.is_object()) return absl::InvalidArgumentError(at + ": not an object");
    NodeGpu g;
    g.index = static_cast<int>(i);
    g.model = label_model;
    if (auto model = gpu.find("model"); model != gpu.end()) {
      if (!model->is_string() ||
          model->get_ref<const std::string&>().size() > kMaxGpuModelBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".model: not a string of at most ", kMaxGpuModelBytes, " bytes"));
      }
      g.model = model->get<std::string>();
    }
    bool present = false;
    auto total = MiBField(gpu, "totalMiB", at, /*required=*/g.model.empty(), &present);
    if (!total.ok()) return total.status();
    g.total_bytes = *total;
    auto free = MiBField(gpu, "freeMiB", at, /*required=*/true, &present);
    if (!free.ok()) return free.status();
    g.free_bytes = *free;
    g.free_reported = true;
    if (g.total_bytes > 0 && g.free_bytes > g.total_bytes) {
      return absl::InvalidArgumentError(at + ".freeMiB: more than totalMiB");
    }
    if (auto util = gpu.find("utilPercent"); util != gpu.end()) {
      if (!util->is_number() || util->get<double>() < 0 || util->get<double>() > 100) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".utilPercent: not a percentage 0..100: ",
                         common::Utf8Prefix(util->dump(), 64)));
      }
      g.util_percent = util->get<double>();
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::string NodeName(const nlohmann::json& node) {
  if (!node.is_object()) return "";
  auto metadata = node.find("metadata");
  if (metadata == node.end() || !metadata->is_object()) return "";
  auto name = metadata->find("name");
  return name != metadata->end() && name->is_string() ? name->get<std::string>() : "";
}

NodeKeys NodeKeysOf(const nlohmann::json& node) {
  NodeKeys keys;
  keys.name = NodeName(node);
  keys.gpus_annotation = MetadataString(node, "annotations", kNodeGpusAnnotation);
  keys.model_label = MetadataString(node, "labels", kGpuModelLabel);
  keys.gfd_product = MetadataString(node, "labels", kGfdProductLabel);
  keys.gfd_memory = MetadataString(node, "labels", kGfdMemoryLabel);
  keys.gfd_count = MetadataString(node, "labels", kGfdCountLabel);
  return keys;
}

absl::StatusOr<std::vector<NodeGpu>> NodeGpus(const NodeKeys& node) {
  const std::string& name = node.name;
  std::string model = node.model_label.value_or("");
  if (model.empty() && node.gfd_product) model = FromGfdProduct(*node.gfd_product);
  if (node.gpus_annotation) {
    return FromAnnotation(
        *node.gpus_annotation,
        absl::StrCat("node ", name, ": annotation ", kNodeGpusAnnotation), model);
  }
  if (model.empty()) return std::vector<NodeGpu>{};
  uint64_t total = 0;
  if (const auto& memory = node.gfd_memory) {
    uint64_t mib = 0;
    if (!absl::SimpleAtoi(*memory, &mib) || mib == 0) {
      return absl::InvalidArgumentError(absl::StrCat("node ", name, ": label ",
                                                     kGfdMemoryLabel,
                                                     ": not a number of MiB: ", *memory));
    }
    total = mib * common::kMiB;
  }
  int count = 1;
  if (const auto& text = node.gfd_count) {
    if (!absl::SimpleAtoi(*text, &count) || count < 1 || count > kMaxNodeGpus) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", name, ": label ", kGfdCountLabel, ": not a GPU count: ", *text));
    }
  }
  std::vector<NodeGpu> gpus;
  for (int i = 0; i < count; ++i) {
    NodeGpu g;
    g.index = i;
    g.model = model;
    g.total_bytes = total;
    g.free_bytes = total;
    gpus.push_back(g);
  }
  return gpus;
}

absl::StatusOr<std::shared_ptr<const NodeCache::Nodes>> NodeCache::Current() {
  absl::MutexLock lock(&mu_);
  if (path_.empty()) {
    return absl::NotFoundError(
        "kube-scheduler sent node names only (nodeCacheCapable) and no node cache file "
        "is given (--extender_nodes_file)");
  }
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  return nodes_;
}

absl::StatusOr<std::shared_ptr<const NodeCache::Node>> NodeCache::Find(
    const Nodes& nodes, const std::string& name) const {
  auto it = nodes.find(name);
  if (it == nodes.end()) {
    return absl::NotFoundError(absl::StrCat("node ", name, " is not in ", path_));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const NodeCache::Node>> NodeCache::Find(
    const std::string& name) {
  absl::StatusOr<std::shared_ptr<const Nodes>> nodes = Current();
  if (!nodes.ok()) return nodes.status();
  return Find(**nodes, name);
}

absl::Status NodeCache::RefreshLocked() {
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot read node cache file ", path_));
  }
  const int64_t mtime =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime == loaded_mtime_) return absl::OkStatus();
  absl::StatusOr<std::string> text = common::ReadTextFile(path_, kMaxNodeCacheBytes);
  if (!text.ok()) return text.status();
  if (absl::Status shape = common::CheckJsonText(*text, path_); !shape.ok()) return shape;
  const nlohmann::json list = nlohmann::json::parse(*text, nullptr, false);
  if (list.is_discarded() || !list.is_object() || !list.contains("items") ||
      !list["items"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a v1.NodeList in JSON (an object with \"items\")"));
  }
  auto nodes = std::make_shared<Nodes>();
  for (const nlohmann::json& node : list["items"]) {
    if (NodeKeys keys = NodeKeysOf(node); !keys.name.empty()) {
      absl::StatusOr<std::vector<NodeGpu>> gpus = NodeGpus(keys);
      const std::string name = keys.name;
      (*nodes)[name] =
          std::make_shared<const Node>(Node{std::move(keys), std::move(gpus)});
    }
  }
  // Requests that took the old map keep it; this one and later ones see the new.
  nodes_ = std::move(nodes);
  loaded_mtime_ = mtime;
  return absl::OkStatus();
}

}  // namespace gpuest::kubernetes
