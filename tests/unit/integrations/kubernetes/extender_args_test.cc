// ExtenderArgs as kube-scheduler sends them (k8s.io/kube-scheduler/extender/v1), read
// by the on-demand parser (integrations/kubernetes/extender_args.h): the keys the
// extender needs, each Node's text as it arrived, and a refusal that names the field.
#include "integrations/kubernetes/extender_args.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::kubernetes {
namespace {

constexpr char kNode[] =
    R"({"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},)"
    R"( "annotations": {"gpuest.io/gpus": "[]"}}, "status": {"images": [{"names": ["a"]}]}})";

std::string Pod(const std::string& limits_json) {
  return R"({"metadata": {"name": "train", "namespace": "ml", "annotations": {"gpuest.io/description": "{\"batchSize\": 8}"}},)"
         R"( "spec": {"initContainers": [{"resources": {"limits": {"nvidia.com/gpu": 4}}}],)"
         R"( "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": )" +
         limits_json + "}]}}";
}

absl::StatusOr<ExtenderArgs> Parse(const std::string& text, std::string& body) {
  body = PaddedCopy(text);
  return ParseExtenderArgs(body);
}

TEST(ExtenderArgs, ReadsThePodAndEachNodeKeepingItsText) {
  const std::string text = R"({"Pod": )" + Pod(R"({"limits": {"nvidia.com/gpu": 1}})") +
                           R"(, "Nodes": {"kind": "NodeList", "items": [)" + kNode +
                           "]}}";
  std::string body;
  auto args = Parse(text, body);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->pod, "ml/train");
  ASSERT_TRUE(args->description.has_value());
  EXPECT_EQ(*args->description, R"({"batchSize": 8})");
  // The containers' limits summed (a string quantity too); init containers left out.
  EXPECT_EQ(args->gpus_requested, 3u);
  EXPECT_FALSE(args->names_only);
  ASSERT_EQ(args->nodes.size(), 1u);
  EXPECT_EQ(args->nodes[0].keys.name, "gpu-1");
  EXPECT_EQ(args->nodes[0].keys.gfd_product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(args->nodes[0].keys.gfd_count, "8");
  EXPECT_EQ(args->nodes[0].keys.gpus_annotation, "[]");
  // The Node's text exactly as it arrived, for the filter's reply to echo.
  EXPECT_EQ(std::string(args->nodes[0].json), kNode);
}

TEST(ExtenderArgs, NodeNamesAloneAreTheNodeCacheForm) {
  const std::string text =
      R"({"Pod": )" + Pod("{}") + R"(, "Nodes": null, "NodeNames": ["a", "b"]})";
  std::string body;
  auto args = Parse(text, body);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->names_only);
  EXPECT_EQ(args->names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(args->nodes.empty());
  EXPECT_EQ(args->gpus_requested, 2u);
}

// Each refusal is InvalidArgument naming what is wrong, never a crash or a guess.
TEST(ExtenderArgs, RefusesWhatIsNotExtenderArgsNamingTheField) {
  const std::string nodes = R"(, "Nodes": {"items": []}})";
  const struct {
    std::string text;
    const char* says;
  } cases[] = {
      {"[1, 2]", "not an ExtenderArgs JSON object"},
      {R"({"Nodes": {"items": []}})", "ExtenderArgs.Pod"},
      {R"({"Pod": )" + Pod("{}") + "}", "neither Nodes nor NodeNames"},
      {R"({"Pod": )" + Pod("{}") + R"(, "NodeNames": [1]})", "ExtenderArgs.NodeNames"},
      {R"({"Pod": )" + Pod("{}") + R"(, "Nodes": {"kind": "NodeList"}})",
       "ExtenderArgs.Nodes"},
      {R"({"Pod": )" + Pod(R"({"limits": {"nvidia.com/gpu": "lots"}})") + nodes,
       "not a whole number"},
      {R"({"Pod": )" + Pod(R"({"limits": {"nvidia.com/gpu": 5000}})") + nodes,
       "at most 1024"},
      {R"({"Pod": )" + Pod("{}") + R"(, "Nodes": {"items": [)" + std::string(200, '[') +
           std::string(200, ']') + "]}}",
       "nested"},
      // kube-scheduler's Go encoder writes each key once; simdjson's reader would see
      // both copies, so a duplicate is refused whole.
      {R"({"Pod": )" +
           Pod(R"({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpu": "8"}})") + nodes,
       "key \"nvidia.com/gpu\" appears twice in one object, at "
       "Pod.spec.containers[1].resources.limits"},
      {R"({"Pod": )" + Pod("{}") + R"(, "NodeNames": ["a"], "NodeNames": ["b"]})",
       "key \"NodeNames\" appears twice"},
  };
  for (const auto& c : cases) {
    std::string body;
    auto args = Parse(c.text, body);
    ASSERT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument) << c.text << "\n"
                                                                        << args.status();
    EXPECT_TRUE(absl::StrContains(args.status().message(), c.says)) << c.says << "\n"
                                                                    << args.status();
  }
}

}  // namespace
}  // namespace gpuest::kubernetes
