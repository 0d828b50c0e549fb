// integrations/kubernetes/kube_extender: KubeExtender called directly with the shipped
// models loaded as the server loads them (tests/support/shipped_models.h), fed
// ExtenderArgs bodies of kube-scheduler's shape. Where a node passes is derived from
// the engine's own requirement for the pod's job on that GPU (a GPU one MiB short of it
// fails, one that holds it passes) and checked against what the PlacementEngine's
// CheckPlacement answers for the same GPU; the errors name what is wrong. Over HTTP, with
// the real server: tests/integration/extender_test.cc.
#include "integrations/kubernetes/kube_extender.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/units.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"
#include "tests/support/shipped_models.h"

namespace gpuest::kubernetes {
namespace {

using nlohmann::json;

constexpr char kGpu[] = "a100-40gb";
constexpr uint64_t kTotalMiB = 40960;

std::string CnnText() {
  return testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json");
}

// A v1.Pod as kube-scheduler sends it, asking for gpus GPUs.
json Pod(const std::string& name, const json& annotations,
         const std::string& gpus = "1") {
  json metadata = {{"name", name}, {"namespace", "ml"}, {"uid", "0e3c"}};
  if (!annotations.is_null()) metadata["annotations"] = annotations;
  return {{"metadata", metadata},
          {"spec",
           {{"containers",
             {{{"name", "train"},
               {"image", "train:1"},
               {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

json Described(const std::string& name = "train") {
  return Pod(name, {{"gpuest.io/description", CnnText()}});
}

// A node whose agent reports its GPUs: {model, totalMiB, freeMiB[, utilPercent]} each;
// none: a node without GPU data.
json Node(const std::string& name, const std::vector<json>& gpus) {
  json annotations = json::object();
  if (!gpus.empty()) annotations["gpuest.io/gpus"] = json(gpus).dump();
  return {{"metadata", {{"name", name}, {"annotations", annotations}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}
json Gpu(const std::string& model, uint64_t total_mib, uint64_t free_mib,
         double util_percent = -1) {
  json gpu = {{"model", model}, {"totalMiB", total_mib}, {"freeMiB", free_mib}};
  if (util_percent >= 0) gpu["utilPercent"] = util_percent;
  return gpu;
}

std::string Args(const json& pod, const json& nodes) {
  return json{{"Pod", pod},
              {"Nodes", {{"kind", "NodeList"}, {"apiVersion", "v1"}, {"items", nodes}}},
              {"NodeNames", nullptr}}
      .dump();
}

json Parsed(const common::HttpReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  EXPECT_FALSE(body.is_discarded()) << reply.body;
  return body;
}

std::vector<std::string> NamesOf(const json& result) {
  std::vector<std::string> names;
  if (result["Nodes"].is_null()) return names;
  for (const json& node : result["Nodes"]["items"])
    names.push_back(node["metadata"]["name"]);
  return names;
}

class KubeExtenderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new testing::FixedModels(testing::ShippedModelSet());
    v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
    request.set_gpu(kGpu);
    auto estimate =
        models_->Current()->engine().Estimate(request, common::WorkDeadline::Never());
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    need_bytes_ = estimate->recommendation().memory_bytes();
    need_mib_ = (need_bytes_ + common::kMiB - 1) / common::kMiB;  // Rounded up.
    // The boundary below is one MiB wide: a requirement of whole MiB would put it
    // nowhere.
    ASSERT_NE(need_bytes_ % common::kMiB, 0u);
    ASSERT_LT(need_mib_ + 1024, kTotalMiB);
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
    std::error_code ignored;
    std::filesystem::remove_all(ScratchDir(), ignored);
  }

  // This process's own directory for mounted ConfigMaps and node cache files.
  static std::string ScratchDir() {
    const std::string dir =
        absl::StrCat(::testing::TempDir(), "/kube_extender_test-", getpid());
    std::filesystem::create_directories(dir);
    return dir;
  }

  static KubeExtender Extender(const ExtenderOptions& options = {}) {
    return KubeExtender(*models_, options);
  }

  // What CheckPlacement answers for the candidate on a GPU a node reports.
  static v1::CheckPlacementResponse Checked(uint64_t total_mib, uint64_t free_mib) {
    v1::CheckPlacementRequest request;
    v1::NodeReportedGpu* gpu = request.mutable_gpu()->mutable_node_reported();
    gpu->set_model(kGpu);
    gpu->set_total_bytes(total_mib * common::kMiB);
    gpu->set_free_bytes(free_mib * common::kMiB);
    *request.mutable_candidate()->mutable_description() =
        testing::ExampleRequest("cnn.json");
    auto response = models_->Current()->placement().CheckPlacement(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::CheckPlacementResponse();
  }

  static testing::FixedModels* models_;
  static uint64_t need_bytes_, need_mib_;
};
testing::FixedModels* KubeExtenderTest::models_ = nullptr;
uint64_t KubeExtenderTest::need_bytes_ = 0;
uint64_t KubeExtenderTest::need_mib_ = 0;

TEST_F(KubeExtenderTest, ANodePassesExactlyWhenAGpuHoldsTheEnginesRequirement) {
  const json nodes = json::array({
      Node("holds-it", {Gpu(kGpu, kTotalMiB, need_mib_)}),
      Node("one-mib-short", {Gpu(kGpu, kTotalMiB, need_mib_ - 1)}),
      Node("small-but-empty", {Gpu(kGpu, need_mib_, need_mib_)}),
      Node("too-small-when-empty", {Gpu(kGpu, need_mib_ - 1, need_mib_ - 1)}),
      Node("no-gpu-data", {}),
      Node("unreadable", {json{{"totalMiB", 1}}}),
  });
  KubeExtender extender = Extender();
  const common::HttpReply reply =
      extender.Filter(Args(Described(), nodes), common::WorkDeadline::Never());
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.code, absl::StatusCode::kOk);
  const json result = Parsed(reply);
  EXPECT_EQ(result["Error"], "");
  EXPECT_TRUE(result["NodeNames"].is_null());
  EXPECT_EQ(NamesOf(result),
            (std::vector<std::string>{"holds-it", "small-but-empty", "no-gpu-data"}));
  // Each passing Node object comes back as it was sent.
  EXPECT_EQ(result["Nodes"]["items"][0], nodes[0]);
  EXPECT_EQ(result["Nodes"]["kind"], "NodeList");
  // Short now, but it would fit empty: preemption could help.
  ASSERT_EQ(result["FailedNodes"].size(), 1u) << result.dump(2);
  EXPECT_TRUE(absl::StartsWith(result["FailedNodes"].value("one-mib-short", ""),
                               "gpuest: no GPU of the node takes the pod"))
      << result.dump(2);
  // Too small even when empty, or unreadable: nothing preemption can fix.
  const json& unresolvable = result["FailedAndUnresolvableNodes"];
  ASSERT_EQ(unresolvable.size(), 2u) << result.dump(2);
  EXPECT_TRUE(unresolvable.contains("too-small-when-empty"));
  EXPECT_TRUE(
      absl::StrContains(unresolvable.value("unreadable", ""), "gpuest.io/gpus[0]"))
      << unresolvable;

  // The same GPUs as the PlacementEngine judges them.
  EXPECT_TRUE(Checked(kTotalMiB, need_mib_).fits());
  EXPECT_FALSE(Checked(kTotalMiB, need_mib_ - 1).fits());
  EXPECT_TRUE(Checked(need_mib_, need_mib_).fits());
  EXPECT_FALSE(Checked(need_mib_ - 1, need_mib_ - 1).fits());
}

TEST_F(KubeExtenderTest, PrioritizePacksTheFullerGpuHigherAndScoresNoFitZero) {
  // Idle neighbours (utilization 0), so that contention leaves the packing order.
  const json nodes = json::array({
      Node("empty", {Gpu(kGpu, kTotalMiB, kTotalMiB, 0)}),
      Node("half", {Gpu(kGpu, kTotalMiB, kTotalMiB / 2, 0)}),
      Node("tight", {Gpu(kGpu, kTotalMiB, need_mib_, 0)}),
      Node("short", {Gpu(kGpu, kTotalMiB, need_mib_ - 1, 0)}),
      Node("no-gpu-data", {}),
  });
  KubeExtender extender = Extender();
  const common::HttpReply reply =
      extender.Prioritize(Args(Described(), nodes), common::WorkDeadline::Never());
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json list = Parsed(reply);
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), nodes.size());
  std::map<std::string, int> score;
  for (size_t i = 0; i < list.size(); ++i) {
    ASSERT_EQ(list[i].size(), 2u) << list[i];  // Exactly {Host, Score}, in node order.
    EXPECT_EQ(list[i]["Host"], nodes[i]["metadata"]["name"]);
    score[list[i]["Host"]] = list[i]["Score"];
  }
  for (const std::string fits : {"empty", "half", "tight"}) {
    // A fit with acceptable contention is 5..10 (1..4 is a BAD verdict).
    const v1::CheckPlacementResponse checked =
        Checked(kTotalMiB, fits == "empty"  ? kTotalMiB
                           : fits == "half" ? kTotalMiB / 2
                                            : need_mib_);
    ASSERT_TRUE(checked.fits()) << fits;
    ASSERT_NE(checked.verdict(), v1::CONTENTION_VERDICT_BAD) << fits;
    EXPECT_GE(score[fits], 5) << fits;
    EXPECT_LE(score[fits], kMaxExtenderPriority) << fits;
  }
  EXPECT_LT(score["empty"], score["half"]);
  EXPECT_LT(score["half"], score["tight"]);
  EXPECT_EQ(score["tight"], kMaxExtenderPriority);  // Full after placing.
  EXPECT_EQ(score["short"], 0);
  EXPECT_EQ(score["no-gpu-data"], 0);
}

TEST_F(KubeExtenderTest, APodAskingForTwoGpusNeedsTwoThatHoldItsRequirement) {
  const json nodes = json::array({
      Node("two-fit", {Gpu(kGpu, kTotalMiB, need_mib_), Gpu(kGpu, kTotalMiB, need_mib_)}),
      Node("one-fits", {Gpu(kGpu, kTotalMiB, need_mib_), Gpu(kGpu, kTotalMiB, 1)}),
      Node("one-gpu", {Gpu(kGpu, kTotalMiB, kTotalMiB)}),
  });
  const json pod = Pod("ddp", {{"gpuest.io/description", CnnText()}}, "2");
  const json result =
      Parsed(Extender().Filter(Args(pod, nodes), common::WorkDeadline::Never()));
  EXPECT_EQ(NamesOf(result), (std::vector<std::string>{"two-fit"}));
  EXPECT_TRUE(absl::StrContains(result["FailedNodes"].value("one-fits", ""),
                                "the pod asks for 2 GPUs (nvidia.com/gpu), each to take "
                                "one rank; 1 of the node's 2 do"))
      << result.dump(2);
  // One GPU can never hold two ranks.
  EXPECT_TRUE(result["FailedAndUnresolvableNodes"].contains("one-gpu")) << result.dump(2);
}

TEST_F(KubeExtenderTest, ADescriptionNamingAnotherGpuIsUnresolvableOnThisOne) {
  json job = {{"model", json::parse(CnnText())}, {"gpu", "h100-80gb"}};
  const json pod = Pod("pinned", {{"gpuest.io/description", job.dump()}});
  const json nodes = json::array({Node("a100", {Gpu(kGpu, kTotalMiB, kTotalMiB)}),
                                  Node("h100", {Gpu("h100-80gb", 81920, 81920)})});
  const json result =
      Parsed(Extender().Filter(Args(pod, nodes), common::WorkDeadline::Never()));
  EXPECT_EQ(result["Error"], "") << result.dump(2);
  EXPECT_EQ(NamesOf(result), (std::vector<std::string>{"h100"}));
  const std::string why = result["FailedAndUnresolvableNodes"].value("a100", "");
  EXPECT_TRUE(absl::StrContains(why, "h100-80gb")) << result.dump(2);
  EXPECT_TRUE(absl::StrContains(why, "annotation gpuest.io/description")) << why;
}

TEST_F(KubeExtenderTest, APodWithoutTheAnnotationPassesEveryNodeWithEqualScores) {
  const json nodes = json::array({Node("short", {Gpu(kGpu, kTotalMiB, 1)}),
                                  Node("unreadable", {json{{"totalMiB", 1}}})});
  KubeExtender extender = Extender();
  const json filtered = Parsed(
      extender.Filter(Args(Pod("web", nullptr), nodes), common::WorkDeadline::Never()));
  EXPECT_EQ(NamesOf(filtered), (std::vector<std::string>{"short", "unreadable"}));
  EXPECT_TRUE(filtered["FailedNodes"].empty());
  EXPECT_TRUE(filtered["FailedAndUnresolvableNodes"].empty());
  const json list = Parsed(extender.Prioritize(Args(Pod("web", nullptr), nodes),
                                               common::WorkDeadline::Never()));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["Score"], list[1]["Score"]);
}

TEST_F(KubeExtenderTest, WhatIsNotExtenderArgsIs400AndABadDescriptionAnErrorNamingIt) {
  KubeExtender extender = Extender();
  for (const std::string body : {"not json", "[1, 2]", R"({"Pod": 5})"}) {
    SCOPED_TRACE(body);
    const common::HttpReply filtered =
        extender.Filter(body, common::WorkDeadline::Never());
    EXPECT_EQ(filtered.status, 400);
    EXPECT_EQ(filtered.code, absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Parsed(filtered).value("Error", ""), "");
    const common::HttpReply prioritized =
        extender.Prioritize(body, common::WorkDeadline::Never());
    EXPECT_EQ(prioritized.status, 400);
    EXPECT_NE(Parsed(prioritized).value("Error", ""), "");
  }

  // The pod's description refused: the filter answers 200 with the Error (ignorable
  // for kube-scheduler), the prioritize a 400 (HostPriorityList has no error field).
  const json pod = Pod("bad", {{"gpuest.io/description", R"({"batchSize": "many"})"}});
  const json nodes = json::array({Node("n", {Gpu(kGpu, kTotalMiB, kTotalMiB)})});
  const common::HttpReply filtered = extender.Filter(Args(pod, nodes), {});
  EXPECT_EQ(filtered.status, 200);
  EXPECT_EQ(filtered.code, absl::StatusCode::kInvalidArgument);
  const json result = Parsed(filtered);
  EXPECT_TRUE(absl::StartsWith(result.value("Error", ""),
                               "pod ml/bad: annotation gpuest.io/description"))
      << result.dump(2);
  EXPECT_TRUE(NamesOf(result).empty());
  const common::HttpReply prioritized = extender.Prioritize(Args(pod, nodes), {});
  EXPECT_EQ(prioritized.status, 400);
  EXPECT_EQ(Parsed(prioritized).value("Error", ""), result.value("Error", ""));
}

TEST_F(KubeExtenderTest, AConfigMapReferenceReadsTheMountedDescription) {
  const std::string dir = ScratchDir() + "/configmaps";
  std::filesystem::create_directories(dir + "/cnn-job");
  std::ofstream(dir + "/cnn-job/description.json") << CnnText();
  ExtenderOptions options;
  options.descriptions_dir = dir;
  KubeExtender extender = Extender(options);
  const json nodes = json::array({Node("holds-it", {Gpu(kGpu, kTotalMiB, need_mib_)}),
                                  Node("short", {Gpu(kGpu, kTotalMiB, need_mib_ - 1)})});
  const json inline_result = Parsed(extender.Filter(Args(Described(), nodes), {}));
  const json by_reference = Parsed(extender.Filter(
      Args(Pod("train", {{"gpuest.io/description", "cnn-job"}}), nodes), {}));
  EXPECT_EQ(by_reference, inline_result);
  EXPECT_EQ(NamesOf(by_reference), (std::vector<std::string>{"holds-it"}));

  const json missing = Parsed(extender.Filter(
      Args(Pod("train", {{"gpuest.io/description", "no-such-job"}}), nodes), {}));
  EXPECT_TRUE(absl::StrContains(missing.value("Error", ""), "no-such-job"))
      << missing.dump(2);
}

TEST_F(KubeExtenderTest, NodeNamesAloneAreJudgedFromTheNodeCacheFile) {
  const std::string file = ScratchDir() + "/nodes.json";
  std::ofstream(file) << json{{"kind", "NodeList"},
                              {"apiVersion", "v1"},
                              {"items",
                               {Node("holds-it", {Gpu(kGpu, kTotalMiB, need_mib_)}),
                                Node("short", {Gpu(kGpu, kTotalMiB, need_mib_ - 1)})}}}
                             .dump();
  ExtenderOptions options;
  options.nodes_file = file;
  KubeExtender extender = Extender(options);
  const std::string body = json{{"Pod", Described()},
                                {"Nodes", nullptr},
                                {"NodeNames", {"short", "not-in-the-file", "holds-it"}}}
                               .dump();
  const json result = Parsed(extender.Filter(body, {}));
  EXPECT_EQ(result["Error"], "");
  EXPECT_TRUE(result["Nodes"].is_null());
  // A node the file does not have passes unjudged (fail open), in request order.
  EXPECT_EQ(result["NodeNames"], json({"not-in-the-file", "holds-it"}));
  EXPECT_TRUE(result["FailedNodes"].contains("short")) << result.dump(2);
  const json list = Parsed(extender.Prioritize(body, {}));
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["Host"], "short");
  EXPECT_EQ(list[0]["Score"], 0);
  EXPECT_EQ(list[1]["Score"], 0);
  EXPECT_GE(list[2]["Score"].get<int>(), 1);
}

TEST_F(KubeExtenderTest, APassedDeadlineStopsTheJudgingWithAnErrorSayingSo) {
  const json nodes = json::array({Node("n", {Gpu(kGpu, kTotalMiB, kTotalMiB)})});
  const common::WorkDeadline passed(absl::Now() - absl::Milliseconds(1));
  KubeExtender extender = Extender();
  const common::HttpReply filtered = extender.Filter(Args(Described(), nodes), passed);
  EXPECT_EQ(filtered.status, 200);
  EXPECT_EQ(filtered.code, absl::StatusCode::kDeadlineExceeded);
  const std::string error = Parsed(filtered).value("Error", "");
  EXPECT_TRUE(absl::StrContains(error, "stopped at the extender's deadline")) << error;
  EXPECT_TRUE(absl::StrContains(error, "after judging 0 of 1 nodes")) << error;
  const common::HttpReply prioritized =
      extender.Prioritize(Args(Described(), nodes), passed);
  EXPECT_EQ(prioritized.status, 400);
  EXPECT_EQ(prioritized.code, absl::StatusCode::kDeadlineExceeded);
}

TEST(FilterReplyText, TheNodesGoBackInTheRequestsNodeListAroundTheirText) {
  const json result = {{"Nodes", "ignored"},
                       {"NodeNames", nullptr},
                       {"FailedNodes", {{"b", "why"}}},
                       {"FailedAndUnresolvableNodes", json::object()},
                       {"Error", ""}};
  const std::string node_list =
      R"({"kind":"NodeList","metadata":{"resourceVersion":"7"},"items":[{"n":1},{"n":2}]})";
  const size_t open = node_list.find('[');
  const std::string_view items =
      std::string_view(node_list).substr(open, node_list.rfind(']') - open + 1);
  const std::string text =
      FilterReplyText(result, node_list, items, {std::string_view(R"({"n":2})")});
  const json reply = json::parse(text);
  json expected_nodes = json::parse(node_list);
  expected_nodes["items"] = json::array({{{"n", 2}}});
  EXPECT_EQ(reply["Nodes"], expected_nodes);
  EXPECT_EQ(reply["FailedNodes"], result["FailedNodes"]);
  EXPECT_EQ(reply["Error"], "");
  // Without the request's list: a bare NodeList.
  const json bare = json::parse(FilterReplyText(result, "", "", {}));
  EXPECT_EQ(bare["Nodes"],
            json({{"apiVersion", "v1"}, {"kind", "NodeList"}, {"items", json::array()}}));
}

TEST(ReplyText, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  const std::string text = ReplyText(json{{"Error", std::string("bad \xff byte")}});
  EXPECT_EQ(json::parse(text)["Error"], "bad \xEF\xBF\xBD byte");
}

}  // namespace
}  // namespace gpuest::kubernetes
