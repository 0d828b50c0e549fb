// In-process costs of the estimation path: feature extraction, validation, Horus, and
// the whole engine (what one request costs the server before gRPC).
#include <fstream>
#include <sstream>

#include "benchmark/benchmark.h"
#include "estimators/engine.h"
#include "estimators/features.h"
#include "estimators/horus.h"
#include "google/protobuf/util/json_util.h"

namespace gpuest {
namespace {

v1::EstimateRequest Example(const std::string& name) {
  std::ifstream in(std::string(GPUEST_EXAMPLES_DIR) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  v1::EstimateRequest request;
  if (!google::protobuf::util::JsonStringToMessage(text.str(), request.mutable_model())
           .ok()) {
    std::abort();
  }
  return request;
}

const char* kExamples[] = {"mlp.json", "cnn.json", "transformer.json"};

void BM_ExtractFeatures(benchmark::State& state) {
  const v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state) benchmark::DoNotOptimize(ExtractFeatures(request.model()));
}
BENCHMARK(BM_ExtractFeatures)->DenseRange(0, 2);

void BM_Validate(benchmark::State& state) {
  const v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state)
    benchmark::DoNotOptimize(ValidateRequest(request, ValidationLimits{}));
}
BENCHMARK(BM_Validate)->DenseRange(0, 2);

void BM_HorusBytes(benchmark::State& state) {
  int64_t a = 1000;
  for (auto _ : state) benchmark::DoNotOptimize(HorusBytes(a++, 25'000'000, 32));
}
BENCHMARK(BM_HorusBytes);

void BM_EngineEstimate(benchmark::State& state) {
  auto registry = EstimatorRegistry::Load({GPUEST_MODELS_DIR, "cpu"});
  if (!registry.ok()) {
    state.SkipWithError(std::string(registry.status().message()).c_str());
    return;
  }
  Engine engine(std::move(*registry), ValidationLimits{});
  v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  request.set_gpu("a100-40gb");
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state) benchmark::DoNotOptimize(engine.Estimate(request));
}
BENCHMARK(BM_EngineEstimate)->DenseRange(0, 2);

}  // namespace
}  // namespace gpuest

BENCHMARK_MAIN();
