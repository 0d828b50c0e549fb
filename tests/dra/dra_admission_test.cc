// DRA claims sized by the admission webhook of the real gpuest-server, over HTTPS on
// loopback, sent AdmissionReviews of ResourceClaims and ResourceClaimTemplates as
// kube-apiserver sends them. The patch is applied (RFC 6902, nlohmann's json::patch)
// and compared, byte for byte, with what `gpuest claim` prints; each figure with
// `gpuest estimate --gpu MODEL`. Every patched object is written to
// GPUEST_DRA_OBJECTS_DIR, where dra.SchemaAndSelectors (validate_claims.mjs) judges it
// against the resource.k8s.io/v1 schema and evaluates its CEL selectors.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/pki.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using Json = nlohmann::ordered_json;
using testing::ServerProcess;

constexpr char kUid[] = "b1c2d3e4-0000-4000-8000-00000000dra0";
const std::string kMlp = std::string(GPUEST_EXAMPLES_DIR) + "/mlp.json";

// Classes beside the built-in ones: a shared class whose devices publish a
// requestPolicy (validRange: 1Gi, then steps of 512Mi, up to 40Gi), and one with none
// and no cap mechanism.
const Json kExtraClasses = Json::parse(R"([
  {"device_class": "gpu-policy.example.com", "driver": "gpu.nvidia.com",
   "devices": "whole_gpus", "product_attribute": "productName", "shared": true,
   "memory_capacity": "memory",
   "request_policy": {"validRange": {"min": "1Gi", "step": "512Mi", "max": "40Gi"}}},
  {"device_class": "gpu-nocap.example.com", "driver": "gpu.nvidia.com",
   "devices": "whole_gpus", "product_attribute": "productName", "shared": true,
   "memory_capacity": "memory"},
  {"device_class": "gpu-cluster.example.com", "driver": "gpu.nvidia.com",
   "devices": "whole_gpus", "product_attribute": "productName", "shared": false,
   "gpus": ["h100-80gb", "NVIDIA A100-SXM4-80GB"]}
])");

Json Review(const Json& object, const std::string& operation = "CREATE") {
  const std::string kind = object.value("kind", "");
  const std::string resource = kind == "ResourceClaim" ? "resourceclaims"
                               : kind == "Pod"         ? "pods"
                                                       : "resourceclaimtemplates";
  const std::string group = kind == "Pod" ? "" : "resource.k8s.io";
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", kUid},
            {"kind", {{"group", group}, {"version", "v1"}, {"kind", kind}}},
            {"resource", {{"group", group}, {"version", "v1"}, {"resource", resource}}},
            {"namespace", "ml"},
            {"operation", operation},
            {"userInfo", {{"username", "alice"}}},
            {"object", operation == "DELETE" ? Json(nullptr) : object},
            {"oldObject", operation == "CREATE" ? Json(nullptr) : object},
            {"dryRun", false}}}};
}

class DraAdmissionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A connection the server closes must fail a write, not kill the test.
    std::signal(SIGPIPE, SIG_IGN);
    pki_ = new testing::Pki();
    pki_->MakeCa("ca");
    pki_->MakeLeaf("webhook", "ca", "IP:127.0.0.1");
    Json table = Json::parse(
        testing::ReadFileOrDie(std::string(GPUEST_SOURCE_DIR) +
                               "/integrations/kubernetes/dra_device_classes.json"));
    for (const Json& c : kExtraClasses) table["device_classes"].push_back(c);
    std::filesystem::create_directories(ObjectsDir());
    classes_path_ = new std::string(ObjectsDir() + "/../dra_device_classes.test.json");
    std::ofstream(*classes_path_) << table.dump(2);
    // The DeviceClasses of the extra entries, as an operator would create them, for
    // the selectors' judge.
    for (const Json& c : kExtraClasses) {
      const Json device_class = {
          {"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", c["device_class"]}}},
          {"spec",
           {{"selectors",
             Json::array(
                 {{{"cel",
                    {{"expression",
                      "device.driver == \"gpu.nvidia.com\" && "
                      "device.attributes[\"gpu.nvidia.com\"].type == \"gpu\""}}}}})}}}};
      std::ofstream(ObjectsDir() + "/deviceclass-" +
                    c["device_class"].get<std::string>() + ".json")
          << device_class.dump(2);
    }
    auto server =
        ServerProcess::Start({"--admission-listen=127.0.0.1:0",
                              "--admission-tls-cert=" + pki_->Path("webhook.pem"),
                              "--admission-tls-key=" + pki_->Path("webhook.key"),
                              "--admission-dra-classes=" + *classes_path_});
    if (!server.ok()) {
      ADD_FAILURE() << server.status();
      std::abort();
    }
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    delete pki_;
    delete classes_path_;
  }

  static std::string ObjectsDir() { return GPUEST_DRA_OBJECTS_DIR; }

  // The response of a review, over HTTPS verified as kube-apiserver verifies it.
  static Json Mutate(const Json& review) {
    httplib::SSLClient https("127.0.0.1", server_->admission_port());
    https.set_ca_cert_path(pki_->Path("ca.pem").c_str());
    https.enable_server_certificate_verification(true);
    https.set_read_timeout(30, 0);
    auto r = https.Post("/mutate", review.dump(), "application/json");
    EXPECT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    const Json answer = Json::parse(r->body);
    EXPECT_EQ(answer["response"]["uid"], kUid);
    return answer["response"];
  }

  static Json PatchOf(const Json& response) {
    std::string text;
    EXPECT_EQ(response.value("patchType", ""), "JSONPatch") << response;
    EXPECT_TRUE(absl::Base64Unescape(response.value("patch", ""), &text));
    return Json::parse(text);
  }

  // The object sized by the webhook (it must be), and written for the schema's judge.
  static Json Sized(const Json& object, const std::string& file) {
    const Json response = Mutate(Review(object));
    EXPECT_EQ(response["allowed"], true) << response;
    const Json sized = object.patch(PatchOf(response));
    std::ofstream(ObjectsDir() + "/" + file + ".json") << sized.dump(2);
    return sized;
  }

  static testing::CommandResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {GPUEST_CLI_PATH, "--target", server_->target(),
                                     "--dra-classes", *classes_path_};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv);
  }

  static testing::Pki* pki_;
  static ServerProcess* server_;
  static std::string* classes_path_;
};

testing::Pki* DraAdmissionTest::pki_ = nullptr;
ServerProcess* DraAdmissionTest::server_ = nullptr;
std::string* DraAdmissionTest::classes_path_ = nullptr;

// Deliverable 2, "one writer": for every class of the table, the template `gpuest
// claim --unsized` prints, created through the webhook, is what `gpuest claim` prints,
// byte for byte.
TEST_F(DraAdmissionTest, TheWebhooksSizingOfATemplateIsGpuestClaimsByteForByte) {
  for (const std::string cls :
       {"gpu.nvidia.com", "gpu-shared.gpuest.io", "mig.nvidia.com",
        "gpu-policy.example.com", "gpu-nocap.example.com", "gpu-cluster.example.com"}) {
    SCOPED_TRACE(cls);
    const testing::CommandResult unsized =
        Cli({"claim", "--unsized", "--device-class", cls, "--name", "mlp", kMlp});
    ASSERT_EQ(unsized.exit_code, 0) << unsized.err;
    const testing::CommandResult sized =
        Cli({"claim", "--device-class", cls, "--name", "mlp", kMlp});
    ASSERT_EQ(sized.exit_code, 0) << sized.err;
    const Json response = Mutate(Review(Json::parse(unsized.out)));
    EXPECT_EQ(response["allowed"], true) << response;
    const Json patched = Json::parse(unsized.out).patch(PatchOf(response));
    EXPECT_EQ(patched.dump(2) + "\n", sized.out);
    std::ofstream(ObjectsDir() + "/cli-" + cls + ".json") << sized.out;
    const Json& alternatives =
        patched["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"];
    ASSERT_FALSE(alternatives.empty());
    EXPECT_LE(alternatives.size(), 8u);
    for (const Json& a : alternatives) EXPECT_EQ(a["deviceClassName"], cls);
    // A class listing the cluster's models asks for those alone, in RankGpus's order
    // (the tighter fit first); one listing none keeps the 8 tightest and says so.
    if (cls == "gpu-cluster.example.com") {
      ASSERT_EQ(alternatives.size(), 2u);
      EXPECT_EQ(alternatives[0]["name"], "h100-80gb");
      EXPECT_EQ(alternatives[1]["name"], "a100-80gb");
    }
    if (cls == "gpu.nvidia.com") {
      EXPECT_EQ(alternatives.size(), 8u);
      EXPECT_TRUE(absl::StrContains(response["warnings"].dump(), "gpus")) << response;
    }
    // A shared class without a cap mechanism says how the job caps itself, on both.
    if (cls == "gpu-nocap.example.com") {
      ASSERT_TRUE(response.contains("warnings"));
      EXPECT_TRUE(absl::StrContains(response["warnings"].dump(),
                                    "set_per_process_memory_fraction"));
      EXPECT_TRUE(absl::StrContains(sized.err, "set_per_process_memory_fraction"));
    }
  }
}

// The goal: each alternative asks the figure `gpuest estimate --gpu MODEL` gives, as
// capacity.requests.memory rounded as the class's policy rounds (unknown policy: up to
// a whole MiB); the cap is the driver's opaque config for that subrequest.
TEST_F(DraAdmissionTest, EachModelAsksItsOwnEstimateRoundedAsThePolicyRounds) {
  for (const std::string cls : {"gpu-shared.gpuest.io", "gpu-policy.example.com"}) {
    SCOPED_TRACE(cls);
    const Json unsized = Json::parse(
        Cli({"claim", "--unsized", "--device-class", cls, "--name", "mlp", kMlp}).out);
    const Json sized = Sized(unsized, "goal-" + cls);
    const Json& devices = sized["spec"]["spec"]["devices"];
    const Json requirements = Json::parse(
        sized["spec"]["metadata"]["annotations"]["gpuest.io/requirement-bytes"]
            .get<std::string>());
    size_t checked = 0;
    for (const Json& a : devices["requests"][0]["firstAvailable"]) {
      const std::string model = a["name"];
      const testing::CommandResult estimate =
          Cli({"estimate", "--json", "--gpu", model, kMlp});
      ASSERT_EQ(estimate.exit_code, 0) << estimate.err;
      const uint64_t figure = std::stoull(
          Json::parse(estimate.out)["recommendation"]["memoryBytes"].get<std::string>());
      EXPECT_EQ(requirements["gpu/" + model], std::to_string(figure)) << model;
      const uint64_t mib = uint64_t{1} << 20;
      uint64_t want = (figure + mib - 1) / mib * mib;
      if (cls == "gpu-policy.example.com") {
        const uint64_t min = uint64_t{1} << 30, step = 512 * mib;
        want = figure <= min ? min : min + (figure - min + step - 1) / step * step;
      }
      const std::string asked = a["capacity"]["requests"]["memory"];
      const uint64_t asked_bytes = absl::EndsWith(asked, "Gi") ? std::stoull(asked) << 30
                                   : absl::EndsWith(asked, "Mi")
                                       ? std::stoull(asked) << 20
                                       : std::stoull(asked);
      EXPECT_EQ(asked_bytes, want) << model << " asks " << asked;
      if (++checked == 3) break;  // Three models: each estimate is a process.
    }
    EXPECT_EQ(checked, 3u);
    if (cls == "gpu-shared.gpuest.io") {
      // The MPS pinned-memory limit of the NVIDIA driver, per subrequest, at its share.
      const Json& config = devices["config"];
      ASSERT_EQ(config.size(), devices["requests"][0]["firstAvailable"].size());
      const Json& first = devices["requests"][0]["firstAvailable"][0];
      EXPECT_EQ(config[0]["requests"][0], "gpu/" + first["name"].get<std::string>());
      EXPECT_EQ(config[0]["opaque"]["driver"], "gpu.nvidia.com");
      EXPECT_EQ(config[0]["opaque"]["parameters"]["sharing"]["mpsConfig"]
                      ["defaultPinnedDeviceMemoryLimit"],
                first["capacity"]["requests"]["memory"]);
    } else {
      EXPECT_FALSE(devices.contains("config"));
    }
  }
}

// deploy/kubernetes/dra-example.yaml as kubectl would create it: the template and the
// claim are sized, the pod that uses the template is not the webhook's to touch.
TEST_F(DraAdmissionTest, TheDeployExamplesTemplateAndClaimAreSized) {
  const testing::CommandResult json = testing::RunCommand(
      {GPUEST_PYTHON, "-c",
       "import json, sys, yaml; print(json.dumps([d for d in "
       "yaml.safe_load_all(open(sys.argv[1])) if d]))",
       std::string(GPUEST_SOURCE_DIR) + "/deploy/kubernetes/dra-example.yaml"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  int sized = 0;
  for (const Json& object : Json::parse(json.out)) {
    const std::string kind = object["kind"];
    if (kind == "Pod") {
      EXPECT_FALSE(Mutate(Review(object)).contains("patch"));
      continue;
    }
    const Json after =
        Sized(object, "deploy-" + object["metadata"]["name"].get<std::string>());
    const Json& spec =
        kind == "ResourceClaimTemplate" ? after["spec"]["spec"] : after["spec"];
    EXPECT_FALSE(spec["devices"]["requests"][0]["firstAvailable"].empty()) << after;
    ++sized;
  }
  EXPECT_EQ(sized, 2);
}

// Untouched: a claim without the description, an UPDATE or DELETE, a request of a class
// gpuest does not size, and a claim a sized template made (a list already). What gpuest
// does not own in a claim it sizes is kept: the other request, the user's selector and
// count, the config already there.
TEST_F(DraAdmissionTest, OnlyConfiguredRequestsOnCreateAreSizedAndTheRestIsKept) {
  const Json description = Json::parse(testing::ReadFileOrDie(kMlp));
  Json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "pair"}, {"namespace", "ml"}}},
      {"spec",
       {{"devices",
         {{"requests",
           Json::array(
               {{{"name", "nic"}, {"exactly", {{"deviceClassName", "nic.example.com"}}}},
                {{"name", "gpu"},
                 {"exactly",
                  {{"deviceClassName", "gpu.nvidia.com"},
                   {"count", 2},
                   {"selectors",
                    Json::array({{{"cel",
                                   {{"expression",
                                     "device.attributes[\"gpu.nvidia.com\"]."
                                     "architecture != \"kepler\""}}}}})}}}}})},
          {"constraints",
           Json::array({{{"requests", Json::array({"nic", "gpu"})},
                         {"matchAttribute", "resource.kubernetes.io/pcieRoot"}}})},
          {"config", Json::array({{{"requests", Json::array({"nic"})},
                                   {"opaque",
                                    {{"driver", "nic.example.com"},
                                     {"parameters", {{"mtu", 9000}}}}}}})}}}}}};
  EXPECT_FALSE(Mutate(Review(claim)).contains("patch"));  // No description.
  claim["metadata"]["annotations"] = {{"gpuest.io/description", description.dump()}};
  for (const std::string op : {"UPDATE", "DELETE"}) {
    EXPECT_FALSE(Mutate(Review(claim, op)).contains("patch")) << op;
  }
  const Json sized = Sized(claim, "kept-pair");
  const Json& requests = sized["spec"]["devices"]["requests"];
  EXPECT_EQ(requests[0], claim["spec"]["devices"]["requests"][0]);
  for (const Json& a : requests[1]["firstAvailable"]) {
    EXPECT_EQ(a["count"], 2);
    ASSERT_EQ(a["selectors"].size(), 2u);
    EXPECT_EQ(a["selectors"][0],
              claim["spec"]["devices"]["requests"][1]["exactly"]["selectors"][0]);
  }
  EXPECT_EQ(sized["spec"]["devices"]["config"], claim["spec"]["devices"]["config"]);
  EXPECT_EQ(sized["spec"]["devices"]["constraints"],
            claim["spec"]["devices"]["constraints"]);

  // Only another class's request: admitted as it is, and the warning says why.
  Json other = claim;
  other["spec"]["devices"]["requests"].erase(1);
  const Json untouched = Mutate(Review(other));
  EXPECT_FALSE(untouched.contains("patch"));
  ASSERT_TRUE(untouched.contains("warnings"));
  EXPECT_TRUE(absl::StrContains(untouched["warnings"][0].get<std::string>(),
                                "no request gpuest sizes"));

  // A claim made from a sized template carries the description and a list: untouched.
  const Json made_from = {{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceClaim"},
                          {"metadata", sized["metadata"]},
                          {"spec", sized["spec"]}};
  EXPECT_FALSE(Mutate(Review(made_from)).contains("patch"));

  // Fields of the wrong type are the API server's to refuse, not the webhook's to
  // trip on: answered, the server still up.
  Json odd = claim;
  odd["spec"]["devices"]["requests"][1]["exactly"]["adminAccess"] = "yes";
  odd["spec"]["devices"]["requests"][1]["exactly"]["allocationMode"] = 5;
  odd["spec"]["devices"]["requests"][1]["exactly"]["selectors"] = "all";
  EXPECT_EQ(Mutate(Review(odd))["allowed"], true);

  // adminAccess and allocationMode All cannot become a list: kept, with a warning.
  Json admin = claim;
  admin["spec"]["devices"]["requests"][1]["exactly"]["adminAccess"] = true;
  const Json kept = Mutate(Review(admin));
  EXPECT_FALSE(kept.contains("patch"));
  EXPECT_TRUE(absl::StrContains(kept["warnings"][0].get<std::string>(), "adminAccess"));
}

// A bad description is refused naming the claim and the field; with
// gpuest.io/on-error: allow the template is admitted unsized, its claims carrying
// gpuest.io/not-sized. Malformed claims are refused naming the field.
TEST_F(DraAdmissionTest, ABadDescriptionFollowsTheOnErrorPolicy) {
  Json description = Json::parse(testing::ReadFileOrDie(kMlp));
  description["batchSize"] = -4;
  Json unsized = Json::parse(Cli({"claim", "--unsized", "--name", "bad", kMlp}).out);
  unsized["metadata"]["namespace"] = "ml";
  unsized["spec"]["metadata"]["annotations"]["gpuest.io/description"] =
      description.dump();
  const Json refused = Mutate(Review(unsized));
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["code"], 400);
  const std::string message = refused["status"]["message"];
  EXPECT_TRUE(absl::StrContains(message, "ResourceClaimTemplate ml/bad")) << message;
  EXPECT_TRUE(absl::StrContains(message, "batch_size")) << message;

  unsized["spec"]["metadata"]["annotations"]["gpuest.io/on-error"] = "allow";
  const Json admitted = Mutate(Review(unsized));
  EXPECT_EQ(admitted["allowed"], true);
  const Json patched = unsized.patch(PatchOf(admitted));
  EXPECT_TRUE(
      absl::StrContains(patched["spec"]["metadata"]["annotations"]["gpuest.io/not-sized"]
                            .get<std::string>(),
                        "batch_size"));
  EXPECT_EQ(patched["spec"]["spec"], unsized["spec"]["spec"]);  // Nothing else lost.

  // A GPU no model of the class is: refused naming the field.
  description = Json::parse(testing::ReadFileOrDie(kMlp));
  Json named = Json::parse(Cli({"claim", "--unsized", "--name", "named", kMlp}).out);
  named["spec"]["metadata"]["annotations"]["gpuest.io/description"] =
      Json({{"gpu", "a100-40gb-mig-1g.5gb"}, {"model", description}}).dump();
  const Json wrong = Mutate(Review(named));
  EXPECT_EQ(wrong["allowed"], false);
  EXPECT_TRUE(absl::StrContains(wrong["status"]["message"].get<std::string>(), ".gpu"))
      << wrong;
  // The same naming a whole GPU: that model alone.
  named["spec"]["metadata"]["annotations"]["gpuest.io/description"] =
      Json({{"gpu", "h100-80gb"}, {"model", description}}).dump();
  const Json one = Sized(named, "named-h100");
  ASSERT_EQ(one["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"].size(), 1u);
  EXPECT_EQ(one["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]["name"],
            "h100-80gb");

  // More requests than the API allows, and a request that is not an object.
  Json wide = unsized;
  for (int i = 0; i < 40; ++i) {
    wide["spec"]["spec"]["devices"]["requests"].push_back(
        wide["spec"]["spec"]["devices"]["requests"][0]);
  }
  httplib::SSLClient https("127.0.0.1", server_->admission_port());
  https.set_ca_cert_path(pki_->Path("ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  auto r = https.Post("/mutate", Review(wide).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(absl::StrContains(r->body, "spec.spec.devices.requests")) << r->body;
  Json odd = unsized;
  odd["spec"]["spec"]["devices"]["requests"][0] = "gpu";
  r = https.Post("/mutate", Review(odd).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(absl::StrContains(r->body, "requests[0]")) << r->body;
}

// When the server cannot size a claim in time, the answer is an HTTP error for the
// configuration's failurePolicy, never a refusal of the claim.
TEST(DraAdmissionDeadline, AClaimPastItsTimeIsAnHttpErrorForTheFailurePolicy) {
  testing::Pki pki;
  pki.MakeCa("ca");
  pki.MakeLeaf("webhook", "ca", "IP:127.0.0.1");
  auto server = ServerProcess::Start({"--admission-listen=127.0.0.1:0",
                                      "--admission-tls-cert=" + pki.Path("webhook.pem"),
                                      "--admission-tls-key=" + pki.Path("webhook.key"),
                                      "--admission-timeout=1us"});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::SSLClient https("127.0.0.1", (*server)->admission_port());
  https.set_ca_cert_path(pki.Path("ca.pem").c_str());
  https.enable_server_certificate_verification(true);
  Json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata",
       {{"name", "late"},
        {"namespace", "ml"},
        {"annotations", {{"gpuest.io/description", testing::ReadFileOrDie(kMlp)}}}}},
      {"spec",
       {{"devices",
         {{"requests",
           Json::array({{{"name", "gpu"},
                         {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}})}}}}}};
  auto r = https.Post("/mutate", Review(claim).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "deadline")) << r->body;
  // As for a pod: a call shed before its work starts is 503 whatever the claim says
  // (its body is not read); gpuest.io/on-error: allow covers an estimate that ran out
  // of time, which a 1 us deadline never reaches.
  claim["metadata"]["annotations"]["gpuest.io/on-error"] = "allow";
  r = https.Post("/mutate", Review(claim).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
}

}  // namespace
}  // namespace gpuest
