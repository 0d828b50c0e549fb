#include "estimators/allocsim/simulation_estimator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/features.h"
#include "estimators/core/recommendation.h"
#include "estimators/core/stack_context.h"
#include "gtest/gtest.h"
#include "tests/support/traced_steps.h"

namespace gpuest::allocsim {
namespace {

constexpr uint64_t MiB = 1024 * 1024;

core::GpuProfile Card(uint64_t memory_mib, bool calibrated = true) {
  core::GpuProfile gpu;
  gpu.id = "card";
  gpu.memory_bytes = memory_mib * MiB;
  gpu.context_bytes = 1000 * MiB;
  gpu.cublas_workspace_bytes = kDefaultCublasWorkspaceBytes;
  gpu.constants_calibrated = calibrated;
  gpu.constants_basis = "measured on a test card";
  return gpu;
}

// A manifest like the ones gpuest-calibrate-memory writes (every key it must have).
std::string Manifest(const std::string& source, const std::string& mlp_terms =
                                                    R"("intercept_mib": 100,
  "safe_factor": 1.5, "point_intercept_mib": 100, "point_factor": 1.1,
  "held_out_rows": 10, "held_out_mape": 5.0, "held_out_safe": 1.0,
  "held_out_safe_and_tight": 0.9)") {
  return absl::StrCat(R"({"estimator_type": "allocsim", "id": "sim", "version": "1",
  "trace_source": ")",
                      source, R"(", "description": "a test simulator",
  "made_by": "simulation_estimator_test", "calibration": {"gpu": "card",
  "context_mib": 1000.0, "steps": 2, "safe_quantile": 0.95, "families": {"mlp": {)",
                      mlp_terms, R"(, "datasets": []}}}})");
}

absl::StatusOr<std::unique_ptr<core::Estimator>> Create(const std::string& manifest) {
  return CreateSimulationEstimator({"sim", "/models/sim", manifest, {}}, {});
}

// A request for a model of the family with one input of `input` elements per sample.
v1::EstimateRequest RequestFor(const char* name, v1::ModelFamily family, int64_t batch,
                               int64_t input) {
  v1::EstimateRequest r;
  v1::ModelDescription& m = *r.mutable_model();
  m.set_name(name);
  m.set_family(family);
  m.set_batch_size(batch);
  m.add_input_shape(input);
  return r;
}

void AddLayer(v1::ModelDescription& m, const char* type, int64_t outputs,
              int64_t parameters) {
  v1::Layer& l = *m.add_layers();
  l.set_type(type);
  l.set_output_activations(outputs);
  l.set_parameters(parameters);
}

// An MLP of three 1024-wide layers at batch 64, with a trace built from its layers.
v1::EstimateRequest MlpRequest(bool with_trace) {
  v1::EstimateRequest r = RequestFor("mlp", v1::MODEL_FAMILY_MLP, 64, 1024);
  v1::ModelDescription& m = *r.mutable_model();
  for (int i = 0; i < 3; ++i) {
    AddLayer(m, "Linear", 1024, 1024 * 1024 + 1024);
    AddLayer(m, "ReLU", 1024, 0);
  }
  if (with_trace) *m.mutable_trace() = TraceFromLayers(m);
  return r;
}

// A transformer of token embeddings, layer norms and dense layers at batch 32 with its
// trace, and with a patch-embedding convolution in front where asked.
v1::EstimateRequest TransformerRequest(bool with_convolution) {
  v1::EstimateRequest r =
      RequestFor("transformer", v1::MODEL_FAMILY_TRANSFORMER, 32, 128);
  v1::ModelDescription& m = *r.mutable_model();
  if (with_convolution) AddLayer(m, "Conv2d", 128 * 256, 3 * 256 * 16 * 16);
  AddLayer(m, "Embedding", 128 * 256, 30000 * 256);
  for (int i = 0; i < 4; ++i) {
    AddLayer(m, "LayerNorm", 128 * 256, 512);
    AddLayer(m, "Linear", 128 * 1024, 256 * 1024);
    AddLayer(m, "GELU", 128 * 1024, 0);
    AddLayer(m, "Linear", 128 * 256, 1024 * 256);
  }
  *m.mutable_trace() = TraceFromLayers(m);
  return r;
}

struct Outcome {
  v1::EstimatorResult result;
  std::vector<v1::Warning> warnings;
  absl::Status status;
};

Outcome EstimateWith(const core::Estimator& e, const v1::EstimateRequest& request,
                     const core::GpuProfile& gpu) {
  const v1::FeatureVector features = core::FeaturesOf(request);
  Outcome run;
  run.status = e.Estimate({request, features, gpu}, run.result, run.warnings);
  return run;
}

uint64_t Sum(const v1::MemoryBreakdown& b) {
  return b.weights_bytes() + b.gradients_bytes() + b.optimizer_state_bytes() +
         b.inputs_bytes() + b.activations_bytes() + b.temporaries_bytes() +
         b.fragmentation_bytes() + b.context_bytes() + b.calibration_bytes() +
         b.workspaces_bytes() + b.uncertain_layers_bytes();
}

bool HasWarning(const Outcome& run, v1::WarningCode code) {
  for (const v1::Warning& w : run.warnings) {
    if (w.code() == code) return true;
  }
  return false;
}

TEST(MemoryModel, CalibratedEstimateAndABreakdownThatAddsUp) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  const FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 0);
  const double reserved = replay->peak_reserved_bytes;
  EXPECT_NEAR(m.point_bytes(), 1050.0 * MiB + 1.1 * reserved, 1);
  EXPECT_NEAR(m.upper_bytes(), 1100.0 * MiB + 1.5 * reserved, 1);
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  // Three layers of 1024 x 1024 + 1024 fp32 weights; Adam's state twice that.
  const uint64_t weights = 3 * ((1024 * 1024 + 1024) * 4);
  EXPECT_EQ(m.breakdown().weights_bytes(), weights);
  EXPECT_EQ(m.breakdown().optimizer_state_bytes(), 2 * weights);
  // The context, and the forward's and the backward's cuBLAS workspaces.
  EXPECT_EQ(m.breakdown().context_bytes(), 1000 * MiB + 2 * kDefaultCublasWorkspaceBytes);
  EXPECT_EQ(m.gpu_constants(), v1::GPU_CONSTANTS_CALIBRATED);
  EXPECT_EQ(
      CalibratedEstimate(*replay, Card(40960, false), calibration, 0).gpu_constants(),
      v1::GPU_CONSTANTS_ASSUMED);
}

TEST(MemoryModel, UncertainBytesWidenTheUpperBoundOnlyAndShowApart) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  const FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate settled = CalibratedEstimate(*replay, gpu, calibration, 0);
  replay->uncertain_bytes = 64 * MiB;
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 0);
  EXPECT_EQ(m.point_bytes(), settled.point_bytes());
  EXPECT_NEAR(m.upper_bytes(), settled.upper_bytes() + 1.5 * 64 * MiB, 1);
  EXPECT_EQ(m.uncertain_bytes(), 64 * MiB);
  EXPECT_NEAR(m.breakdown().uncertain_layers_bytes(), 1.5 * 64 * MiB, 1);
  EXPECT_EQ(m.breakdown().calibration_bytes(), settled.breakdown().calibration_bytes());
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
}

TEST(MemoryModel, ConvTermAddsToTheUpperBoundOnlyAndShowsAsCalibration) {
  const v1::EstimateRequest request = MlpRequest(true);
  const core::GpuProfile gpu = Card(40960);
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  FamilyCalibration calibration{100, 1.5, 50, 1.1};
  const v1::MemoryEstimate plain = CalibratedEstimate(*replay, gpu, calibration, 300);
  calibration.conv_output_factor = 2.5;
  const v1::MemoryEstimate m = CalibratedEstimate(*replay, gpu, calibration, 300);
  EXPECT_EQ(m.point_bytes(), plain.point_bytes());
  EXPECT_EQ(m.upper_bytes(), plain.upper_bytes() + 750 * MiB);
  EXPECT_EQ(m.breakdown().calibration_bytes(),
            plain.breakdown().calibration_bytes() + 750 * MiB);
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  // What the allocator may hold on the card shrinks by the same amount, over the factor.
  EXPECT_EQ(AllocatorCapacity(Card(4000), {1000, 2.0, 0, 1.0, 2.5}, 100),
            (1000 - 125) * MiB);
}

TEST(MemoryModel, LargestConvOutputIsPerBatchAndNeverWraps) {
  v1::ModelDescription model;
  model.set_batch_size(8);
  v1::Layer* conv = model.add_layers();
  conv->set_type("Conv2d");
  conv->set_output_activations(64 * 56 * 56);
  v1::Layer* bigger = model.add_layers();
  bigger->set_type("Linear");
  bigger->set_output_activations(1 << 30);  // Not a convolution: not counted.
  model.add_layers()->set_type("Conv2d");
  EXPECT_DOUBLE_EQ(LargestConvOutputMib(model), 4.0 * 64 * 56 * 56 * 8 / MiB);
  // 2^62 activations x 2^30 samples x 4 bytes: far beyond 2^64 bytes, still growing.
  conv->set_output_activations(int64_t{1} << 62);
  model.set_batch_size(1 << 30);
  EXPECT_GT(LargestConvOutputMib(model), 1e19 / MiB);
  FamilyCalibration calibration{0, 1, 0, 1, 1};
  ReplayResult replay;
  EXPECT_EQ(
      CalibratedEstimate(replay, Card(40960), calibration, LargestConvOutputMib(model))
          .upper_bytes(),
      UINT64_MAX);
}

TEST(MemoryModel, AllocatorCapacityIsWhatTheSafeEstimateLeaves) {
  const FamilyCalibration calibration{1000, 2.0, 0, 1.0};
  // (4000 - 1000 context - 1000 intercept) / 2.
  EXPECT_EQ(AllocatorCapacity(Card(4000), calibration, 0), 1000 * MiB);
  EXPECT_EQ(AllocatorCapacity(Card(1500), calibration, 0), 1u);  // Nothing left: not 0.
}

TEST(SimulationEstimator, ReplaysTheRequestsTrace) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->Info().kind(), v1::ESTIMATOR_KIND_SIMULATOR);
  EXPECT_DOUBLE_EQ((*e)->Info().training_metrics().at("mlp_held_out_safe_and_tight"),
                   0.9);
  const core::GpuProfile gpu = Card(40960);
  const v1::EstimateRequest request = MlpRequest(true);
  const v1::FeatureVector features = core::FeaturesOf(request);
  EXPECT_TRUE((*e)->AppliesTo({request, features, gpu}));
  const v1::EstimateRequest layers_only = MlpRequest(false);
  const v1::FeatureVector layer_features = core::FeaturesOf(layers_only);
  EXPECT_FALSE((*e)->AppliesTo({layers_only, layer_features, gpu}));

  const Outcome run = EstimateWith(**e, request, gpu);
  ASSERT_TRUE(run.status.ok()) << run.status;
  auto replay = SimulatePeak(request.model().trace(), gpu, {}, 2);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(run.result.memory().upper_bytes(),
            CalibratedEstimate(*replay, gpu, {100, 1.5, 100, 1.1}, 0).upper_bytes());
  // PyTorch's own figures of the simulated step, as fields (what LLM tools compare).
  EXPECT_EQ(run.result.memory().allocated_peak_bytes(), replay->peak_allocated_bytes);
  EXPECT_EQ(run.result.memory().reserved_peak_bytes(), replay->peak_reserved_bytes);
  EXPECT_GT(run.result.memory().reserved_peak_bytes(), 0u);
  EXPECT_DOUBLE_EQ(run.result.confidence(), 0.9);
  EXPECT_TRUE(absl::StrContains(run.result.basis(), "the request's trace"))
      << run.result.basis();
  EXPECT_TRUE(run.warnings.empty());
}

TEST(SimulationEstimator, AnalyticBuildsTheStepFromTheLayers) {
  auto analytic = Create(Manifest("layers"));
  auto traced = Create(Manifest("request"));
  ASSERT_TRUE(analytic.ok() && traced.ok());
  const core::GpuProfile gpu = Card(40960);
  const v1::EstimateRequest layers_only = MlpRequest(false);
  const v1::FeatureVector features = core::FeaturesOf(layers_only);
  ASSERT_TRUE((*analytic)->AppliesTo({layers_only, features, gpu}));
  // The same step as the trace TraceFromLayers makes, so the same answer.
  const Outcome from_layers = EstimateWith(**analytic, layers_only, gpu);
  const Outcome from_trace = EstimateWith(**traced, MlpRequest(true), gpu);
  ASSERT_TRUE(from_layers.status.ok() && from_trace.status.ok());
  EXPECT_EQ(from_layers.result.memory().upper_bytes(),
            from_trace.result.memory().upper_bytes());
  // With small activations, the peak is Adam's first step: every gradient alive.
  const v1::MemoryBreakdown& b = from_layers.result.memory().breakdown();
  EXPECT_EQ(b.gradients_bytes(), b.weights_bytes());
  EXPECT_EQ(b.optimizer_state_bytes(), 2 * b.weights_bytes());
}

TEST(SimulationEstimator, UncertainLayersWidenThisJobsBoundAndAreNamed) {
  auto analytic = Create(Manifest("layers"));
  ASSERT_TRUE(analytic.ok());
  const core::GpuProfile gpu = Card(40960);
  const Outcome explained = EstimateWith(**analytic, MlpRequest(false), gpu);
  ASSERT_TRUE(explained.status.ok());
  EXPECT_EQ(explained.result.memory().uncertain_layers_size(), 0);
  EXPECT_EQ(explained.result.memory().breakdown().uncertain_layers_bytes(), 0u);
  EXPECT_NE(explained.result.basis().find("explain every layer"), std::string::npos);

  v1::EstimateRequest request = MlpRequest(false);
  request.mutable_model()->mutable_layers(1)->set_type("MysteryAct");
  request.mutable_model()->mutable_layers(1)->set_name("body.act");
  const Outcome run = EstimateWith(**analytic, request, gpu);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const v1::MemoryEstimate& m = run.result.memory();
  ASSERT_EQ(m.uncertain_layers_size(), 1);
  EXPECT_EQ(m.uncertain_layers(0).type(), "MysteryAct");
  EXPECT_EQ(m.uncertain_layers(0).uncertainty(), v1::UNCERTAINTY_UNKNOWN_TYPE);
  EXPECT_EQ(m.uncertain_bytes(), 64u * 1024 * 4);  // Its output, at batch 64.
  EXPECT_GT(m.breakdown().uncertain_layers_bytes(), m.uncertain_bytes() - 1);
  EXPECT_EQ(Sum(m.breakdown()), m.upper_bytes());
  EXPECT_NE(run.result.basis().find("MysteryAct x1 (type not in the layer table, first "
                                    "body.act)"),
            std::string::npos)
      << run.result.basis();
}

TEST(SimulationEstimator, WarnsWhereItsNumbersRestOnLess) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok());
  v1::EstimateRequest cnn = MlpRequest(true);
  cnn.mutable_model()->set_family(v1::MODEL_FAMILY_CNN);  // No CNN calibration here.
  const Outcome uncalibrated = EstimateWith(**e, cnn, Card(40960, false));
  ASSERT_TRUE(uncalibrated.status.ok()) << uncalibrated.status;
  EXPECT_TRUE(HasWarning(uncalibrated, v1::WARNING_CODE_UNCALIBRATED_FAMILY));
  // Uncalibrated is out of its distribution; assumed GPU constants are not.
  EXPECT_FALSE(uncalibrated.result.in_distribution());
  EXPECT_TRUE(absl::StrContains(uncalibrated.result.basis(), "most conservative"))
      << uncalibrated.result.basis();
  EXPECT_TRUE(HasWarning(uncalibrated, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS));
  // The held-out rate stands for the calibrated GPU only.
  const Outcome assumed = EstimateWith(**e, MlpRequest(true), Card(40960, false));
  EXPECT_DOUBLE_EQ(assumed.result.confidence(), 0.45);
  EXPECT_TRUE(assumed.result.in_distribution());
}

// A bound is a bound: near the card's capacity the upper bound is the step's need,
// not the card's size, and whether the allocator's retry saves the job is said apart.
TEST(SimulationEstimator, AnUpperBoundJustAboveTheCardIsNotCapped) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok());
  const v1::EstimateRequest request = testing::CacheHungryStep(400 * MiB);
  const Outcome roomy = EstimateWith(**e, request, Card(40960));
  ASSERT_TRUE(roomy.status.ok()) << roomy.status;
  const uint64_t upper = roomy.result.memory().upper_bytes();
  EXPECT_EQ(roomy.result.memory().allocator_retry(), v1::ALLOCATOR_RETRY_NOT_NEEDED);
  EXPECT_FALSE(HasWarning(roomy, v1::WARNING_CODE_ALLOCATOR_RETRIES));

  // A card at most a MiB below the upper bound.
  const core::GpuProfile card = Card((upper - 1) / MiB);
  ASSERT_LT(card.memory_bytes, upper);
  ASSERT_GE(card.memory_bytes + MiB, upper);
  const Outcome tight = EstimateWith(**e, request, card);
  ASSERT_TRUE(tight.status.ok()) << tight.status;
  const v1::MemoryEstimate& m = tight.result.memory();
  EXPECT_EQ(m.upper_bytes(), upper);
  EXPECT_GT(m.upper_bytes(), card.memory_bytes);
  EXPECT_EQ(m.point_bytes(), roomy.result.memory().point_bytes());
  EXPECT_EQ(Sum(m.breakdown()), upper);
  EXPECT_EQ(m.breakdown().fragmentation_bytes(),
            roomy.result.memory().breakdown().fragmentation_bytes());
  EXPECT_EQ(m.allocator_retry(), v1::ALLOCATOR_RETRY_SAVES_IT);
  ASSERT_TRUE(HasWarning(tight, v1::WARNING_CODE_ALLOCATOR_RETRIES));
  for (const v1::Warning& w : tight.warnings) {
    if (w.code() != v1::WARNING_CODE_ALLOCATOR_RETRIES) continue;
    EXPECT_FALSE(absl::StrContains(w.message(), "fits")) << w.message();
    EXPECT_TRUE(absl::StrContains(w.message(), "exceeds card")) << w.message();
  }
  // The fit a scheduler reads: does not fit, and the retry verdict beside it.
  google::protobuf::RepeatedPtrField<v1::EstimatorResult> results;
  *results.Add() = tight.result;
  const std::optional<v1::Recommendation> rec = core::Recommend(results, &card);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->memory_bytes(), upper);
  EXPECT_FALSE(rec->fit().fits());
  EXPECT_LT(rec->fit().headroom_bytes(), 0);
  EXPECT_EQ(rec->fit().allocator_retry(), v1::ALLOCATOR_RETRY_SAVES_IT);

  // Where even the released cache leaves too little (the step needs about 430 MiB of
  // the allocator; this card leaves it 300), the retry does not save it.
  const Outcome small = EstimateWith(**e, request, Card(1100 + 450));
  ASSERT_TRUE(small.status.ok()) << small.status;
  EXPECT_EQ(small.result.memory().upper_bytes(), upper);
  EXPECT_EQ(small.result.memory().allocator_retry(),
            v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT);
  EXPECT_FALSE(HasWarning(small, v1::WARNING_CODE_ALLOCATOR_RETRIES));
}

TEST(SimulationEstimator, SaysWhenTheStepCannotFitTheCard) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok());
  const v1::EstimateRequest request = MlpRequest(true);
  const Outcome roomy = EstimateWith(**e, request, Card(40960));
  ASSERT_TRUE(roomy.status.ok());
  EXPECT_FALSE(absl::StrContains(roomy.result.basis(), "does not fit"));
  // 10 MiB beyond context and intercept: less than the 12 MiB of weights.
  const Outcome tiny = EstimateWith(**e, request, Card(1110));
  ASSERT_TRUE(tiny.status.ok()) << tiny.status;
  EXPECT_TRUE(absl::StrContains(tiny.result.basis(), "does not fit"))
      << tiny.result.basis();
  // The figure is still the whole step's need, not the card.
  EXPECT_EQ(tiny.result.memory().upper_bytes(), roomy.result.memory().upper_bytes());
  EXPECT_EQ(tiny.result.memory().allocator_retry(), v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT);
  EXPECT_EQ(roomy.result.memory().allocator_retry(), v1::ALLOCATOR_RETRY_NOT_NEEDED);
}

// cudnn.benchmark's first-iteration workspace search is a transient beside the
// requirement: a job with convolutions that sets it, or does not say (the common
// image-training scripts set it), gets it as a field and a warning, from both
// simulators; the requirement itself is the same figure either way.
TEST(SimulationEstimator, SeparatesCudnnBenchmarksTransientFromTheRequirement) {
  auto traced = Create(Manifest("request"));
  auto analytic = Create(Manifest("layers"));
  ASSERT_TRUE(traced.ok() && analytic.ok());
  v1::EstimateRequest conv = MlpRequest(true);
  v1::Layer& c = *conv.mutable_model()->add_layers();
  c.set_type("conv2d");  // Any spelling of a convolution.
  c.set_output_activations(1024);
  c.set_parameters(4 * 9 + 4);
  v1::EstimateRequest conv_layers = conv;
  conv_layers.mutable_model()->clear_trace();

  const core::GpuProfile gpu = Card(40960);
  conv.mutable_model()->set_cudnn_benchmark(false);
  const Outcome off = EstimateWith(**traced, conv, gpu);
  ASSERT_TRUE(off.status.ok()) << off.status;
  EXPECT_FALSE(HasWarning(off, v1::WARNING_CODE_CUDNN_BENCHMARK_TRANSIENT));
  EXPECT_FALSE(off.result.memory().has_transient());
  for (bool declared : {false, true}) {
    if (declared) {
      conv.mutable_model()->set_cudnn_benchmark(true);
      conv_layers.mutable_model()->set_cudnn_benchmark(true);
    } else {
      conv.mutable_model()->clear_cudnn_benchmark();  // Not recorded: assumed on.
      conv_layers.mutable_model()->clear_cudnn_benchmark();
    }
    for (const Outcome& run : {EstimateWith(**traced, conv, gpu),
                               EstimateWith(**analytic, conv_layers, gpu)}) {
      ASSERT_TRUE(run.status.ok()) << run.status;
      const v1::MemoryTransient& t = run.result.memory().transient();
      EXPECT_EQ(t.cause(), v1::TRANSIENT_CAUSE_CUDNN_BENCHMARK);
      EXPECT_EQ(t.reach_bytes(), gpu.memory_bytes);  // Up to the card's free memory.
      EXPECT_EQ(t.declared(), declared);
      EXPECT_TRUE(absl::StrContains(t.known_size(), "h200-benchmark-mode"));
      ASSERT_TRUE(HasWarning(run, v1::WARNING_CODE_CUDNN_BENCHMARK_TRANSIENT));
      for (const v1::Warning& w : run.warnings) {
        if (w.code() != v1::WARNING_CODE_CUDNN_BENCHMARK_TRANSIENT) continue;
        EXPECT_EQ(w.estimator_id(), "sim");
        for (const char* says : {"free memory", "capped", "cudnn.benchmark = False"}) {
          EXPECT_TRUE(absl::StrContains(w.message(), says))
              << says << ": " << w.message();
        }
      }
    }
  }
  // The requirement does not change with the setting: the transient is apart from it.
  EXPECT_EQ(EstimateWith(**traced, conv, gpu).result.memory().upper_bytes(),
            off.result.memory().upper_bytes());
  // Without a convolution there is no cuDNN convolution to benchmark.
  v1::EstimateRequest mlp = MlpRequest(true);
  mlp.mutable_model()->set_cudnn_benchmark(true);
  EXPECT_FALSE(HasWarning(EstimateWith(**traced, mlp, gpu),
                          v1::WARNING_CODE_CUDNN_BENCHMARK_TRANSIENT));
}

TEST(SimulationEstimator, HonoursTheJobsAllocatorSettings) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok());
  v1::EstimateRequest request = MlpRequest(true);
  const Outcome defaults = EstimateWith(**e, request, Card(40960));
  request.mutable_model()->mutable_allocator()->set_expandable_segments(true);
  const Outcome expandable = EstimateWith(**e, request, Card(40960));
  ASSERT_TRUE(defaults.status.ok() && expandable.status.ok());
  // Strictly less: equal would also be what ignoring the setting gives.
  EXPECT_LT(expandable.result.memory().breakdown().fragmentation_bytes(),
            defaults.result.memory().breakdown().fragmentation_bytes());
}

// The response carries how the bound fared on runs its calibration never saw, and a
// bound that held on fewer of them than it is fitted for (safe_quantile) says so.
TEST(SimulationEstimator, SaysHowOftenItsBoundHeldOnUnseenRuns) {
  const std::string terms = R"("intercept_mib": 100,
  "safe_factor": 1.5, "point_intercept_mib": 100, "point_factor": 1.1,
  "held_out_rows": 10, "held_out_mape": 5.0, "held_out_safe": 1.0,
  "held_out_safe_and_tight": 0.9, "unseen_architecture_rows": 200,
  "unseen_architecture_mape": 30.0, "unseen_architecture_safe": )";
  auto below = Create(
      Manifest("request", terms + R"(0.9, "unseen_architecture_safe_and_tight": 0.2)"));
  ASSERT_TRUE(below.ok()) << below.status();
  EXPECT_DOUBLE_EQ((*below)->Info().training_metrics().at("mlp_unseen_architecture_safe"),
                   0.9);
  const Outcome run = EstimateWith(**below, MlpRequest(true), Card(40960));
  ASSERT_TRUE(run.status.ok()) << run.status;
  const auto& validations = run.result.memory().upper_validation();
  ASSERT_EQ(validations.size(), 2);
  EXPECT_EQ(validations[0].runs(), 10);
  EXPECT_DOUBLE_EQ(validations[0].safe_share(), 1.0);
  EXPECT_TRUE(absl::StrContains(validations[0].population(), "held-out"));
  EXPECT_EQ(validations[1].runs(), 200);
  EXPECT_DOUBLE_EQ(validations[1].safe_share(), 0.9);
  EXPECT_DOUBLE_EQ(validations[1].safe_and_tight_share(), 0.2);
  EXPECT_DOUBLE_EQ(validations[1].target_safe_share(), 0.95);
  EXPECT_TRUE(absl::StrContains(validations[1].population(), "architecture group"));
  int below_target = 0;
  for (const v1::Warning& w : run.warnings) {
    if (w.code() != v1::WARNING_CODE_BOUND_BELOW_TARGET) continue;
    ++below_target;
    EXPECT_TRUE(absl::StrContains(w.message(), "90.0 % of 200")) << w.message();
    EXPECT_EQ(w.estimator_id(), "sim");
  }
  EXPECT_EQ(below_target, 1);  // The held-out split's 100 % is no reason to warn.

  auto at_target = Create(
      Manifest("request", terms + R"(0.95, "unseen_architecture_safe_and_tight": 0.6)"));
  ASSERT_TRUE(at_target.ok()) << at_target.status();
  const Outcome fine = EstimateWith(**at_target, MlpRequest(true), Card(40960));
  EXPECT_FALSE(HasWarning(fine, v1::WARNING_CODE_BOUND_BELOW_TARGET));
  EXPECT_EQ(fine.result.memory().upper_validation_size(), 2);

  // Scores are all there or all absent, and shares are shares.
  auto partial = Create(Manifest("request", terms + "0.9"));
  EXPECT_TRUE(
      absl::StrContains(partial.status().message(), "unseen_architecture_safe_and_tight"))
      << partial.status();
  auto share = Create(
      Manifest("request", terms + R"(1.5, "unseen_architecture_safe_and_tight": 0.2)"));
  EXPECT_TRUE(absl::StrContains(share.status().message(), "unseen_architecture_safe"))
      << share.status();
  EXPECT_FALSE(share.ok());
}

// A GPU's own terms (calibration.by_gpu) serve that GPU's requests, family by family; a
// family they do not cover, and every other GPU, keep the calibrated GPU's terms.
TEST(SimulationEstimator, ServesAGpusOwnTermsForThatGpuOnly) {
  const std::string manifest =
      absl::StrReplaceAll(Manifest("request"),
                          {{R"("datasets": []}}}})",
                            R"("datasets": []}}, "by_gpu": {"own": {"context_mib": 1000.0,
  "made_by": "this test", "families": {"mlp": {"intercept_mib": 0, "safe_factor": 1.0,
  "point_intercept_mib": 0, "point_factor": 1.0, "unseen_architecture_rows": 40,
  "unseen_architecture_mape": 4.0, "unseen_architecture_safe": 0.97,
  "unseen_architecture_safe_and_tight": 0.9, "datasets": []}}}}}})"}});
  auto e = Create(manifest);
  ASSERT_TRUE(e.ok()) << e.status();
  core::GpuProfile own = Card(40960);
  own.id = "own";
  const Outcome on_own = EstimateWith(**e, MlpRequest(true), own);
  const Outcome elsewhere = EstimateWith(**e, MlpRequest(true), Card(40960));
  ASSERT_TRUE(on_own.status.ok()) << on_own.status;
  ASSERT_TRUE(elsewhere.status.ok()) << elsewhere.status;
  const v1::MemoryEstimate& m = on_own.result.memory();
  // Its terms: context + 1.0 x the simulated reserved peak, nothing more.
  EXPECT_EQ(m.upper_bytes(), own.context_bytes + m.reserved_peak_bytes());
  EXPECT_GT(elsewhere.result.memory().upper_bytes(), m.upper_bytes());
  EXPECT_TRUE(
      absl::StrContains(on_own.result.basis(), "fitted on clean runs on that GPU"))
      << on_own.result.basis();
  ASSERT_EQ(m.upper_validation_size(), 1);
  EXPECT_EQ(m.upper_validation(0).runs(), 40);
  EXPECT_TRUE(absl::StrContains(m.upper_validation(0).population(), "clean runs"));
  EXPECT_DOUBLE_EQ(on_own.result.confidence(), 0.9);

  // An unknown family among a GPU's terms is refused by name.
  auto bad = Create(
      absl::StrReplaceAll(manifest, {{R"("families": {"mlp": {"intercept_mib": 0)",
                                      R"("families": {"rnn": {"intercept_mib": 0)"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "by_gpu.own")) << bad.status();
}

// A family's terms measured on its models without a convolution serve those models
// only: a step without one runs no cuDNN convolution (no workspace, no benchmark search).
// A GPU's own terms for the family still come first on that GPU.
TEST(SimulationEstimator, GivesAModelWithoutConvolutionsTheTermsMeasuredWithoutThem) {
  const std::string terms = R"("point_intercept_mib": 0, "point_factor": 1.0,
  "datasets": []})";
  const std::string manifest = absl::StrReplaceAll(
      Manifest("request"),
      {{R"("datasets": []}}}})",
        absl::StrCat(R"("datasets": []}, "transformer": {"intercept_mib": 500,
  "safe_factor": 1.5, )",
                     terms, R"(, "transformer-without-convolutions": {"intercept_mib": 0,
  "safe_factor": 1.0, )",
                     terms, R"(}, "by_gpu": {"own": {"context_mib": 1000.0,
  "made_by": "this test", "families": {"transformer": {"intercept_mib": 100,
  "safe_factor": 1.2, )",
                     terms, R"(}}}}})")}});
  auto e = Create(manifest);
  ASSERT_TRUE(e.ok()) << e.status();
  const core::GpuProfile card = Card(40960);
  const Outcome without = EstimateWith(**e, TransformerRequest(false), card);
  const Outcome with = EstimateWith(**e, TransformerRequest(true), card);
  ASSERT_TRUE(without.status.ok()) << without.status;
  ASSERT_TRUE(with.status.ok()) << with.status;
  const v1::MemoryEstimate& apart = without.result.memory();
  EXPECT_EQ(apart.upper_bytes(), card.context_bytes + apart.reserved_peak_bytes());
  EXPECT_TRUE(absl::StrContains(without.result.basis(),
                                "the transformer (without convolutions) calibration"))
      << without.result.basis();
  const v1::MemoryEstimate& family = with.result.memory();
  EXPECT_GE(family.upper_bytes(),
            card.context_bytes + 500 * MiB + 1.5 * family.reserved_peak_bytes());
  EXPECT_TRUE(absl::StrContains(with.result.basis(), "the transformer calibration"))
      << with.result.basis();
  EXPECT_TRUE(without.result.in_distribution());
  EXPECT_TRUE(with.result.in_distribution());

  core::GpuProfile own = card;
  own.id = "own";
  const Outcome on_own = EstimateWith(**e, TransformerRequest(false), own);
  ASSERT_TRUE(on_own.status.ok()) << on_own.status;
  EXPECT_TRUE(absl::StrContains(on_own.result.basis(),
                                "own transformer (fitted on clean runs on that GPU)"))
      << on_own.result.basis();
}

// An MLP with a convolution in front whose trace (built from its layers) holds no
// workspace, as an older describer's; with_workspace appends one 4 GiB cuDNN workspace,
// held alone after the step, as gpuest.describe now writes them.
v1::EstimateRequest ConvMlpRequest(bool with_workspace) {
  v1::EstimateRequest r = RequestFor("conv-mlp", v1::MODEL_FAMILY_MLP, 64, 1024);
  v1::ModelDescription& m = *r.mutable_model();
  AddLayer(m, "Conv2d", 1024, 1024);
  AddLayer(m, "Linear", 1024, 1024 * 1024 + 1024);
  *m.mutable_trace() = TraceFromLayers(m);
  if (with_workspace) {
    v1::AllocationTrace& t = *m.mutable_trace();
    uint32_t last = 0;
    for (int i = 0; i < t.size_bytes_size(); ++i) {
      last = std::max({last, t.alloc_at(i), t.free_at(i)});
    }
    t.add_size_bytes(4096 * MiB);
    t.add_alloc_at(last + 1);
    t.add_free_at(last + 2);
    t.add_category(v1::ALLOCATION_CATEGORY_WORKSPACE);
  }
  return r;
}

TEST(SimulationEstimator, SimulatesTracedWorkspacesAndStandsInWhereATraceHasNone) {
  auto e = Create(Manifest("request", R"("intercept_mib": 0, "safe_factor": 1.0,
  "point_intercept_mib": 0, "point_factor": 1.0, "held_out_rows": 10,
  "held_out_mape": 5.0, "held_out_safe": 1.0, "held_out_safe_and_tight": 0.9)"));
  ASSERT_TRUE(e.ok()) << e.status();
  const core::GpuProfile card = Card(40960);
  const Outcome older = EstimateWith(**e, ConvMlpRequest(false), card);
  const Outcome traced = EstimateWith(**e, ConvMlpRequest(true), card);
  ASSERT_TRUE(older.status.ok()) << older.status;
  ASSERT_TRUE(traced.status.ok()) << traced.status;

  // The older trace: the stand-in, three largest convolution outputs, shown and warned.
  const v1::MemoryEstimate& o = older.result.memory();
  const double conv_mib = LargestConvOutputMib(ConvMlpRequest(false).model());
  EXPECT_NEAR(static_cast<double>(o.upper_bytes()),
              static_cast<double>(card.context_bytes + o.reserved_peak_bytes()) +
                  kUntracedWorkspacePerConvOutput * conv_mib * MiB,
              1.0);
  EXPECT_TRUE(HasWarning(older, v1::WARNING_CODE_TRACE_CAVEAT));
  EXPECT_EQ(o.breakdown().workspaces_bytes(), 0u);

  // The traced workspace is simulated where it happens, and nothing stands in for it.
  const v1::MemoryEstimate& t = traced.result.memory();
  EXPECT_FALSE(HasWarning(traced, v1::WARNING_CODE_TRACE_CAVEAT));
  EXPECT_EQ(t.breakdown().workspaces_bytes(), 4096 * MiB);
  EXPECT_GE(t.reserved_peak_bytes(), 4096 * MiB);
  EXPECT_EQ(t.upper_bytes(), card.context_bytes + t.reserved_peak_bytes());
  EXPECT_EQ(Sum(t.breakdown()), t.upper_bytes());
  EXPECT_TRUE(absl::StrContains(traced.result.basis(),
                                "1 cuDNN convolution workspaces simulated"))
      << traced.result.basis();
}

TEST(SimulationEstimator, RejectsABadManifestByName) {
  auto source = Create(Manifest("guess"));
  EXPECT_TRUE(absl::StrContains(source.status().message(), "trace_source"))
      << source.status();
  EXPECT_TRUE(absl::StrContains(source.status().message(), "/models/sim/manifest.json"));
  auto factor = Create(Manifest(
      "request", R"("intercept_mib": 0, "safe_factor": 0.5, "point_intercept_mib": 0,
  "point_factor": 1.0)"));
  EXPECT_TRUE(absl::StrContains(factor.status().message(), "safe_factor"))
      << factor.status();
  auto family =
      Create(absl::StrReplaceAll(Manifest("request"), {{"\"mlp\"", "\"rnn\""}}));
  EXPECT_TRUE(absl::StrContains(family.status().message(), "rnn")) << family.status();
  EXPECT_FALSE(Create("{").ok());
}

// The population, not the optimizer, chooses the terms (population.h): GPUMemNet's
// generated networks keep terms of their own; a real model gets the real models' terms
// with any optimizer, and its bound moves with the optimizer's state its trace holds.
TEST(SimulationEstimator, ThePopulationNotTheOptimizerChoosesTheTerms) {
  const std::string terms = R"("point_intercept_mib": 0, "point_factor": 1.0,
  "datasets": []})";
  const std::string manifest = absl::StrReplaceAll(
      Manifest("request"),
      {{R"("datasets": []}}}})",
        absl::StrCat(R"("datasets": []}, "transformer": {"intercept_mib": 0,
  "safe_factor": 1.0, )",
                     terms,
                     R"(, "transformer-synthetic": {"intercept_mib": 400,
  "safe_factor": 1.5, )",
                     terms, R"(}}})")}});
  auto e = Create(manifest);
  ASSERT_TRUE(e.ok()) << e.status();
  const core::GpuProfile card = Card(40960);
  v1::EstimateRequest sgd = TransformerRequest(true);
  sgd.mutable_model()->set_model_source(
      "torchvision.models.vision_transformer:VisionTransformer");
  sgd.mutable_model()->set_optimizer(v1::OPTIMIZER_SGD_MOMENTUM);
  *sgd.mutable_model()->mutable_trace() = TraceFromLayers(sgd.model());
  v1::EstimateRequest adam = sgd;
  adam.mutable_model()->set_optimizer(v1::OPTIMIZER_ADAM);
  *adam.mutable_model()->mutable_trace() = TraceFromLayers(adam.model());
  const Outcome real_sgd = EstimateWith(**e, sgd, card);
  const Outcome real_adam = EstimateWith(**e, adam, card);
  ASSERT_TRUE(real_sgd.status.ok() && real_adam.status.ok()) << real_sgd.status;
  // Its trace holds no workspace for its convolution: the stand-in is the one term, with
  // either optimizer; the bounds differ by the reserved peak the trace gives, no more.
  const double stand_in =
      kUntracedWorkspacePerConvOutput * LargestConvOutputMib(sgd.model()) * MiB;
  for (const Outcome* run : {&real_sgd, &real_adam}) {
    EXPECT_NEAR(static_cast<double>(run->result.memory().upper_bytes()),
                static_cast<double>(card.context_bytes +
                                    run->result.memory().reserved_peak_bytes()) +
                    stand_in,
                1.0);
    EXPECT_TRUE(absl::StrContains(run->result.basis(), "the transformer calibration"))
        << run->result.basis();
    EXPECT_TRUE(absl::StrContains(run->result.basis(), "real: a named torchvision model"))
        << run->result.basis();
  }
  EXPECT_GT(real_adam.result.memory().reserved_peak_bytes(),
            real_sgd.result.memory().reserved_peak_bytes());
  // Each mechanism is named: the state in the step, the terms by what they cover.
  EXPECT_TRUE(absl::StrContains(real_adam.result.basis(),
                                "in the step, so in no term: the optimizer's state ("))
      << real_adam.result.basis();
  EXPECT_TRUE(absl::StrContains(real_adam.result.basis(), "OPTIMIZER_ADAM"));
  EXPECT_TRUE(absl::StrContains(real_adam.result.basis(),
                                "x1.000 (the allocator's reserve beyond the simulated"))
      << real_adam.result.basis();

  // GPUMemNet's generator's model gets its population's terms, with SGD too.
  v1::EstimateRequest generated = sgd;
  generated.mutable_model()->set_model_source("gpuest.synthetic.transformer:Model");
  const Outcome synthetic = EstimateWith(**e, generated, card);
  ASSERT_TRUE(synthetic.status.ok()) << synthetic.status;
  EXPECT_GE(synthetic.result.memory().upper_bytes(),
            card.context_bytes + 400 * MiB +
                1.5 * synthetic.result.memory().reserved_peak_bytes());
  EXPECT_TRUE(absl::StrContains(synthetic.result.basis(),
                                "transformer (GPUMemNet's generated networks)"))
      << synthetic.result.basis();
  // Without model_source: the generator's configuration string as its name tells;
  // anything else is taken as real, and the answer says it assumed so.
  v1::EstimateRequest unsaid = sgd;
  unsaid.mutable_model()->clear_model_source();
  unsaid.mutable_model()->set_name(
      "input_channels:3_num_classes:10_depth:4_arch:pyramid_base_filters:8_batch:32");
  EXPECT_EQ(EstimateWith(**e, unsaid, card).result.memory().upper_bytes(),
            synthetic.result.memory().upper_bytes());
  unsaid.mutable_model()->set_name("my_net");
  const Outcome assumed = EstimateWith(**e, unsaid, card);
  EXPECT_EQ(assumed.result.memory().upper_bytes(),
            real_sgd.result.memory().upper_bytes());
  EXPECT_TRUE(absl::StrContains(assumed.result.basis(), "real, assumed"))
      << assumed.result.basis();

  // The key round-trips through the manifest; a manifest written when these terms
  // were chosen by the optimizer reads as the same population.
  auto parsed = SimulationManifest::Parse(manifest, "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(absl::StrContains(parsed->Text(), "\"transformer-synthetic\""));
  auto before = SimulationManifest::Parse(
      absl::StrReplaceAll(
          manifest, {{"transformer-synthetic", "transformer-with-two-moment-optimizer"}}),
      "m");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->Text(), parsed->Text());
}

namespace context_choice {

core::GpuProfile Measured() {
  core::GpuProfile gpu = Card(81559);
  gpu.context_bytes = 1429 * MiB;  // The profile's own figure, for rule 4.
  gpu.contexts = {{13, "2.11", "LAZY", 758 * MiB, "lease A", ""},
                  {13, "2.11", "EAGER", 2052 * MiB, "lease A", ""}};
  return gpu;
}

v1::ModelDescription Job(uint32_t cuda_major, const char* loading,
                         const char* torch = "2.11.0") {
  v1::ModelDescription m;
  m.set_framework_version(torch);
  m.mutable_stack()->set_cuda_major(cuda_major);
  m.mutable_stack()->set_module_loading(loading);
  return m;
}

}  // namespace context_choice

// The context is the stack's: measured on the job's stack it is used as measured, with
// where it came from; on another stack the nearest with its margin and a warning.
TEST(StackContext, TheJobsStackChoosesTheMeasuredContext) {
  using context_choice::Job;
  const core::GpuProfile gpu = context_choice::Measured();
  core::ContextChoice c = core::ChooseContext(gpu, Job(13, "LAZY"));
  EXPECT_EQ(c.bytes, 758 * MiB);
  EXPECT_TRUE(c.measured);
  EXPECT_TRUE(c.warning.empty());
  EXPECT_TRUE(
      absl::StrContains(c.basis, "the job's stack: 758 MiB measured with CUDA 13"))
      << c.basis;
  EXPECT_EQ(core::ChooseContext(gpu, Job(13, "EAGER")).bytes, 2052 * MiB);
  // An empty module loading is PyTorch's default, lazy.
  EXPECT_EQ(core::ChooseContext(gpu, Job(13, "")).bytes, 758 * MiB);
  // A CPU-only describe: what the GPU's nodes were measured on.
  c = core::ChooseContext(gpu, Job(0, "LAZY"));
  EXPECT_EQ(c.bytes, 758 * MiB);
  EXPECT_TRUE(c.measured);
  EXPECT_TRUE(absl::StrContains(c.basis, "does not record the job's CUDA")) << c.basis;
  // Another CUDA, another torch: the nearest, with the margin, said.
  for (const v1::ModelDescription& other : {Job(12, "LAZY"), Job(13, "LAZY", "2.4.1")}) {
    c = core::ChooseContext(gpu, other);
    EXPECT_EQ(c.bytes, static_cast<uint64_t>(std::llround(758 * MiB * 1.25)));
    EXPECT_FALSE(c.measured);
    EXPECT_TRUE(absl::StrContains(c.warning, "not measured on the job's stack"))
        << c.warning;
    EXPECT_TRUE(absl::StrContains(c.warning, "+25 %")) << c.warning;
  }
  // Eager on a GPU measured lazy only: the lazy figure times the measured ratio.
  core::GpuProfile lazy_only = gpu;
  lazy_only.contexts.pop_back();
  c = core::ChooseContext(lazy_only, Job(13, "EAGER"));
  EXPECT_EQ(c.bytes,
            static_cast<uint64_t>(std::llround(758 * MiB * core::kEagerOverLazy)));
  EXPECT_FALSE(c.warning.empty());
  // Nothing measured on this GPU: what another GPU measured on the job's stack, with
  // the margin, said.
  core::GpuProfile other = gpu;
  other.id = "other";
  other.contexts = {{13, "2.11", "LAZY", 775 * MiB, "lease B", "h200"}};
  c = core::ChooseContext(other, Job(13, "LAZY"));
  EXPECT_EQ(c.bytes, static_cast<uint64_t>(std::llround(775 * MiB * 1.25)));
  EXPECT_FALSE(c.measured);
  EXPECT_TRUE(absl::StrContains(c.warning, "on h200, not on other")) << c.warning;
  // Nothing measured: the profile's own figure, as its constants say.
  core::GpuProfile none = gpu;
  none.contexts.clear();
  c = core::ChooseContext(none, Job(13, "LAZY"));
  EXPECT_EQ(c.bytes, 1429 * MiB);
  EXPECT_TRUE(c.warning.empty());
  EXPECT_EQ(c.basis, "calibrated");
}

// The estimate uses the chosen context: the bound moves by exactly the difference,
// the basis names the measurement, and another stack is warned of.
// A GPU whose only figure was calibrated on one stack (the A100's, on GPUMemNet's
// lazy-loading runs): a job on that stack takes it as it is; a job on another takes it
// as a figure measured on another stack, with the margin and a warning, never silently.
TEST(StackContext, AFigureCalibratedOnOneStackIsWarnedOfForAnother) {
  using context_choice::Job;
  core::GpuProfile gpu = Card(40960);
  gpu.id = "a100";
  gpu.context_bytes = 1429 * MiB;
  gpu.context_stack = core::StackContext{12, "2.4", "LAZY", 0, "", ""};
  core::ContextChoice c = core::ChooseContext(gpu, Job(0, "LAZY", "1.13.0"));
  EXPECT_EQ(c.bytes, 1429 * MiB);
  EXPECT_TRUE(c.warning.empty()) << c.warning;
  EXPECT_TRUE(absl::StrContains(c.basis, "calibrated on the job's stack")) << c.basis;
  c = core::ChooseContext(gpu, Job(12, "LAZY", "2.4.1"));
  EXPECT_EQ(c.bytes, 1429 * MiB);
  EXPECT_TRUE(c.warning.empty()) << c.warning;
  // Eager loading, on a CPU-only describe (CUDA not recorded) or on the job's CUDA.
  for (const uint32_t cuda : {0u, 12u}) {
    c = core::ChooseContext(gpu, Job(cuda, "EAGER", "2.4.1"));
    EXPECT_EQ(c.bytes,
              static_cast<uint64_t>(std::llround(1429 * MiB * core::kEagerOverLazy)));
    EXPECT_FALSE(c.measured);
    EXPECT_TRUE(absl::StrContains(c.warning, "eager module loading")) << c.warning;
    EXPECT_TRUE(absl::StrContains(c.warning, "x2.71 for eager loading")) << c.warning;
  }
  // Another CUDA: the margin.
  c = core::ChooseContext(gpu, Job(13, "LAZY", "2.11.0"));
  EXPECT_EQ(c.bytes, static_cast<uint64_t>(std::llround(1429 * MiB * 1.25)));
  EXPECT_TRUE(absl::StrContains(c.warning, "+25 %")) << c.warning;
  // Through the estimator: the warning travels, and the bound holds the larger context.
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok()) << e.status();
  v1::EstimateRequest lazy = MlpRequest(true);
  lazy.mutable_model()->mutable_stack()->set_module_loading("LAZY");
  v1::EstimateRequest eager = lazy;
  eager.mutable_model()->mutable_stack()->set_module_loading("EAGER");
  const Outcome on_lazy = EstimateWith(**e, lazy, gpu);
  const Outcome on_eager = EstimateWith(**e, eager, gpu);
  ASSERT_TRUE(on_lazy.status.ok() && on_eager.status.ok()) << on_eager.status;
  EXPECT_FALSE(HasWarning(on_lazy, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS));
  EXPECT_TRUE(HasWarning(on_eager, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS));
  EXPECT_EQ(
      on_eager.result.memory().upper_bytes() - on_lazy.result.memory().upper_bytes(),
      static_cast<uint64_t>(std::llround(1429 * MiB * core::kEagerOverLazy)) -
          1429 * MiB);
}

TEST(StackContext, TheEstimateAddsTheJobsStacksContext) {
  auto e = Create(Manifest("request"));
  ASSERT_TRUE(e.ok()) << e.status();
  const core::GpuProfile gpu = context_choice::Measured();
  v1::EstimateRequest lazy = MlpRequest(true);
  *lazy.mutable_model()->mutable_stack() = context_choice::Job(13, "LAZY").stack();
  lazy.mutable_model()->set_framework_version("2.11.0");
  v1::EstimateRequest eager = lazy;
  eager.mutable_model()->mutable_stack()->set_module_loading("EAGER");
  v1::EstimateRequest other = lazy;
  other.mutable_model()->mutable_stack()->set_cuda_major(12);
  const Outcome a = EstimateWith(**e, lazy, gpu);
  const Outcome b = EstimateWith(**e, eager, gpu);
  const Outcome c = EstimateWith(**e, other, gpu);
  ASSERT_TRUE(a.status.ok() && b.status.ok() && c.status.ok()) << a.status;
  EXPECT_EQ(b.result.memory().upper_bytes() - a.result.memory().upper_bytes(),
            (2052 - 758) * MiB);
  EXPECT_TRUE(absl::StrContains(a.result.basis(), "758 MiB measured with CUDA 13"))
      << a.result.basis();
  EXPECT_FALSE(HasWarning(a, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS));
  EXPECT_EQ(a.result.memory().gpu_constants(), v1::GPU_CONSTANTS_CALIBRATED);
  EXPECT_TRUE(HasWarning(c, v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS));
  EXPECT_EQ(c.result.memory().gpu_constants(), v1::GPU_CONSTANTS_ASSUMED);
  EXPECT_GT(c.result.memory().upper_bytes(), a.result.memory().upper_bytes());
}
}  // namespace
}  // namespace gpuest::allocsim
