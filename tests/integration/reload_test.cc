// Model reload on the real server (SIGHUP, Admin.ReloadModels), on a scratch copy of
// the shipped models: a good new set is served without breaking the calls in flight;
// a damaged one is refused, and the old set keeps serving.
#include <signal.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/text_file.h"
#include "gpuest/client.h"
#include "gpuest/v1/admin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/scratch_models.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::WaitFor;

// How often a test asks the server (an RPC, a scrape) whether a reload is done.
constexpr absl::Duration kPoll = absl::Milliseconds(50);

constexpr char kModel[] = "gpumemnet-cnn-mlp";
constexpr char kMember[] = "member-2.pt";

// A good new set: the allocsim estimator's manifest says version "2".
void BumpAllocsimVersion(const testing::ScratchModels& models) {
  const std::string path = models.Path("allocsim", "manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(testing::ReadFileOrDie(path));
  ASSERT_EQ(manifest.at("version"), "1");
  manifest["version"] = "2";
  ASSERT_TRUE(common::WriteTextFile(path, manifest.dump(1) + "\n").ok());
}

// gpuest_model_reloads_total{outcome}; nullopt when /metrics does not say.
std::optional<double> Reloads(const testing::ServerProcess& server,
                              const std::string& outcome) {
  auto text = testing::HttpGet(server.metrics_port(), "/metrics");
  if (!text.ok()) return std::nullopt;
  auto samples = testing::ParsePrometheusText(*text);
  if (!samples.ok()) return std::nullopt;
  return testing::SumSamples(*samples, "gpuest_model_reloads_total",
                             {{"outcome", outcome}});
}

// The models_version label of gpuest_models_info, when exactly one series has it.
std::string MetricsModelsVersion(const testing::ServerProcess& server) {
  auto text = testing::HttpGet(server.metrics_port(), "/metrics");
  if (!text.ok()) return "";
  auto samples = testing::ParsePrometheusText(*text);
  if (!samples.ok()) return "";
  std::vector<std::string> versions;
  for (const auto& s : *samples) {
    if (s.name == "gpuest_models_info") versions.push_back(s.labels.at("models_version"));
  }
  return versions.size() == 1 ? versions.front() : "";
}

std::unique_ptr<Client> MakeClient(const testing::ServerProcess& server) {
  ClientOptions options;
  options.targets = {server.target()};
  options.default_deadline = absl::Seconds(10);
  options.max_attempts = 1;
  auto client = Client::Create(options);
  if (!client.ok()) std::abort();
  return *std::move(client);
}

std::string ServedVersion(const Client& client) {
  auto list = client.ListEstimators();
  return list.ok() ? list->models_version() : "";
}

std::string EstimatorVersion(const Client& client, const std::string& id) {
  auto list = client.ListEstimators();
  if (!list.ok()) return "";
  for (const auto& e : list->estimators()) {
    if (e.id() == id) return e.version();
  }
  return "";
}

// Estimate calls from several threads until stopped; any failure is counted.
class Load {
 public:
  Load(const Client& client, int threads) {
    const v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &client, request] {
        while (!stop_.load()) {
          auto r = client.Estimate(request);
          if (r.ok()) {
            ++ok_;
          } else if (failed_++ == 0) {
            ADD_FAILURE() << "first failed call: " << r.status();
          }
        }
      });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  int ok() const { return ok_.load(); }
  int failed() const { return failed_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> ok_{0}, failed_{0};
  std::vector<std::thread> threads_;
};

// SIGHUP under load: waits until done() says the reload is over (false if it never
// does, or the server ends), then for `more` calls answered after it, and stops the load.
bool SighupUnderLoad(testing::ServerProcess& server, Load& load, int more,
                     const std::function<bool()>& done) {
  server.Signal(SIGHUP);
  const bool over =
      WaitFor([&] { return done() || !server.Running(); }, absl::Seconds(60), kPoll) &&
      server.Running();
  if (over) {
    const int answered = load.ok();
    EXPECT_TRUE(WaitFor([&] { return load.ok() >= answered + more; }, absl::Seconds(30)));
  }
  load.Stop();
  return over;
}

// The real server on a scratch copy of the shipped models, a client, and the models
// version it serves at first.
class ReloadTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags = {}) {
    flags.push_back("--models=" + models_.dir());
    auto server = testing::ServerProcess::Start(flags);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = MakeClient(*server_);
    old_version_ = ServedVersion(*client_);
    ASSERT_FALSE(old_version_.empty());
  }

  // Admin.ReloadModels on the server's admin port (started with --admin-listen).
  grpc::Status AdminReload(v1::ReloadModelsResponse& response) {
    if (!admin_) {
      admin_ = v1::Admin::NewStub(
          grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->admin_port()),
                              grpc::InsecureChannelCredentials()));
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return admin_->ReloadModels(&context, v1::ReloadModelsRequest(), &response);
  }

  testing::ScratchModels models_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<Client> client_;
  std::string old_version_;
};

TEST_F(ReloadTest, SighupWithAGoodSetServesTheNewVersionWithoutBreakingCalls) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(MetricsModelsVersion(*server_), old_version_);
  EXPECT_EQ(Reloads(*server_, "success"), 0);

  BumpAllocsimVersion(models_);
  Load load(*client_, 4);
  ASSERT_TRUE(WaitFor([&] { return load.ok() >= 20; }, absl::Seconds(30)));
  // Calls keep coming after the swap, on the new set.
  const bool reloaded = SighupUnderLoad(
      *server_, load, 20, [&] { return EstimatorVersion(*client_, "allocsim") == "2"; });
  ASSERT_TRUE(reloaded) << server_->Log();
  EXPECT_EQ(load.failed(), 0);
  const std::string new_version = ServedVersion(*client_);
  EXPECT_NE(new_version, old_version_);
  EXPECT_EQ(MetricsModelsVersion(*server_), new_version);
  EXPECT_EQ(Reloads(*server_, "success"), 1);
  EXPECT_EQ(Reloads(*server_, "failure"), 0);
  EXPECT_TRUE(absl::StrContains(
      server_->Log(), "models reloaded: version " + old_version_ + " -> " + new_version))
      << server_->Log();

  // Still stops cleanly after the reload.
  server_->Signal(SIGTERM);
  auto code = server_->WaitForExit(absl::Seconds(15));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

TEST_F(ReloadTest, SighupAfterDamagingAFileKeepsTheOldSetServing) {
  ASSERT_NO_FATAL_FAILURE(Start());

  BumpAllocsimVersion(models_);               // A change that alone would load...
  models_.WriteRandomBytes(kModel, kMember);  // ...beside a damaged member.
  Load load(*client_, 2);
  ASSERT_TRUE(WaitFor([&] { return load.ok() >= 10; }, absl::Seconds(30)));
  const bool failed = SighupUnderLoad(
      *server_, load, 10, [&] { return Reloads(*server_, "failure").value_or(0) >= 1; });
  ASSERT_TRUE(failed) << server_->Log();
  EXPECT_EQ(load.failed(), 0);
  EXPECT_EQ(ServedVersion(*client_), old_version_);
  EXPECT_EQ(EstimatorVersion(*client_, "allocsim"), "1") << "a part of the new set";
  EXPECT_EQ(MetricsModelsVersion(*server_), old_version_);
  EXPECT_EQ(Reloads(*server_, "failure"), 1);
  EXPECT_EQ(Reloads(*server_, "success"), 0);
  const std::string log = server_->Log();
  EXPECT_TRUE(absl::StrContains(log, "still serving version " + old_version_)) << log;
  EXPECT_TRUE(absl::StrContains(log, models_.Path(kModel, kMember))) << log;

  // Repaired, the next SIGHUP takes the new set.
  models_.Restore(kModel);
  server_->Signal(SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return Reloads(*server_, "success").value_or(0) >= 1; },
                      absl::Seconds(60), kPoll))
      << server_->Log();
  EXPECT_EQ(EstimatorVersion(*client_, "allocsim"), "2");
}

TEST_F(ReloadTest, AdminRpcReloadsAndReportsTheOutcome) {
  ASSERT_NO_FATAL_FAILURE(Start({"--admin-listen=127.0.0.1:0"}));
  ASSERT_NE(server_->admin_port(), 0);
  ASSERT_NE(server_->admin_port(), server_->grpc_port());

  // A good set, under load.
  BumpAllocsimVersion(models_);
  Load load(*client_, 2);
  ASSERT_TRUE(WaitFor([&] { return load.ok() >= 10; }, absl::Seconds(30)));
  v1::ReloadModelsResponse good;
  const grpc::Status good_status = AdminReload(good);
  const int ok_at_swap = load.ok();
  EXPECT_TRUE(WaitFor([&] { return load.ok() >= ok_at_swap + 10; }, absl::Seconds(30)));
  load.Stop();
  ASSERT_TRUE(good_status.ok()) << good_status.error_message();
  EXPECT_EQ(load.failed(), 0);
  EXPECT_EQ(good.old_models_version(), old_version_);
  const std::string new_version = ServedVersion(*client_);
  EXPECT_NE(new_version, old_version_);
  EXPECT_EQ(good.new_models_version(), new_version);
  EXPECT_EQ(good.estimators(), client_->ListEstimators()->estimators_size());
  EXPECT_EQ(EstimatorVersion(*client_, "allocsim"), "2");

  // A member whose weights are NaN, with the manifest's digest made to match.
  ASSERT_TRUE(models_.WriteNanMember(kModel, 2).ok());
  ASSERT_TRUE(models_.RecordMemberSha256(kModel, 2).ok());
  v1::ReloadModelsResponse bad;
  const grpc::Status bad_status = AdminReload(bad);
  EXPECT_EQ(bad_status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(
      absl::StrContains(bad_status.error_message(), models_.Path(kModel, kMember)))
      << bad_status.error_message();
  EXPECT_TRUE(absl::StrContains(bad_status.error_message(), "non-finite"))
      << bad_status.error_message();
  EXPECT_TRUE(absl::StrContains(bad_status.error_message(),
                                "still serving version " + new_version))
      << bad_status.error_message();
  EXPECT_EQ(ServedVersion(*client_), new_version);
  EXPECT_TRUE(client_->Estimate(testing::ExampleRequest("cnn.json")).ok());
  EXPECT_EQ(Reloads(*server_, "success"), 1);
  EXPECT_EQ(Reloads(*server_, "failure"), 1);
  EXPECT_TRUE(server_->Running());
}

// Two measured jobs on one GPU: the answer is the contention model's alone.
v1::CheckPlacementRequest MeasuredPair() {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  *request.add_existing() = testing::MeasuredJob("running", 4ull << 30, 60);
  *request.mutable_candidate() = testing::MeasuredJob("candidate", 4ull << 30, 50);
  return request;
}

// The contention model is part of the set: a refit one is served after the reload and
// changes the models version; a damaged one is refused with the rest of its set.
TEST_F(ReloadTest, AdminRpcReloadsTheContentionModelWithTheRestOrNothing) {
  ASSERT_NO_FATAL_FAILURE(Start({"--admin-listen=127.0.0.1:0"}));
  auto shipped = client_->CheckPlacement(MeasuredPair());
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_EQ(shipped->jobs_size(), 2);
  const double shipped_speed = shipped->jobs(1).predicted_speed();
  ASSERT_GT(shipped_speed, 0.2);  // Room to see the refit's lower bias unclipped.

  // A refit: another version, its bias 0.1 lower.
  const std::string path = models_.Path("contention", "contention.json");
  nlohmann::ordered_json refit =
      nlohmann::ordered_json::parse(testing::ReadFileOrDie(path));
  ASSERT_NE(refit.at("version"), "refit-for-test");
  refit["version"] = "refit-for-test";
  refit["coefficients"][0] = refit["coefficients"][0].get<double>() - 0.1;
  ASSERT_TRUE(common::WriteTextFile(path, refit.dump(2) + "\n").ok());
  v1::ReloadModelsResponse good;
  const grpc::Status good_status = AdminReload(good);
  ASSERT_TRUE(good_status.ok()) << good_status.error_message();
  const std::string new_version = ServedVersion(*client_);
  EXPECT_NE(good.new_models_version(), old_version_);
  EXPECT_EQ(good.new_models_version(), new_version);
  auto refitted = client_->CheckPlacement(MeasuredPair());
  ASSERT_TRUE(refitted.ok()) << refitted.status();
  EXPECT_EQ(refitted->contention_model_version(), "refit-for-test");
  EXPECT_NEAR(refitted->jobs(1).predicted_speed(), shipped_speed - 0.1, 1e-9);

  // Damaged (cut short), beside a change that alone would load: all refused.
  BumpAllocsimVersion(models_);
  const std::string text = refit.dump(2);
  ASSERT_TRUE(common::WriteTextFile(path, text.substr(0, text.size() / 2)).ok());
  v1::ReloadModelsResponse bad;
  const grpc::Status bad_status = AdminReload(bad);
  EXPECT_EQ(bad_status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(bad_status.error_message(), path + ": not JSON"))
      << bad_status.error_message();
  EXPECT_TRUE(absl::StrContains(bad_status.error_message(),
                                "still serving version " + new_version))
      << bad_status.error_message();
  auto kept = client_->CheckPlacement(MeasuredPair());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->contention_model_version(), "refit-for-test");
  EXPECT_DOUBLE_EQ(kept->jobs(1).predicted_speed(), refitted->jobs(1).predicted_speed());
  EXPECT_EQ(ServedVersion(*client_), new_version);
  EXPECT_EQ(EstimatorVersion(*client_, "allocsim"), "1");
  EXPECT_EQ(Reloads(*server_, "success"), 1);
  EXPECT_EQ(Reloads(*server_, "failure"), 1);
}

// One model set per call: reloads of a contention model that changes every time, under
// a load of CheckPlacement calls that use both halves of the set (a description the
// estimators answer for, a measured job the contention model reads). Every answer names
// its set (models_version) and its contention model: each pair must be one a reload
// served together, never the estimators of one set with the contention model of another.
TEST_F(ReloadTest, EveryCallUnderReloadsIsAnsweredFromOneWholeSet) {
  ASSERT_NO_FATAL_FAILURE(Start({"--admin-listen=127.0.0.1:0"}));
  v1::CheckPlacementRequest request = MeasuredPair();
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  auto first = client_->CheckPlacement(request);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->models_version(), old_version_);

  // models_version -> the contention model version served with it.
  std::map<std::string, std::string> served = {
      {old_version_, first->contention_model_version()}};
  absl::Mutex mu;
  std::set<std::pair<std::string, std::string>> answered;  // Guarded by mu.
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, failed{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&] {
      while (!stop.load()) {
        auto r = client_->CheckPlacement(request);
        if (!r.ok()) {
          if (failed++ == 0) ADD_FAILURE() << "first failed call: " << r.status();
          continue;
        }
        ++calls;
        absl::MutexLock lock(&mu);
        answered.emplace(r->models_version(), r->contention_model_version());
      }
    });
  }

  const std::string path = models_.Path("contention", "contention.json");
  nlohmann::ordered_json contention =
      nlohmann::ordered_json::parse(testing::ReadFileOrDie(path));
  constexpr int kReloads = 6;
  for (int i = 1; i <= kReloads; ++i) {
    const int before = calls.load();
    contention["version"] = absl::StrCat("reload-", i);
    ASSERT_TRUE(common::WriteTextFile(path, contention.dump(2) + "\n").ok());
    v1::ReloadModelsResponse reloaded;
    const grpc::Status status = AdminReload(reloaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
    served[reloaded.new_models_version()] = absl::StrCat("reload-", i);
    // Calls answered on each set before the next replaces it.
    EXPECT_TRUE(WaitFor([&] { return calls.load() >= before + 8; }, absl::Seconds(30)));
  }
  stop = true;
  for (std::thread& t : load) t.join();

  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(served.size(), kReloads + 1u);  // Each reload served a set of its own.
  absl::MutexLock lock(&mu);
  std::set<std::string> versions_seen;
  for (const auto& [models_version, contention_version] : answered) {
    versions_seen.insert(models_version);
    auto it = served.find(models_version);
    ASSERT_NE(it, served.end())
        << "an answer from a set no reload served: " << models_version;
    EXPECT_EQ(contention_version, it->second)
        << "set " << models_version << " answered with another set's contention model";
  }
  EXPECT_GE(versions_seen.size(), 3u);  // The load did run across the reloads.
}

// Without --admin-listen nothing serves Admin: not the Estimator's port either.
TEST(Reload, AdminIsNotServedUnlessAskedFor) {
  auto server = testing::ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->admin_port(), 0);
  auto admin = v1::Admin::NewStub(
      grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ReloadModelsResponse response;
  const grpc::Status status =
      admin->ReloadModels(&context, v1::ReloadModelsRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << status.error_message();
}

// kube-scheduler asks the extender to filter and then to prioritize for the same pod,
// and the extender keeps the pod's figures in between. After a reload it must judge
// with the new models: here the A100 40GB's CUDA context grows by 2 GiB, so the pod
// needs 2 GiB more, as the Estimate RPC says after the reload too.
TEST_F(ReloadTest, TheExtenderJudgesWithTheReloadedModelsNotFiguresKeptFromTheOld) {
  ASSERT_NO_FATAL_FAILURE(Start({"--extender-listen=127.0.0.1:0"}));
  ASSERT_GT(server_->extender_port(), 0);
  // A pod described by examples/cnn.json, and a node whose A100 has 1 GiB free: the
  // pod fits nowhere, and the reason says how much it needs.
  const nlohmann::json args = {
      {"Pod",
       {{"metadata",
         {{"name", "cnn"},
          {"namespace", "ml"},
          {"annotations",
           {{"gpuest.io/description",
             testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) +
                                    "/cnn.json")}}}}}}},
      {"Nodes",
       {{"items",
         {{{"metadata",
            {{"name", "busy"},
             {"annotations",
              {{"gpuest.io/gpus",
                R"([{"model": "a100-40gb", "totalMiB": 40960, "freeMiB": 1024}])"}}}}}}}}}},
      {"NodeNames", nullptr}};
  // The pod's need in the extender's reason, and the Estimate RPC's recommendation,
  // both in GiB to two decimals.
  auto needs = [&] {
    httplib::Client http("127.0.0.1", server_->extender_port());
    http.set_read_timeout(60, 0);
    auto res = http.Post("/filter", args.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    if (!res) return std::string();
    const nlohmann::json reply = nlohmann::json::parse(res->body, nullptr, false);
    const std::string reason = reply["FailedNodes"].value("busy", "");
    const size_t at = reason.find("needs ");
    EXPECT_NE(at, std::string::npos) << res->body;
    return at == std::string::npos
               ? reason
               : reason.substr(at + 6, reason.find(' ', at + 6) - at - 6);
  };
  auto recommended = [&] {
    v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
    request.set_gpu("a100-40gb");
    auto response = client_->Estimate(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok()
               ? absl::StrFormat(
                     "%.2f", response->recommendation().memory_bytes() / double{1 << 30})
               : std::string();
  };
  const std::string before = needs();
  EXPECT_EQ(before, recommended());
  EXPECT_EQ(needs(), before);  // Asked again (prioritize): the same figures.

  const std::string path = models_.dir() + "/gpu_profiles.json";
  nlohmann::json profiles = nlohmann::json::parse(testing::ReadFileOrDie(path));
  for (nlohmann::json& gpu : profiles["gpus"]) {
    if (gpu["id"] == "a100-40gb")
      gpu["context_mib"] = gpu["context_mib"].get<int>() + 2048;
  }
  ASSERT_TRUE(common::WriteTextFile(path, profiles.dump(1) + "\n").ok());
  server_->Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return Reloads(*server_, "success").value_or(0) >= 1; },
                      absl::Seconds(60)))
      << server_->Log();

  const std::string after = needs();
  EXPECT_EQ(after, recommended());
  EXPECT_NEAR(std::stod(after), std::stod(before) + 2.0, 0.11)
      << before << " -> " << after;
}

}  // namespace
}  // namespace gpuest
