// In-process costs of the estimation path: feature extraction, layer-type
// classification, validation, Horus, each shipped GPUMemNet ensemble alone, and the
// whole engine (what one request costs the server before gRPC).
#include <fstream>
#include <sstream>

#include "benchmark/benchmark.h"
#include "estimators/core/engine.h"
#include "estimators/core/features.h"
#include "estimators/core/layer_types.h"
#include "estimators/core/torch_device.h"
#include "estimators/default_factories.h"
#include "estimators/horus/horus.h"
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
  for (auto _ : state) benchmark::DoNotOptimize(core::ExtractFeatures(request.model()));
}
BENCHMARK(BM_ExtractFeatures)->DenseRange(0, 2);

// Every layer of an example classified once (the estimators classify each layer of a
// request several times).
void BM_ClassifyLayerTypes(benchmark::State& state) {
  const v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state) {
    for (const v1::Layer& layer : request.model().layers())
      benchmark::DoNotOptimize(core::ClassifyLayerType(layer.type()));
  }
  state.SetItemsProcessed(state.iterations() * request.model().layers_size());
}
BENCHMARK(BM_ClassifyLayerTypes)->DenseRange(0, 2);

void BM_Validate(benchmark::State& state) {
  const v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state)
    benchmark::DoNotOptimize(core::ValidateRequest(request, core::ValidationLimits{}));
}
BENCHMARK(BM_Validate)->DenseRange(0, 2);

void BM_HorusBytes(benchmark::State& state) {
  int64_t a = 1000;
  for (auto _ : state) benchmark::DoNotOptimize(horus::HorusBytes(a++, 25'000'000, 32));
}
BENCHMARK(BM_HorusBytes);

// One registry with every shipped model, shared by the benchmarks.
const core::Engine* SharedEngine(std::string* error) {
  static const core::Engine* engine = [error]() -> const core::Engine* {
    core::UseOneIntraOpThread();  // As the server does.
    auto registry = core::EstimatorRegistry::Load(
        estimators::WithDefaultFactories({GPUEST_MODELS_DIR, "cpu"}));
    if (!registry.ok()) {
      *error = std::string(registry.status().message());
      return nullptr;
    }
    return new core::Engine(std::move(*registry), core::ValidationLimits{});
  }();
  return engine;
}

// Each shipped GPUMemNet ensemble alone, on its family's example, through the engine
// (validation and features included): the in-process cost of one estimate.
void BM_GpuMemNet(benchmark::State& state) {
  static const char* kIds[] = {
      "gpumemnet-mlp-mlp",         "gpumemnet-mlp-transformer",
      "gpumemnet-cnn-mlp",         "gpumemnet-cnn-transformer",
      "gpumemnet-transformer-mlp", "gpumemnet-transformer-transformer"};
  std::string error;
  const core::Engine* engine = SharedEngine(&error);
  if (engine == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const int i = static_cast<int>(state.range(0));
  v1::EstimateRequest request = Example(kExamples[i / 2]);
  request.add_estimators(kIds[i]);
  state.SetLabel(kIds[i]);
  if (auto first = engine->Estimate(request); !first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(engine->Estimate(request));
}
BENCHMARK(BM_GpuMemNet)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

void BM_EngineEstimate(benchmark::State& state) {
  std::string error;
  const core::Engine* engine_ptr = SharedEngine(&error);
  if (engine_ptr == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const core::Engine& engine = *engine_ptr;
  v1::EstimateRequest request = Example(kExamples[state.range(0)]);
  request.set_gpu("a100-40gb");
  state.SetLabel(kExamples[state.range(0)]);
  for (auto _ : state) benchmark::DoNotOptimize(engine.Estimate(request));
}
BENCHMARK(BM_EngineEstimate)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuest

BENCHMARK_MAIN();
