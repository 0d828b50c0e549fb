// The allocator-simulation estimators as served: the real server with the bundled
// models, a real traced description (a 96-wide encoder at batch 8, 10,972 events).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "google/protobuf/util/json_util.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/cli_fixture.h"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"
#include "tests/support/traced_steps.h"

namespace gpuest {
namespace {

const std::string kTracedModel =
    std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json";

uint64_t Sum(const v1::MemoryBreakdown& b) {
  return b.weights_bytes() + b.gradients_bytes() + b.optimizer_state_bytes() +
         b.inputs_bytes() + b.activations_bytes() + b.temporaries_bytes() +
         b.fragmentation_bytes() + b.context_bytes() + b.calibration_bytes() +
         b.workspaces_bytes();
}

const v1::EstimatorResult* ResultOf(const v1::EstimateResponse& response,
                                    const std::string& id) {
  for (const auto& r : response.results()) {
    if (r.estimator_id() == id) return &r;
  }
  return nullptr;
}

bool Warned(const v1::EstimateResponse& response, v1::WarningCode code,
            const std::string& id) {
  for (const auto& w : response.warnings()) {
    if (w.code() == code && w.estimator_id() == id) return true;
  }
  return false;
}

// The traced encoder, placed on the GPU the simulators were calibrated on.
v1::EstimateRequest TracedRequestOnA100() {
  v1::EstimateRequest request = testing::RequestFromFile(kTracedModel);
  request.set_gpu("a100-40gb");
  return request;
}

class SimulationTest : public testing::CliAgainstServer {
 protected:
  static std::unique_ptr<Client> Connect() {
    ClientOptions options;
    options.targets = {server_->target()};
    options.default_deadline = absl::Seconds(5);
    auto client = Client::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
};

TEST_F(SimulationTest, ATracedRequestIsReplayedAndAnsweredWithABreakdown) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = TracedRequestOnA100();
  auto response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  // The trace supersedes the layer rules unless they are asked for.
  ASSERT_NE(ResultOf(*response, "allocsim"), nullptr);
  EXPECT_EQ(ResultOf(*response, "analytic"), nullptr);
  EXPECT_EQ(response->recommendation().estimator_id(), "allocsim");
  EXPECT_EQ(response->recommendation().memory_bytes(),
            ResultOf(*response, "allocsim")->memory().upper_bytes());

  request.add_estimators("allocsim");
  request.add_estimators("analytic");
  response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  for (const char* id : {"allocsim", "analytic"}) {
    const v1::EstimatorResult* r = ResultOf(*response, id);
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->kind(), v1::ESTIMATOR_KIND_SIMULATOR);
    const v1::MemoryEstimate& m = r->memory();
    EXPECT_GE(m.upper_bytes(), m.point_bytes()) << id;
    EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes()) << id;
    EXPECT_GT(m.breakdown().weights_bytes(), 0u) << id;
    EXPECT_GT(m.breakdown().context_bytes(), 1ull << 30) << id;  // The A100's context.
    EXPECT_EQ(m.gpu_constants(), v1::GPU_CONSTANTS_CALIBRATED) << id;
    EXPECT_FALSE(Warned(*response, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS, id));
  }
  // The trace says what the layers cannot: the two differ.
  EXPECT_NE(ResultOf(*response, "allocsim")->memory().upper_bytes(),
            ResultOf(*response, "analytic")->memory().upper_bytes());
  const v1::Recommendation& rec = response->recommendation();
  EXPECT_TRUE(rec.estimator_id() == "allocsim" || rec.estimator_id() == "analytic")
      << rec.estimator_id();
  EXPECT_EQ(rec.memory_bytes(),
            std::max(ResultOf(*response, "allocsim")->memory().upper_bytes(),
                     ResultOf(*response, "analytic")->memory().upper_bytes()));
  EXPECT_TRUE(rec.fit().fits());
  EXPECT_EQ(rec.fit().headroom_bytes(),
            static_cast<int64_t>(rec.fit().capacity_bytes() - rec.memory_bytes()));
}

TEST_F(SimulationTest, AnotherGpuUsesItsAssumedConstantsAndSaysSo) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = testing::RequestFromFile(kTracedModel);
  request.set_gpu("l4");
  request.add_estimators("allocsim");
  auto response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results_size(), 1);
  EXPECT_EQ(response->results(0).memory().gpu_constants(), v1::GPU_CONSTANTS_ASSUMED);
  EXPECT_TRUE(Warned(*response, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS, "allocsim"));
  // The H100's context is measured (models/contexts/, gpu_profiles.json): served as
  // measured, with where it came from, and no warning.
  request.set_gpu("h100-80gb");
  auto h100 = client->Estimate(request);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->results(0).memory().gpu_constants(), v1::GPU_CONSTANTS_CALIBRATED);
  EXPECT_FALSE(Warned(*h100, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS, "allocsim"));
  EXPECT_TRUE(
      absl::StrContains(h100->results(0).basis(), "758 MiB measured with CUDA 13"))
      << h100->results(0).basis();
}

TEST_F(SimulationTest, ALayerOnlyRequestGetsTheAnalyticEstimate) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.set_gpu("t4");
  auto response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(ResultOf(*response, "allocsim"), nullptr);  // No trace, no replay of one.
  const v1::EstimatorResult* analytic = ResultOf(*response, "analytic");
  ASSERT_NE(analytic, nullptr);
  EXPECT_EQ(Sum(analytic->memory().breakdown()), analytic->memory().upper_bytes());
  EXPECT_EQ(response->recommendation().fit().gpu(), "t4");
  EXPECT_EQ(response->recommendation().fit().fits(),
            response->recommendation().memory_bytes() <= (15360ull << 20));
}

// The example's layers do not give their inputs, so the layer rule cannot see a tensor
// no module made, and says so; given the inputs, it does not.
TEST_F(SimulationTest, ALayerOnlyEstimateSaysWhenTheLayersInputsAreUnknown) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.set_gpu("a100-40gb");
  auto without = client->Estimate(request);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(Warned(*without, v1::WARNING_CODE_LAYER_INPUTS_UNKNOWN, "analytic"));
  int64_t previous = 1;
  for (int64_t d : request.model().input_shape()) previous *= d;
  for (v1::Layer& layer : *request.mutable_model()->mutable_layers()) {
    layer.set_input_activations(previous);
    previous = layer.output_activations();
  }
  auto with = client->Estimate(request);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_FALSE(Warned(*with, v1::WARNING_CODE_LAYER_INPUTS_UNKNOWN, "analytic"));
  // Inputs that are the previous layers' outputs add nothing: the same bound.
  EXPECT_EQ(ResultOf(*with, "analytic")->memory().upper_bytes(),
            ResultOf(*without, "analytic")->memory().upper_bytes());
}

// A bound is a bound: a step whose upper bound lands just above the A100 40GB is
// reported above it, does not fit, and the retry verdict says the allocator's cache
// release would let it run. Found by bisection over the step's size, so that it holds
// for whatever calibration the models carry.
TEST_F(SimulationTest, AnUpperBoundJustAboveTheCardIsReportedUncapped) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  constexpr uint64_t kUnit = 2ull << 20;
  auto estimate = [&client](uint64_t units) {
    v1::EstimateRequest request = testing::CacheHungryStep(units * kUnit);
    request.set_gpu("a100-40gb");
    request.add_estimators("allocsim");
    auto response = client->Estimate(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::EstimateResponse();
  };
  const uint64_t capacity = 40960ull << 20;
  // The smallest step whose upper bound exceeds the card: lo fits, hi does not.
  uint64_t lo = 1, hi = capacity / kUnit;
  ASSERT_LE(estimate(lo).results(0).memory().upper_bytes(), capacity);
  ASSERT_GT(estimate(hi).results(0).memory().upper_bytes(), capacity);
  while (hi - lo > 1) {
    const uint64_t mid = (lo + hi) / 2;
    (estimate(mid).results(0).memory().upper_bytes() > capacity ? hi : lo) = mid;
  }
  const v1::EstimateResponse below = estimate(lo);
  const v1::EstimateResponse above = estimate(hi);
  const v1::MemoryEstimate& m = above.results(0).memory();
  EXPECT_GT(m.upper_bytes(), capacity);
  EXPECT_LT(m.upper_bytes(), capacity + (64ull << 20)) << "just above, not far";
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  EXPECT_EQ(m.allocator_retry(), v1::ALLOCATOR_RETRY_SAVES_IT);
  const v1::GpuFit& fit = above.recommendation().fit();
  EXPECT_EQ(above.recommendation().memory_bytes(), m.upper_bytes());
  EXPECT_FALSE(fit.fits());
  EXPECT_LT(fit.headroom_bytes(), 0);
  EXPECT_EQ(fit.allocator_retry(), v1::ALLOCATOR_RETRY_SAVES_IT);
  EXPECT_TRUE(Warned(above, v1::WARNING_CODE_ALLOCATOR_RETRIES, "allocsim"));
  EXPECT_TRUE(below.recommendation().fit().fits());
  EXPECT_EQ(below.recommendation().fit().allocator_retry(),
            v1::ALLOCATOR_RETRY_NOT_NEEDED);
  EXPECT_FALSE(Warned(below, v1::WARNING_CODE_ALLOCATOR_RETRIES, "allocsim"));
  EXPECT_EQ(estimate(1).recommendation().fit().allocator_retry(),
            v1::ALLOCATOR_RETRY_NOT_NEEDED);

  // The CLI says the same: NO, and the verdict.
  const std::string dir =
      ::testing::TempDir() + "/simulation_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/cache_hungry.json";
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                  testing::CacheHungryStep(hi * kUnit).model(), &json)
                  .ok());
  std::ofstream(file) << json;
  const testing::CommandResult r =
      Cli({"estimate", file, "--gpu", "a100-40gb", "--estimators", "allocsim"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "fits a100-40gb (40.00 GiB): NO, short by "))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "allocator retry: SAVES IT")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "ALLOCATOR_RETRIES [allocsim]")) << r.out;
  std::filesystem::remove_all(dir);
}

// An LSTM language model is of no family the simulator is calibrated on: it still
// answers, with the most conservative calibration, and the recommendation rests on it
// rather than on Horus's larger formula figure.
TEST_F(SimulationTest, AModelOfNoKnownFamilyIsRecommendedByTheSimulator) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = testing::RequestFromFile(
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/lstm_lm_b64.json");
  request.set_gpu("a100-40gb");
  auto response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->family(), v1::MODEL_FAMILY_OTHER);
  const v1::EstimatorResult* sim = ResultOf(*response, "allocsim");
  const v1::EstimatorResult* horus = ResultOf(*response, "horus");
  ASSERT_NE(sim, nullptr);
  ASSERT_NE(horus, nullptr);
  EXPECT_FALSE(sim->in_distribution());
  EXPECT_TRUE(Warned(*response, v1::WARNING_CODE_UNCALIBRATED_FAMILY, "allocsim"));
  ASSERT_GT(horus->memory().point_bytes(), sim->memory().upper_bytes());
  EXPECT_EQ(response->recommendation().estimator_id(), "allocsim");
  EXPECT_EQ(response->recommendation().memory_bytes(), sim->memory().upper_bytes());
}

// A job with convolutions that sets cudnn.benchmark, or does not say, is told of the
// first iteration's search beside its requirement, and how to cap it; one that turns it
// off is not.
TEST_F(SimulationTest, CudnnBenchmarkOnAConvNetIsATransientBesideTheRequirement) {
  std::string text =
      testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json");
  ASSERT_FALSE(absl::StrContains(text, "cudnnBenchmark"));
  std::string off = text;
  off.insert(off.find('{') + 1, "\"cudnnBenchmark\": false, ");
  const testing::CommandResult plain = Cli({"estimate", "-", "--gpu", "a100-40gb"}, off);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(absl::StrContains(plain.out, "CUDNN_BENCHMARK_TRANSIENT")) << plain.out;
  EXPECT_TRUE(absl::StrContains(plain.out, "cap: not needed")) << plain.out;
  for (const std::string& input :
       {text, "{\"cudnnBenchmark\": true, " + text.substr(text.find('{') + 1)}) {
    const testing::CommandResult benchmark =
        Cli({"estimate", "-", "--gpu", "a100-40gb"}, input);
    ASSERT_EQ(benchmark.exit_code, 0) << benchmark.err;
    EXPECT_TRUE(
        absl::StrContains(benchmark.out, "CUDNN_BENCHMARK_TRANSIENT [analytic]: "))
        << benchmark.out;
    EXPECT_TRUE(absl::StrContains(benchmark.out, "transient (cuDNN benchmark search)"))
        << benchmark.out;
    EXPECT_TRUE(absl::StrContains(benchmark.out, "cap: NEEDED on a shared GPU"))
        << benchmark.out;
    EXPECT_TRUE(absl::StrContains(benchmark.out, "set_per_process_memory_fraction(0."))
        << benchmark.out;
  }
}

TEST_F(SimulationTest, ListsTheSimulationsWithHeldOutMetrics) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto list = client->ListEstimators();
  ASSERT_TRUE(list.ok()) << list.status();
  int found = 0;
  for (const auto& e : list->estimators()) {
    if (e.id() != "allocsim" && e.id() != "analytic") continue;
    ++found;
    EXPECT_EQ(e.kind(), v1::ESTIMATOR_KIND_SIMULATOR);
    // GPUMemNet's held-out runs score the terms they are served: its CNNs the terms of
    // its generated CNNs, its transformers the clean runs' (one set for every GPU),
    // which the clean runs scored too.
    for (const char* family : {"mlp", "cnn-synthetic", "transformer"}) {
      const std::string key = std::string(family) + "_held_out_safe";
      ASSERT_TRUE(e.training_metrics().contains(key)) << e.id() << " " << key;
      EXPECT_GT(e.training_metrics().at(key), 0.5) << e.id() << " " << key;
    }
    EXPECT_TRUE(e.training_metrics().contains("transformer_unseen_architecture_safe"))
        << e.id();
  }
  EXPECT_EQ(found, 2);
}

// The bundled calibration's scores on runs it never saw travel with every answer, and
// a family whose bound held on fewer real unseen architectures than it is fitted for
// is warned of (what the shipped manifest says decides which, not this test).
TEST_F(SimulationTest, TheBoundsValidationTravelsWithTheAnswer) {
  const std::string manifest_file =
      std::string(GPUEST_MODELS_DIR) + "/allocsim/manifest.json";
  auto manifest = allocsim::SimulationManifest::Parse(
      testing::ReadFileOrDie(manifest_file), manifest_file);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  // The traced model is a text encoder: the transformer terms (fitted on clean runs,
  // one set for every GPU) serve it.
  const allocsim::FamilyTerms* transformer = nullptr;
  for (const auto& f : manifest->families) {
    if (f.family == "transformer" && !f.without_convolutions && !f.synthetic) {
      transformer = &f;
    }
  }
  ASSERT_NE(transformer, nullptr);
  std::vector<allocsim::HeldOutScores> scored;
  for (const auto* scores :
       {&transformer->held_out, &transformer->unseen_architectures}) {
    if (scores->has_value()) scored.push_back(**scores);
  }
  ASSERT_FALSE(scored.empty()) << "the bundled calibration was scored on held-out runs";

  auto client = Connect();
  ASSERT_NE(client, nullptr);
  v1::EstimateRequest request = TracedRequestOnA100();
  auto response = client->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::EstimatorResult* r = ResultOf(*response, "allocsim");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(absl::StrContains(r->basis(), "the transformer calibration")) << r->basis();
  const auto& v = r->memory().upper_validation();
  ASSERT_EQ(v.size(), static_cast<int>(scored.size()));
  bool below = false;
  for (size_t i = 0; i < scored.size(); ++i) {
    EXPECT_EQ(v[i].runs(), scored[i].rows);
    EXPECT_DOUBLE_EQ(v[i].safe_share(), scored[i].safe);
    EXPECT_DOUBLE_EQ(v[i].target_safe_share(), manifest->safe_quantile);
    below |= scored[i].safe < manifest->safe_quantile;
  }
  EXPECT_EQ(Warned(*response, v1::WARNING_CODE_BOUND_BELOW_TARGET, "allocsim"), below);

  // The JSON form keeps every share, zero or not, and the text form says it in words.
  const testing::CommandResult json =
      Cli({"estimate", kTracedModel, "--gpu", "a100-40gb", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"upperValidation\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"safeAndTightShare\"")) << json.out;
  const testing::CommandResult text =
      Cli({"estimate", kTracedModel, "--gpu", "a100-40gb"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "upper bound (allocsim) held on")) << text.out;
}

TEST_F(SimulationTest, TheCliShowsTheBreakdown) {
  const testing::CommandResult r = Cli({"estimate", kTracedModel, "--gpu", "a100-40gb",
                                        "--estimators", "allocsim,analytic"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "breakdown (allocsim")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "breakdown (analytic")) << r.out;
  for (const char* part : {"weights", "optimizer state", "activations", "fragmentation",
                           "context", "calibration"}) {
    EXPECT_TRUE(absl::StrContains(r.out, part)) << part << "\n" << r.out;
  }
  EXPECT_TRUE(absl::StrContains(r.out, "calibrated GPU constants")) << r.out;
}

}  // namespace
}  // namespace gpuest
