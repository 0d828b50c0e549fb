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
#include "gtest/gtest.h"
#include "tests/support/traced_steps.h"
#include "tests/unit/estimators/allocsim/simulation_test_requests.h"

namespace gpuest::allocsim {
namespace {

using test_requests::AddLayer;
using test_requests::Card;
using test_requests::Create;
using test_requests::EstimateWith;
using test_requests::HasWarning;
using test_requests::Manifest;
using test_requests::MiB;
using test_requests::MlpRequest;
using test_requests::Outcome;
using test_requests::RequestFor;
using test_requests::Sum;

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

}  // namespace
}  // namespace gpuest::allocsim
