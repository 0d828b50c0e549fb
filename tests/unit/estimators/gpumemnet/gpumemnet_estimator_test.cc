// The served GPUMemNet estimator (estimators/gpumemnet/gpumemnet_estimator.h): the
// shipped models (models/gpumemnet-*), loaded through the registry with the default
// factories, answering real rows of the measured datasets.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "common/model_family.h"
#include "common/units.h"
#include "estimators/core/engine.h"
#include "estimators/default_factories.h"
#include "gtest/gtest.h"
#include "lab/data/measured_rows.h"
#include "tests/support/datasets.h"
#include "tests/support/examples.h"
#include "tests/support/shipped_models.h"

namespace gpuest::gpumemnet {
namespace {

const v1::ModelFamily kFamilies[] = {v1::MODEL_FAMILY_MLP, v1::MODEL_FAMILY_CNN,
                                     v1::MODEL_FAMILY_TRANSFORMER};

class ShippedModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = &testing::ShippedModelSet()->engine(); }

  // Runs one gpumemnet estimator on a request and checks the shape of its answer.
  static v1::EstimatorResult Run(const std::string& id, v1::EstimateRequest request,
                                 std::vector<v1::Warning>* warnings = nullptr) {
    request.add_estimators(id);
    auto response = engine_->Estimate(request);
    EXPECT_TRUE(response.ok()) << id << ": " << response.status();
    if (!response.ok() || response->results_size() != 1) {
      ADD_FAILURE() << id << " gave no result";
      return {};
    }
    if (warnings)
      warnings->assign(response->warnings().begin(), response->warnings().end());
    const v1::EstimatorResult& r = response->results(0);
    EXPECT_EQ(r.kind(), v1::ESTIMATOR_KIND_CLASSIFIER);
    double sum = 0;
    for (const v1::MemoryBin& b : r.memory().bins()) sum += b.probability();
    EXPECT_NEAR(sum, 1.0, 1e-4) << id;
    EXPECT_GT(r.confidence(), 0.0);
    EXPECT_LE(r.confidence(), 1.0);
    for (const v1::UtilizationEstimate& u : r.utilization()) {
      double s = 0;
      for (double p : u.probabilities()) s += p;
      EXPECT_NEAR(s, 1.0, 1e-4) << id << " " << u.metric();
      EXPECT_EQ(u.bin_edges_size(), u.probabilities_size() + 1);
    }
    return r;
  }

  static const core::Engine* engine_;  // The shipped set lives as long as the binary.
};
const core::Engine* ShippedModels::engine_ = nullptr;

TEST_F(ShippedModels, EveryFamilyHasBothKindsWithTheirTargets) {
  const v1::ListEstimatorsResponse list = engine_->ListEstimators();
  for (v1::ModelFamily family : kFamilies) {
    for (const char* kind : {"mlp", "transformer"}) {
      const std::string id = "gpumemnet-" + common::FamilyName(family) + "-" + kind;
      const core::Estimator* e = engine_->registry()->Find(id);
      ASSERT_NE(e, nullptr) << id;
      const v1::EstimatorInfo& info = e->Info();
      EXPECT_EQ(info.family(), family);
      EXPECT_EQ(info.kind(), v1::ESTIMATOR_KIND_CLASSIFIER);
      EXPECT_TRUE(info.estimates_memory());
      EXPECT_FALSE(info.version().empty());
      EXPECT_GT(info.training_metrics().at("memory_accuracy"), 0.5) << id;
      // The Transformer sample has no utilization columns.
      EXPECT_EQ(info.utilization_metrics_size(),
                family == v1::MODEL_FAMILY_TRANSFORMER ? 0 : 4)
          << id;
    }
  }
}

// Real rows of the CSVs: the predicted bin should hold the measured peak, or be next
// to it, for most rows (these include training rows: a check of the plumbing and the
// encoding agreeing with training, not of accuracy, which docs/accuracy.md reports).
TEST_F(ShippedModels, AnswerRealRowsPlausibly) {
  GPUEST_DATASET_OR_SKIP(gpumemnet_dir, "gpumemnet");
  for (const auto& [family, name] : std::map<v1::ModelFamily, std::string>{
           {v1::MODEL_FAMILY_MLP, "mlp"}, {v1::MODEL_FAMILY_CNN, "cnn"}}) {
    auto read = data::ReadGpuMemNetCsv(gpumemnet_dir + "/" + name + ".csv", family);
    ASSERT_TRUE(read.ok()) << read.status();
    const std::vector<data::MeasuredRow>& runs = read->rows;
    for (const char* kind : {"mlp", "transformer"}) {
      const std::string id = "gpumemnet-" + name + "-" + kind;
      int checked = 0, near = 0, oom_rows = 0, oom_top = 0;
      for (size_t i = 0; i < runs.size(); i += runs.size() / 40) {
        const data::MeasuredRow& run = runs[i];
        if (run.model.layers_size() == 0 || (!run.oom && run.peak_mib <= 0)) continue;
        v1::EstimateRequest request;
        *request.mutable_model() = run.model;
        const v1::EstimatorResult r = Run(id, request);
        if (!r.has_memory()) continue;
        const v1::MemoryEstimate& m = r.memory();
        const int top = m.bins_size() - 1;
        const double width = static_cast<double>(m.bins(0).upper_bytes());
        if (run.oom) {
          ++oom_rows;
          oom_top += m.predicted_bin() == top;
          continue;
        }
        ++checked;
        const int truth =
            std::min<int>(top - 1, static_cast<int>(run.peak_mib * common::kMiB / width));
        near += std::abs(m.predicted_bin() - truth) <= 1;
        // The point estimate lies in the predicted bin.
        if (m.predicted_bin() < top) {
          EXPECT_GE(m.point_bytes(), m.bins(m.predicted_bin()).lower_bytes());
          EXPECT_LT(m.point_bytes(), m.upper_bytes());
        }
      }
      ASSERT_GT(checked, 20) << id;
      EXPECT_GE(near, checked * 8 / 10) << id << ": " << near << "/" << checked;
      // The MLP dataset has no OOM rows; the CNN sample has some, so the check below
      // does run.
      EXPECT_EQ(oom_rows > 0, family == v1::MODEL_FAMILY_CNN) << id << ": " << oom_rows;
      EXPECT_GE(oom_top * 2, oom_rows) << id << ": OOM rows predicted > 40 GiB";
    }
  }
}

// The project's own generated rows (tests/data/fixture-datasets), through the same
// reader, encoding and every member: each answer is a distribution over the bins with its
// point in the predicted bin. Their memory column is made up, so nothing here is about
// accuracy.
TEST_F(ShippedModels, AnswerFixtureRowsAsDistributions) {
  for (const auto& [family, name] : std::map<v1::ModelFamily, std::string>{
           {v1::MODEL_FAMILY_MLP, "mlp"}, {v1::MODEL_FAMILY_CNN, "cnn"}}) {
    auto read = data::ReadGpuMemNetCsv(
        testing::FixtureRoot() + "/gpumemnet/" + name + ".csv", family);
    ASSERT_TRUE(read.ok()) << read.status();
    for (const char* kind : {"mlp", "transformer"}) {
      const std::string id = "gpumemnet-" + name + "-" + kind;
      int answered = 0;
      for (size_t i = 0; i < read->rows.size(); i += 8) {
        const data::MeasuredRow& run = read->rows[i];
        if (run.model.layers_size() == 0) continue;
        v1::EstimateRequest request;
        *request.mutable_model() = run.model;
        const v1::EstimatorResult r = Run(id, request);
        ASSERT_TRUE(r.has_memory()) << id << " " << run.file_name;
        const v1::MemoryEstimate& m = r.memory();
        double sum = 0;
        for (const auto& bin : m.bins()) sum += bin.probability();
        EXPECT_NEAR(sum, 1.0, 1e-4) << id << " " << run.file_name;
        ASSERT_GE(m.predicted_bin(), 0);
        ASSERT_LT(m.predicted_bin(), m.bins_size());
        if (m.predicted_bin() < m.bins_size() - 1) {
          EXPECT_GE(m.point_bytes(), m.bins(m.predicted_bin()).lower_bytes()) << id;
          EXPECT_LT(m.point_bytes(), m.upper_bytes()) << id;
        }
        ++answered;
      }
      EXPECT_GT(answered, 30) << id;
    }
  }
}

TEST_F(ShippedModels, TopClassDoesNotFitTheA100) {
  // A huge CNN batch: predicted > 40 GiB, the recommendation does not fit the A100.
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.mutable_model()->set_batch_size(62);
  for (v1::Layer& l : *request.mutable_model()->mutable_layers()) {
    l.set_output_activations(l.output_activations() * 4);
  }
  request.set_gpu("a100-40gb");
  const v1::EstimatorResult r = Run("gpumemnet-cnn-mlp", request);
  const v1::MemoryEstimate& m = r.memory();
  ASSERT_EQ(m.predicted_bin(), m.bins_size() - 1) << r.DebugString();
  EXPECT_EQ(m.upper_bytes(), 0u);
  EXPECT_EQ(m.bins(m.bins_size() - 1).upper_bytes(), 0u);
  EXPECT_GT(m.point_bytes(), 40 * common::kGiB);
  auto response = engine_->Estimate(request);
  ASSERT_TRUE(response.ok());
  EXPECT_FALSE(response->recommendation().fit().fits());
}

TEST_F(ShippedModels, WarnsOutOfDistributionAndLowersConfidence) {
  v1::EstimateRequest request = testing::ExampleRequest("transformer.json");
  std::vector<v1::Warning> warnings;
  const v1::EstimatorResult plain =
      Run("gpumemnet-transformer-transformer", request, &warnings);
  for (const v1::Warning& w : warnings) {
    EXPECT_NE(w.code(), v1::WARNING_CODE_GPU_EXTRAPOLATION);
  }
  // GPT-2's Conv1D (a transposed linear layer) was never seen in training.
  v1::EstimateRequest gpt2 = request;
  for (v1::Layer& l : *gpt2.mutable_model()->mutable_layers()) {
    if (l.type() == "Linear") l.set_type("Conv1D");
  }
  gpt2.set_gpu("h100-80gb");
  const v1::EstimatorResult odd =
      Run("gpumemnet-transformer-transformer", gpt2, &warnings);
  bool conv1d = false, gpu = false;
  for (const v1::Warning& w : warnings) {
    if (w.estimator_id() != "gpumemnet-transformer-transformer") continue;
    conv1d = conv1d || (w.code() == v1::WARNING_CODE_OUT_OF_DISTRIBUTION &&
                        absl::StrContains(w.message(), "Conv1D"));
    gpu = gpu || w.code() == v1::WARNING_CODE_GPU_EXTRAPOLATION;
  }
  EXPECT_TRUE(conv1d);
  EXPECT_TRUE(gpu);
  // Out of its distribution (the unseen layer type), not because of the GPU.
  EXPECT_TRUE(plain.in_distribution());
  EXPECT_FALSE(odd.in_distribution());
  EXPECT_LT(odd.confidence(), 0.5);
  EXPECT_TRUE(absl::StrContains(odd.basis(), "halved")) << odd.basis();
  EXPECT_FALSE(absl::StrContains(plain.basis(), "halved")) << plain.basis();
}

TEST_F(ShippedModels, FeatureVectorsReachTheMlpBasedOnly) {
  v1::EstimateRequest request;
  v1::FeatureVector* f = request.mutable_features();
  f->set_batch_size(256);
  f->set_total_parameters(3'000'000);
  f->set_total_activations(6'000);
  f->set_depth(12);
  f->set_activation_function("ReLU");
  (*f->mutable_layer_counts())["linear"] = 4;
  (*f->mutable_layer_counts())["batch_normalization"] = 4;
  (*f->mutable_layer_counts())["ReLU"] = 4;
  auto response = engine_->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  std::vector<std::string> ids;
  for (const auto& r : response->results()) ids.push_back(r.estimator_id());
  EXPECT_EQ(ids, (std::vector<std::string>{"horus", "gpumemnet-mlp-mlp"}));
  // The classifier is trusted over the formula.
  EXPECT_EQ(response->recommendation().estimator_id(), "gpumemnet-mlp-mlp");
}

// A Transformer-based ensemble checks the call's deadline between its members: past
// it, the estimate stops with the deadline's status, and the engine answers with that
// status rather than a partial response or a warning.
TEST_F(ShippedModels, ATransformerEnsembleStopsAtTheDeadline) {
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.add_estimators("gpumemnet-cnn-transformer");
  int checks = 0;
  // The engine checks once before the estimator; the ensemble then checks before each
  // member: cancelled from the third check on, so the first member ran.
  const common::WorkDeadline cancelled_later(absl::InfiniteFuture(),
                                             [&] { return ++checks > 2; });
  auto stopped = engine_->Estimate(request, cancelled_later);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
  EXPECT_EQ(checks, 3);
  auto late =
      engine_->Estimate(request, common::WorkDeadline(absl::Now() - absl::Seconds(1)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_TRUE(engine_->Estimate(request).ok());
}

}  // namespace
}  // namespace gpuest::gpumemnet
