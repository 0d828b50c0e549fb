#include "integrations/kubernetes/kube_nodes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/units.h"
#include "gtest/gtest.h"

namespace gpuest::kubernetes {
namespace {

nlohmann::json Node(const std::string& name, nlohmann::json labels,
                    nlohmann::json annotations = nlohmann::json::object()) {
  return {
      {"metadata", {{"name", name}, {"labels", labels}, {"annotations", annotations}}}};
}

TEST(KubeNodes, TheAnnotationGivesEachGpuItsFreeMemoryAndUtilization) {
  const auto gpus =
      NodeGpus(Node("n1", {{"gpuest.io/gpu-model", "a100-80gb"}},
                    {{"gpuest.io/gpus",
                      R"([{"totalMiB": 81920, "freeMiB": 40000, "utilPercent": 35},
            {"freeMiB": 81920, "model": "a100-40gb"}])"}}));
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].model, "a100-80gb");  // From the label.
  EXPECT_EQ((*gpus)[0].total_bytes, 81920 * common::kMiB);
  EXPECT_EQ((*gpus)[0].free_bytes, 40000 * common::kMiB);
  EXPECT_TRUE((*gpus)[0].free_reported);
  EXPECT_DOUBLE_EQ((*gpus)[0].util_percent.value(), 35);
  EXPECT_EQ((*gpus)[1].model, "a100-40gb");  // Its own model wins over the label.
  EXPECT_EQ((*gpus)[1].total_bytes, 0u);     // The catalog's figure.
  EXPECT_FALSE((*gpus)[1].util_percent.has_value());
}

TEST(KubeNodes, GpuFeatureDiscoveryLabelsGiveWholeCardsWithFreeUnknown) {
  const auto gpus =
      NodeGpus(Node("n2", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-SHARED"},
                           {"nvidia.com/gpu.memory", "81920"},
                           {"nvidia.com/gpu.count", "4"}}));
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[3].index, 3);
  EXPECT_EQ((*gpus)[3].model, "NVIDIA A100-SXM4-80GB");  // nvidia-smi's spelling.
  EXPECT_EQ((*gpus)[3].total_bytes, 81920 * common::kMiB);
  EXPECT_FALSE((*gpus)[3].free_reported);
}

TEST(KubeNodes, ANodeWithoutGpuKeysHasNoGpus) {
  const auto gpus = NodeGpus(Node("cpu-node", {{"kubernetes.io/os", "linux"}}));
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE(gpus->empty());
}

TEST(KubeNodes, MalformedValuesNameTheNodeTheKeyAndTheField) {
  auto bad = NodeGpus(Node("n3", {}, {{"gpuest.io/gpus", R"([{"totalMiB": 100}])"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node n3: annotation gpuest.io/gpus[0].freeMiB"),
            absl::string_view::npos)
      << bad.status();
  bad = NodeGpus(Node("n3", {}, {{"gpuest.io/gpus", "not json"}}));
  EXPECT_FALSE(bad.ok());
  bad = NodeGpus(Node("n3", {{"gpuest.io/gpu-model", "a100-40gb"}},
                      {{"gpuest.io/gpus", R"([{"freeMiB": 10, "utilPercent": 140}])"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("utilPercent"), absl::string_view::npos);
  bad = NodeGpus(Node(
      "n3", {{"gpuest.io/gpu-model", "a100-40gb"}, {"nvidia.com/gpu.memory", "lots"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nvidia.com/gpu.memory"),
            absl::string_view::npos);
}

// The annotation is JSON inside a JSON string: the depth and size bounds the body gets
// must hold for it too (a 100,000-deep annotation crashed the server in nlohmann's
// recursive dump()).
TEST(KubeNodes, TheAnnotationIsBoundedInDepthSizeGpusAndNames) {
  const auto refused = [](const std::string& annotation, const std::string& words) {
    auto gpus = NodeGpus(Node("n4", {{"gpuest.io/gpu-model", "a100-40gb"}},
                              {{"gpuest.io/gpus", annotation}}));
    ASSERT_FALSE(gpus.ok());
    EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(gpus.status().message().find("node n4: annotation gpuest.io/gpus"),
              absl::string_view::npos)
        << gpus.status();
    EXPECT_NE(gpus.status().message().find(words), absl::string_view::npos)
        << gpus.status();
  };
  refused(std::string(100000, '[') + std::string(100000, ']'), "levels deep");
  refused(R"([{"freeMiB": 1000, "freeMiB": 80000}])",
          "key \"freeMiB\" appears twice in one object, at [0]");
  refused(R"([{"freeMiB": 1, "model": ")" + std::string(300, 'x') + R"("}])",
          "at most 256 bytes");
  std::string many = "[";
  for (int i = 0; i <= kMaxNodeGpus; ++i) many += R"({"freeMiB":1},)";
  many.back() = ']';
  refused(many, "GPUs, more than 1024");
  refused("[" + std::string(kMaxGpusAnnotationBytes, ' ') + "]", "over the limit");
  // A value that is itself a deep structure is echoed short.
  refused(R"([{"freeMiB": )" + std::string(60, '[') + std::string(60, ']') + "}]",
          "not a number of MiB");
  // At the bounds it is read.
  many = "[";
  for (int i = 0; i < kMaxNodeGpus; ++i) many += R"({"freeMiB":1},)";
  many.back() = ']';
  auto gpus = NodeGpus(
      Node("n4", {{"gpuest.io/gpu-model", "a100-40gb"}}, {{"gpuest.io/gpus", many}}));
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(gpus->size(), static_cast<size_t>(kMaxNodeGpus));
}

TEST(KubeNodes, ADeepNodeCacheFileIsRefusedNotParsed) {
  const std::string path = ::testing::TempDir() + "/deep_nodes.json";
  {
    std::ofstream out(path);
    out << R"({"items": )" << std::string(100000, '[') << std::string(100000, ']') << "}";
  }
  NodeCache cache(path);
  const auto found = cache.Find("a");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument) << found.status();
  EXPECT_NE(found.status().message().find("levels deep"), absl::string_view::npos);
  std::remove(path.c_str());
}

TEST(KubeNodes, TheNodeCacheReadsANodeListAndRereadsItWhenItChanges) {
  const std::string path = ::testing::TempDir() + "/nodes.json";
  {
    std::ofstream out(path);
    out << nlohmann::json{{"kind", "NodeList"}, {"items", {Node("a", {{"x", "1"}})}}};
  }
  NodeCache cache(path);
  ASSERT_TRUE(cache.Find("a").ok());
  EXPECT_EQ(cache.Find("b").status().code(), absl::StatusCode::kNotFound);
  {
    std::ofstream out(path);
    out << nlohmann::json{
        {"kind", "NodeList"},
        {"items", {Node("a", {}), Node("b", {{"gpuest.io/gpu-model", "a100-40gb"}})}}};
  }
  // A different modification time: touch it a second later than the first write.
  struct timespec times[2] = {{0, UTIME_OMIT}, {2000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  absl::StatusOr<std::shared_ptr<const NodeCache::Node>> b = cache.Find("b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->keys.model_label, "a100-40gb");
  ASSERT_TRUE((*b)->gpus.ok());  // Read with the file: one whole card of the model.
  ASSERT_EQ((*b)->gpus->size(), 1u);
  EXPECT_EQ((*b)->gpus->front().model, "a100-40gb");
  EXPECT_EQ(NodeCache("").Find("a").status().code(), absl::StatusCode::kNotFound);
  std::remove(path.c_str());
}

// A request takes the cache's nodes once: a node that joins, leaves or changes shows in
// the next request's, while one that took the old nodes keeps them whole.
TEST(KubeNodes, ARequestsNodesStayWholeWhileTheFileIsReplaced) {
  const std::string path = ::testing::TempDir() + "/nodes_snapshot.json";
  auto write = [&](const std::vector<std::string>& names, int64_t seconds) {
    nlohmann::json items = nlohmann::json::array();
    for (const std::string& n : names) items.push_back(Node(n, {{"x", "1"}}));
    std::ofstream(path) << nlohmann::json{{"kind", "NodeList"}, {"items", items}};
    struct timespec times[2] = {{0, UTIME_OMIT}, {seconds, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  };
  write({"a", "b"}, 1000000000);
  NodeCache cache(path);
  auto before = cache.Current();
  ASSERT_TRUE(before.ok()) << before.status();
  write({"b", "c"}, 1000000001);  // a left, c joined
  auto after = cache.Current();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(cache.Find(**before, "a").ok());
  EXPECT_FALSE(cache.Find(**before, "c").ok());
  EXPECT_EQ(cache.Find(**after, "a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache.Find(**after, "c").ok());
  std::remove(path.c_str());
}

TEST(KubeNodes, ANodeCacheFileOverItsLimitIsRefusedUnread) {
  const std::string path = ::testing::TempDir() + "/huge_nodes.json";
  {
    std::ofstream out(path);
    out << R"({"items": []})";
  }
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxNodeCacheBytes) + 1), 0);
  NodeCache cache(path);
  const auto nodes = cache.Current();
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kInvalidArgument) << nodes.status();
  EXPECT_NE(nodes.status().message().find("over the limit"), absl::string_view::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpuest::kubernetes
