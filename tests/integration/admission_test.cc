// The mutating admission webhook of the real gpuest-server, over HTTPS on loopback,
// sent AdmissionReview bodies of the shape kube-apiserver sends (uid, kind, operation,
// dryRun, object, oldObject on UPDATE), its certificate verified as the API server
// verifies it (the CA bundle, the subjectAltName). The patch it answers is applied to
// the pod (RFC 6902, nlohmann's json::patch) and compared, byte for byte, with what
// `gpuest pod-patch` prints for the same pod and scheduler.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/pki.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using nlohmann::json;
using testing::ServerProcess;

constexpr char kGpu[] = "a100-80gb";
constexpr char kUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

std::string Example(const std::string& name) {
  return testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/" + name);
}

// A pod as kubectl creates it: a sidecar without a GPU, then the trainer asking for one.
json Pod(const json& annotations) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "sidecar"}, {"image", "busybox"}},
                      {{"name", "trainer"},
                       {"image", "pytorch"},
                       {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}};
  if (!annotations.is_null()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

json Described(const std::string& example = "cnn.json") {
  return Pod({{"gpuest.io/description", Example(example)}});
}

// The AdmissionReview kube-apiserver POSTs for a pod.
json Review(const json& pod, const std::string& operation = "CREATE",
            bool dry_run = false) {
  json request = {{"uid", kUid},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                  {"namespace", "ml"},
                  {"operation", operation},
                  {"userInfo", {{"username", "alice"}}},
                  {"object", pod},
                  {"oldObject", operation == "UPDATE" ? pod : json(nullptr)},
                  {"dryRun", dry_run}};
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", request}};
}

class AdmissionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new testing::Pki();
    pki_->MakeCa("ca");
    pki_->MakeLeaf("webhook", "ca", "IP:127.0.0.1,DNS:gpuest.gpuest.svc");
  }
  static void TearDownTestSuite() {
    servers_.clear();
    delete pki_;
  }

  // One server per scheduler, started on first use.
  static ServerProcess& ServerFor(const std::string& scheduler) {
    for (auto& [name, server] : servers_) {
      if (name == scheduler) return *server;
    }
    auto server = ServerProcess::Start(
        {"--admission-listen=127.0.0.1:0",
         "--admission-tls-cert=" + pki_->Path("webhook.pem"),
         "--admission-tls-key=" + pki_->Path("webhook.key"),
         "--admission-scheduler=" + scheduler, std::string("--admission-gpu=") + kGpu});
    if (!server.ok()) {
      ADD_FAILURE() << server.status();
      std::abort();
    }
    servers_.emplace_back(scheduler, *std::move(server));
    return *servers_.back().second;
  }

  // A client that verifies the server as kube-apiserver does: the caBundle's CA, and
  // the address in the certificate's subjectAltName.
  static std::unique_ptr<httplib::SSLClient> Https(
      const std::string& scheduler = "hami") {
    auto client = std::make_unique<httplib::SSLClient>(
        "127.0.0.1", ServerFor(scheduler).admission_port());
    client->set_ca_cert_path(pki_->Path("ca.pem").c_str());
    client->enable_server_certificate_verification(true);
    client->set_read_timeout(30, 0);
    return client;
  }

  // The response of a review; its uid is always the request's.
  static json Mutate(const json& review, const std::string& scheduler = "hami") {
    auto r = Https(scheduler)->Post("/mutate", review.dump(), "application/json");
    EXPECT_TRUE(r) << "no answer: " << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    const json answer = json::parse(r->body);
    EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
    EXPECT_EQ(answer["kind"], "AdmissionReview");
    EXPECT_EQ(answer["response"]["uid"], kUid);
    return answer["response"];
  }

  static std::string PatchText(const json& response) {
    std::string text;
    EXPECT_EQ(response.value("patchType", ""), "JSONPatch");
    EXPECT_TRUE(absl::Base64Unescape(response.value("patch", ""), &text));
    return text;
  }

  static testing::Pki* pki_;
  static std::vector<std::pair<std::string, std::unique_ptr<ServerProcess>>> servers_;
};

testing::Pki* AdmissionTest::pki_ = nullptr;
std::vector<std::pair<std::string, std::unique_ptr<ServerProcess>>>
    AdmissionTest::servers_;

// Deliverable 1 and the goal "one patch everywhere": for each scheduler the webhook's
// patch is `gpuest pod-patch`'s, byte for byte, and applied to the pod it sets the
// request where that scheduler reads it, on the container that asks for the GPU.
TEST_F(AdmissionTest, EachSchedulersPatchIsThePodPatchOfTheCliAndApplies) {
  struct Case {
    std::string scheduler;
    json::json_pointer where;
  };
  for (const Case& c : std::vector<Case>{
           {"hami",
            json::json_pointer("/spec/containers/1/resources/limits/nvidia.com~1gpumem")},
           {"volcano", json::json_pointer(
                           "/spec/containers/1/resources/limits/volcano.sh~1gpu-memory")},
           {"kai", json::json_pointer("/metadata/annotations/gpu-memory")},
           {"alibaba", json::json_pointer(
                           "/spec/containers/1/resources/limits/aliyun.com~1gpu-mem")}}) {
    SCOPED_TRACE(c.scheduler);
    ServerProcess& server = ServerFor(c.scheduler);
    const json response = Mutate(Review(Described()), c.scheduler);
    EXPECT_EQ(response["allowed"], true);
    const std::string patch = PatchText(response);
    const testing::CommandResult cli =
        testing::RunCommand({GPUEST_CLI_PATH, "--target", server.target(), "--gpu", kGpu,
                             "pod-patch", "--scheduler", c.scheduler, "--container", "1",
                             std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json"});
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    EXPECT_EQ(patch, cli.out);
    const json patched = Described().patch(json::parse(patch));
    const json cli_patched = Described().patch(json::parse(cli.out));
    EXPECT_EQ(patched, cli_patched);
    EXPECT_FALSE(patched.at(c.where).get<std::string>().empty());
    const json& annotations = patched["metadata"]["annotations"];
    EXPECT_GT(std::stoull(annotations["gpuest.io/requirement-bytes"].get<std::string>()),
              0u);
    EXPECT_TRUE(annotations.contains("gpuest.io/uncapped-peak-bytes"));
    EXPECT_FALSE(annotations["gpuest.io/models-version"].get<std::string>().empty());
    // The schedulers that only count the figure: the warning says how the job caps
    // itself.
    if (c.scheduler != "hami") {
      ASSERT_TRUE(response.contains("warnings"));
      EXPECT_TRUE(absl::StrContains(response["warnings"][0].get<std::string>(),
                                    "nothing enforces it"));
    }
  }
}

// A pod the webhook does not size passes untouched: no description, an UPDATE (with
// its oldObject), another kind. A dry run is answered as the real call.
TEST_F(AdmissionTest, PodsNotToSizePassUntouchedAndADryRunIsAnsweredTheSame) {
  for (const json& review : {Review(Pod(nullptr)), Review(Pod({{"team", "web"}})),
                             Review(Described(), "UPDATE")}) {
    const json response = Mutate(review);
    EXPECT_EQ(response["allowed"], true);
    EXPECT_FALSE(response.contains("patch")) << response;
  }
  json config_map = Review(Described());
  config_map["request"]["kind"]["kind"] = "ConfigMap";
  EXPECT_FALSE(Mutate(config_map).contains("patch"));
  EXPECT_EQ(PatchText(Mutate(Review(Described(), "CREATE", /*dry_run=*/true))),
            PatchText(Mutate(Review(Described()))));
}

// The user's own request: a larger one is kept, a smaller one raised, and the
// annotation gpuest.io/memory-request says which; one that is not a whole number is
// refused naming the field.
TEST_F(AdmissionTest, ALargerRequestIsKeptASmallerOneRaisedABadOneRefused) {
  json pod = Described();
  pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpumem"] = "900000";
  json patched = pod.patch(json::parse(PatchText(Mutate(Review(pod)))));
  EXPECT_EQ(patched["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpumem"],
            "900000");
  EXPECT_TRUE(absl::StartsWith(
      patched["metadata"]["annotations"]["gpuest.io/memory-request"].get<std::string>(),
      "kept the pod's 900000 MiB"));

  pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpumem"] = "10";
  patched = pod.patch(json::parse(PatchText(Mutate(Review(pod)))));
  EXPECT_GT(
      std::stoull(
          patched["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpumem"]
              .get<std::string>()),
      10u);
  EXPECT_TRUE(absl::StartsWith(
      patched["metadata"]["annotations"]["gpuest.io/memory-request"].get<std::string>(),
      "raised the pod's 10 MiB"));

  pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpumem"] = "9Gi";
  const json refused = Mutate(Review(pod));
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["code"], 400);
  EXPECT_TRUE(absl::StrContains(refused["status"]["message"].get<std::string>(),
                                "spec.containers[1].resources.limits[nvidia.com/gpumem]"))
      << refused;
}

// Deliverable 2: a bad description is refused naming the field; with
// gpuest.io/on-error: allow the pod is admitted unsized, the warning and the annotation
// gpuest.io/not-sized saying why.
TEST_F(AdmissionTest, ABadDescriptionIsRefusedUnlessThePodAllowsItUnsized) {
  json described = json::parse(Example("cnn.json"));
  described["batch_size"] = -4;
  json pod = Pod({{"gpuest.io/description", described.dump()}});
  const json refused = Mutate(Review(pod));
  EXPECT_EQ(refused["allowed"], false);
  const std::string message = refused["status"]["message"].get<std::string>();
  EXPECT_TRUE(absl::StrContains(message, "batch_size")) << message;
  EXPECT_TRUE(absl::StrContains(message, "ml/train")) << message;

  pod["metadata"]["annotations"]["gpuest.io/on-error"] = "allow";
  const json admitted = Mutate(Review(pod));
  EXPECT_EQ(admitted["allowed"], true);
  ASSERT_TRUE(admitted.contains("warnings"));
  EXPECT_TRUE(
      absl::StrContains(admitted["warnings"][0].get<std::string>(), "batch_size"));
  const json patched = pod.patch(json::parse(PatchText(admitted)));
  EXPECT_TRUE(absl::StrContains(
      patched["metadata"]["annotations"]["gpuest.io/not-sized"].get<std::string>(),
      "batch_size"));
  EXPECT_FALSE(patched["spec"]["containers"][1]["resources"]["limits"].contains(
      "nvidia.com/gpumem"));

  pod["metadata"]["annotations"]["gpuest.io/on-error"] = "sometimes";
  const json odd = Mutate(Review(pod));
  EXPECT_EQ(odd["allowed"], false);
  EXPECT_TRUE(absl::StrContains(odd["status"]["message"].get<std::string>(),
                                "gpuest.io/on-error"));

  // A ConfigMap reference that is not mounted names the annotation and the file.
  const json missing = Mutate(Review(Pod({{"gpuest.io/description", "train-job"}})));
  EXPECT_EQ(missing["allowed"], false);
  EXPECT_TRUE(absl::StrContains(missing["status"]["message"].get<std::string>(),
                                "gpuest.io/description"));
}

// Hostile and malformed bodies are refused before or while they are read, the limit
// or the field named, and the webhook still answers after them.
TEST_F(AdmissionTest, HostileBodiesAreRefusedAndTheWebhookStillAnswers) {
  auto https = Https();
  auto post = [&https](const std::string& body, const std::string& type) {
    auto r = https->Post("/mutate", body, type);
    EXPECT_TRUE(r);
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  EXPECT_EQ(post("{not json", "application/json").first, 400);
  auto [deep_status, deep] =
      post(std::string(100000, '[') + std::string(100000, ']'), "application/json");
  EXPECT_EQ(deep_status, 400);
  EXPECT_TRUE(absl::StrContains(deep, "levels deep")) << deep;
  EXPECT_EQ(post(Review(Described()).dump(), "text/plain").first, 415);
  // The API server's Go decoder would keep an annotation's last copy, simdjson's
  // lookup the first: a key named twice is refused, naming it.
  std::string twice = Review(Described()).dump();
  const size_t annotations = twice.find("\"annotations\":{");
  ASSERT_NE(annotations, std::string::npos) << twice;
  twice.insert(annotations + 15, R"("gpuest.io/description":"{\"batchSize\":1}",)");
  auto [twice_status, twice_body] = post(twice, "application/json");
  EXPECT_EQ(twice_status, 400);
  EXPECT_TRUE(absl::StrContains(twice_body,
                                "appears twice in one object, at "
                                "request.object.metadata.annotations"))
      << twice_body;
  json v1beta1 = Review(Described());
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  auto [old_status, old] = post(v1beta1.dump(), "application/json");
  EXPECT_EQ(old_status, 400);
  EXPECT_TRUE(absl::StrContains(old, "admission.k8s.io/v1")) << old;
  json no_uid = Review(Described());
  no_uid["request"].erase("uid");
  auto [uid_status, uid] = post(no_uid.dump(), "application/json");
  EXPECT_EQ(uid_status, 400);
  EXPECT_TRUE(absl::StrContains(uid, "request.uid")) << uid;
  json wide = Described();
  wide["spec"]["containers"] = json::array();
  for (int i = 0; i < 300; ++i) wide["spec"]["containers"].push_back({{"name", "c"}});
  auto [wide_status, wide_body] = post(Review(wide).dump(), "application/json");
  EXPECT_EQ(wide_status, 400);
  EXPECT_TRUE(absl::StrContains(wide_body, "containers")) << wide_body;
  // Over the body limit (6 MiB): refused from its headers.
  auto [big_status, big] = post(std::string(7 << 20, ' '), "application/json");
  EXPECT_EQ(big_status, 413);
  EXPECT_TRUE(absl::StrContains(big, "limit")) << big;
  httplib::Headers gzip = {{"Content-Encoding", "gzip"}};
  auto encoded = Https()->Post("/mutate", gzip, "{}", "application/json");
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->status, 415);
  auto other = Https()->Post("/validate", "{}", "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  // Plain HTTP on the HTTPS port gets no answer; the webhook is not harmed by it.
  httplib::Client plain("127.0.0.1", ServerFor("hami").admission_port());
  plain.set_read_timeout(2, 0);
  auto cleartext = plain.Post("/mutate", Review(Described()).dump(), "application/json");
  EXPECT_FALSE(cleartext && cleartext->status == 200);
  EXPECT_EQ(Mutate(Review(Described()))["allowed"], true);
  auto health = Https()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// One slow client never holds the others: connections that opened and sent nothing, or
// half a request, do not delay a review.
TEST_F(AdmissionTest, IdleAndHalfSentConnectionsDoNotHoldAReview) {
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    // Every other one sends half a TLS record header: a handshake never completed.
    const int fd = testing::OpenConnection(ServerFor("hami").admission_port(),
                                           i % 2 == 1 ? std::string("\x16\x03") : "");
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  const absl::Time start = absl::Now();
  EXPECT_EQ(Mutate(Review(Described()))["allowed"], true);
  const absl::Duration took = absl::Now() - start;
  for (int fd : idle) close(fd);
  EXPECT_LT(took, absl::Seconds(2)) << "a review waited behind idle connections";
}

// When the server cannot size a pod in time, the answer is an HTTP error, so that the
// configuration's failurePolicy decides, never a refusal of the pod.
TEST(AdmissionDeadline, AReviewPastItsTimeIsAnHttpErrorForTheFailurePolicy) {
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
  auto r = https.Post("/mutate", Review(Described()).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_TRUE(absl::StrContains(r->body, "deadline")) << r->body;
}

// A rotated certificate (new files where the old ones were, as kubelet swaps a mounted
// Secret) is served from the next handshake on, without a restart; a pair that does
// not load leaves the last good one serving.
TEST(AdmissionCertificate, ARotatedCertificateIsServedWithoutARestart) {
  testing::Pki pki;
  pki.MakeCa("old-ca");
  pki.MakeCa("new-ca");
  pki.MakeLeaf("old", "old-ca", "IP:127.0.0.1");
  pki.MakeLeaf("new", "new-ca", "IP:127.0.0.1");
  pki.MakeLeaf("stray", "new-ca", "IP:127.0.0.1");
  // Written beside and renamed into place: a reader sees the old file or the new one.
  auto serve = [&pki](const std::string& cert, const std::string& key) {
    for (const auto& [from, to] :
         {std::make_pair(cert + ".pem", std::string("tls.crt")),
          std::make_pair(key + ".key", std::string("tls.key"))}) {
      std::filesystem::copy_file(pki.Path(from), pki.Path(to + ".new"),
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::rename(pki.Path(to + ".new"), pki.Path(to));
    }
  };
  serve("old", "old");
  auto server = ServerProcess::Start({"--admission-listen=127.0.0.1:0",
                                      "--admission-tls-cert=" + pki.Path("tls.crt"),
                                      "--admission-tls-key=" + pki.Path("tls.key")});
  ASSERT_TRUE(server.ok()) << server.status();
  auto trusted_by = [&](const std::string& ca) {
    httplib::SSLClient client("127.0.0.1", (*server)->admission_port());
    client.set_ca_cert_path(pki.Path(ca + ".pem").c_str());
    client.enable_server_certificate_verification(true);
    client.set_connection_timeout(2, 0);
    auto r = client.Get("/healthz");
    return r && r->status == 200;
  };
  EXPECT_TRUE(trusted_by("old-ca"));
  EXPECT_FALSE(trusted_by("new-ca"));

  serve("new", "new");
  EXPECT_TRUE(testing::WaitFor([&] { return trusted_by("new-ca"); }, absl::Seconds(10),
                               absl::Milliseconds(200)))
      << (*server)->Log();
  EXPECT_FALSE(trusted_by("old-ca"));
  EXPECT_TRUE(absl::StrContains((*server)->Log(), "serving the new certificate"));

  // A key that is not the certificate's: refused, the new pair still serves.
  serve("old", "stray");
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains((*server)->Log(), "does not load"); },
      absl::Seconds(10), absl::Milliseconds(200)));
  EXPECT_TRUE(absl::StrContains((*server)->Log(), "is not the certificate's"))
      << (*server)->Log();
  EXPECT_TRUE(trusted_by("new-ca"));
}

// A webhook whose key is not its certificate's, or without a key, does not start: the
// refusal names the flag.
TEST(AdmissionCertificate, AMismatchedOrMissingKeyStopsTheStartNamingTheFlag) {
  testing::Pki pki;
  pki.MakeCa("ca");
  pki.MakeLeaf("one", "ca", "IP:127.0.0.1");
  pki.MakeLeaf("two", "ca", "IP:127.0.0.1");
  auto mismatched = ServerProcess::Start({"--admission-listen=127.0.0.1:0",
                                          "--admission-tls-cert=" + pki.Path("one.pem"),
                                          "--admission-tls-key=" + pki.Path("two.key")});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_TRUE(absl::StrContains(mismatched.status().message(), "--admission-listen"))
      << mismatched.status();
  EXPECT_TRUE(
      absl::StrContains(mismatched.status().message(), "is not the certificate's"))
      << mismatched.status();
  const testing::CommandResult keyless =
      testing::RunCommand({GPUEST_SERVER_PATH, "--listen=127.0.0.1:0",
                           "--metrics-listen=", "--admission-listen=127.0.0.1:0",
                           "--admission-tls-cert=" + pki.Path("one.pem")});
  EXPECT_EQ(keyless.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(keyless.err, "--admission-tls-key")) << keyless.err;
}

// The certificate is what kube-apiserver checks: a client trusting another CA refuses
// the handshake.
TEST_F(AdmissionTest, AClientThatDoesNotTrustTheCaIsRefusedTheHandshake) {
  testing::Pki other;
  other.MakeCa("other");
  httplib::SSLClient client("127.0.0.1", ServerFor("hami").admission_port());
  client.set_ca_cert_path(other.Path("other.pem").c_str());
  client.enable_server_certificate_verification(true);
  auto r = client.Get("/healthz");
  EXPECT_FALSE(r);
}

}  // namespace
}  // namespace gpuest
