// The allocator simulation's speed on training-shaped traces: activations stacked in
// forward and freed in reverse during backward, short-lived temporaries, gradients
// and optimizer state. Goal: a 10,000-event trace in 1 ms or less.
#include <fstream>
#include <random>
#include <sstream>

#include "benchmark/benchmark.h"
#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/allocsim/trace_replay.h"
#include "estimators/core/features.h"
#include "google/protobuf/util/json_util.h"

namespace gpuest::allocsim {
namespace {

v1::AllocationTrace TrainingShapedTrace(int events, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> size(13.0, 2.5);  // ~0.5 KiB .. ~100 MiB
  v1::AllocationTrace t;
  uint32_t clock = 0;
  auto add = [&](uint64_t bytes, v1::AllocationCategory c) {
    t.add_size_bytes(std::max<uint64_t>(1, bytes));
    t.add_alloc_at(++clock);
    t.add_free_at(0);
    t.add_category(c);
    return t.size_bytes_size() - 1;
  };
  const int layers = events / 5;
  std::vector<int> params, saved;
  for (int i = 0; i < layers / 2; ++i) {
    params.push_back(
        add(static_cast<uint64_t>(size(rng)), v1::ALLOCATION_CATEGORY_PARAMETER));
  }
  for (int i = 0; i < layers; ++i) {  // Forward.
    saved.push_back(
        add(static_cast<uint64_t>(size(rng)), v1::ALLOCATION_CATEGORY_ACTIVATION));
    const int tmp =
        add(static_cast<uint64_t>(size(rng)), v1::ALLOCATION_CATEGORY_TEMPORARY);
    t.set_free_at(tmp, ++clock);
  }
  for (int i = layers - 1; i >= 0; --i) {  // Backward.
    const int tmp =
        add(static_cast<uint64_t>(size(rng)), v1::ALLOCATION_CATEGORY_TEMPORARY);
    t.set_free_at(tmp, ++clock);
    t.set_free_at(saved[i], ++clock);
  }
  for (int p : params) add(t.size_bytes(p), v1::ALLOCATION_CATEGORY_GRADIENT);
  for (int p : params) add(t.size_bytes(p), v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE);
  return t;
}

void BM_ReplayTrace(benchmark::State& state) {
  const v1::AllocationTrace trace =
      TrainingShapedTrace(static_cast<int>(state.range(0)), 7);
  for (auto _ : state) {
    auto result = ReplayTrace(trace, AllocatorConfig{}, {{kDefaultCublasWorkspaceBytes}});
    benchmark::DoNotOptimize(result);
  }
  state.counters["events"] = trace.size_bytes_size();
  state.SetItemsProcessed(state.iterations() * trace.size_bytes_size());
}
BENCHMARK(BM_ReplayTrace)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMicrosecond);

void BM_ReplayTraceExpandable(benchmark::State& state) {
  const v1::AllocationTrace trace =
      TrainingShapedTrace(static_cast<int>(state.range(0)), 7);
  AllocatorConfig config;
  config.expandable_segments = true;
  for (auto _ : state) benchmark::DoNotOptimize(ReplayTrace(trace, config, {}));
  state.counters["events"] = trace.size_bytes_size();
}
BENCHMARK(BM_ReplayTraceExpandable)->Arg(10000)->Unit(benchmark::kMicrosecond);

// A real step: a 96-layer Transformer encoder (d 256, batch 8, AdamW) described by
// `gpuest.describe`, 10,972 allocations.
std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool ReadEncoder(v1::ModelDescription& model) {
  return google::protobuf::util::JsonStringToMessage(
             ReadText(std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json"),
             &model)
      .ok();
}

void BM_ReplayRealTrace(benchmark::State& state) {
  v1::ModelDescription model;
  if (!ReadEncoder(model)) {
    state.SkipWithError("cannot read tests/data/traces/encoder96_b8.json");
    return;
  }
  for (auto _ : state)
    benchmark::DoNotOptimize(
        ReplayTrace(model.trace(), {}, {{kDefaultCublasWorkspaceBytes}}));
  state.counters["events"] = model.trace().size_bytes_size();
}
BENCHMARK(BM_ReplayRealTrace)->Unit(benchmark::kMicrosecond);

// The served estimators on the same model, as the server runs them: the shipped
// manifests (models/allocsim, models/analytic) and the A100 40GB profile; two steps
// replayed, the breakdown and the basis built.
void BM_ServedSimulation(benchmark::State& state, const std::string& id) {
  const std::string models = GPUEST_MODELS_DIR;
  auto gpus = core::GpuProfiles::LoadFile(models + "/gpu_profiles.json");
  auto estimator = CreateSimulationEstimator(
      {id, models + "/" + id, ReadText(models + "/" + id + "/manifest.json"), {}}, {});
  v1::EstimateRequest request;
  if (!gpus.ok() || !estimator.ok() || !ReadEncoder(*request.mutable_model())) {
    state.SkipWithError("cannot read the shipped models or the encoder's description");
    return;
  }
  const v1::FeatureVector features = core::FeaturesOf(request);
  const core::EstimationInput input{request, features, gpus->Default()};
  for (auto _ : state) {
    v1::EstimatorResult result;
    std::vector<v1::Warning> warnings;
    benchmark::DoNotOptimize((*estimator)->Estimate(input, result, warnings));
  }
}
BENCHMARK_CAPTURE(BM_ServedSimulation, allocsim, std::string("allocsim"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ServedSimulation, analytic, std::string("analytic"))
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuest::allocsim

BENCHMARK_MAIN();
