// client/cli/render: the CLI's tables and its --json, checked against the response
// they print: every figure shown is the response's own.
#include "client/cli/render.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::cli {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

// The line of text that starts with prefix (after indentation); fails the test and
// returns "" when there is none.
std::string LineStartingWith(const std::string& text, const std::string& prefix) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), prefix)) {
      return std::string(line);
    }
  }
  ADD_FAILURE() << "no line starting with \"" << prefix << "\" in:\n" << text;
  return "";
}

// A table row's cells: the columns are two or more spaces apart.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(line, "  ", absl::SkipWhitespace())) {
    cells.push_back(std::string(absl::StripAsciiWhitespace(cell)));
  }
  return cells;
}

// A response with one result of each kind, a fit that fails, and a breakdown.
v1::EstimateResponse Response() {
  v1::EstimateResponse r;
  r.set_family(v1::MODEL_FAMILY_CNN);
  r.set_models_version("9-00000000deadbeef");
  r.set_server_latency_us(734);

  v1::EstimatorResult* horus = r.add_results();
  horus->set_estimator_id("horus");
  horus->set_kind(v1::ESTIMATOR_KIND_ANALYTICAL);
  horus->mutable_memory()->set_point_bytes(3 * kGiB / 2);
  horus->set_confidence(0.25);
  horus->set_latency_us(3);
  horus->set_basis("formula");

  v1::EstimatorResult* net = r.add_results();
  net->set_estimator_id("gpumemnet-cnn-mlp");
  net->set_kind(v1::ESTIMATOR_KIND_CLASSIFIER);
  v1::MemoryEstimate* m = net->mutable_memory();
  for (uint64_t lower : {0, 8, 16}) {
    v1::MemoryBin* bin = m->add_bins();
    bin->set_lower_bytes(lower * kGiB);
    bin->set_upper_bytes(lower == 16 ? 0 : (lower + 8) * kGiB);
    bin->set_probability(lower == 8 ? 0.8 : 0.1);
  }
  m->set_predicted_bin(1);
  m->set_point_bytes(12 * kGiB);
  m->set_upper_bytes(16 * kGiB);
  net->set_confidence(0.8);
  net->set_latency_us(120);
  net->set_basis("ensemble");
  v1::UtilizationEstimate* u = net->add_utilization();
  u->set_metric(v1::UTILIZATION_METRIC_SMACT);
  for (double edge : {0.0, 0.3, 0.9, 1.0}) u->add_bin_edges(edge);
  for (double p : {0.2, 0.7, 0.1}) u->add_probabilities(p);
  u->set_predicted_class(1);

  v1::EstimatorResult* sim = r.add_results();
  sim->set_estimator_id("allocsim");
  sim->set_kind(v1::ESTIMATOR_KIND_SIMULATOR);
  v1::MemoryEstimate* s = sim->mutable_memory();
  s->set_point_bytes(17 * kGiB);
  s->set_gpu_constants(v1::GPU_CONSTANTS_CALIBRATED);
  v1::MemoryBreakdown* b = s->mutable_breakdown();
  b->set_weights_bytes(2 * kGiB);
  b->set_gradients_bytes(2 * kGiB);
  b->set_optimizer_state_bytes(4 * kGiB);
  b->set_activations_bytes(9 * kGiB);
  b->set_context_bytes(512 * kMiB);
  b->set_calibration_bytes(512 * kMiB);
  s->set_upper_bytes(18 * kGiB);  // The parts add up to it.
  sim->set_confidence(0.9);
  sim->set_latency_us(2500);
  sim->set_basis("replayed trace");

  v1::Recommendation* rec = r.mutable_recommendation();
  rec->set_memory_bytes(18 * kGiB);
  rec->set_estimator_id("allocsim");
  rec->set_basis("allocsim upper bound");
  v1::GpuFit* fit = rec->mutable_fit();
  fit->set_gpu("t4");
  fit->set_capacity_bytes(15 * kGiB);
  fit->set_fits(false);
  fit->set_headroom_bytes(-static_cast<int64_t>(3 * kGiB));
  return r;
}

TEST(CliRender, FormatBytesPicksTheUnit) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(900), "900 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(512 * kMiB), "512.0 MiB");
  EXPECT_EQ(FormatBytes(kGiB - 1), "1024.0 MiB");
  EXPECT_EQ(FormatBytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(40 * kGiB), "40.00 GiB");
}

TEST(CliRender, TheTableShowsEachResultsOwnFigures) {
  const v1::EstimateResponse response = Response();
  const std::string text = RenderEstimate(response, "resnet", 32);
  EXPECT_TRUE(
      absl::StartsWith(text, "model resnet (cnn, batch 32)  models 9-00000000deadbeef\n"))
      << text;
  EXPECT_EQ(Cells(LineStartingWith(text, "ESTIMATOR")),
            (std::vector<std::string>{"ESTIMATOR", "KIND", "MEMORY", "UPPER", "CONF",
                                      "TIME", "BASIS"}));
  // No upper bound is "-"; a classifier shows its predicted bin as its memory.
  EXPECT_EQ(Cells(LineStartingWith(text, "horus")),
            (std::vector<std::string>{"horus", "analytical", "1.50 GiB", "-", "0.25",
                                      "3 us", "formula"}));
  EXPECT_EQ(
      Cells(LineStartingWith(text, "gpumemnet-cnn-mlp")),
      (std::vector<std::string>{"gpumemnet-cnn-mlp", "classifier", "8.00 GiB - 16.00 GiB",
                                "16.00 GiB", "0.80", "120 us", "ensemble"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "allocsim")),
            (std::vector<std::string>{"allocsim", "simulator", "17.00 GiB", "18.00 GiB",
                                      "0.90", "2500 us", "replayed trace"}));
  EXPECT_EQ(LineStartingWith(text, "utilization"),
            "utilization (gpumemnet-cnn-mlp): smact [0.3, 0.9) p=0.70");
  EXPECT_EQ(LineStartingWith(text, "server latency"), "server latency: 734 us");
  EXPECT_EQ(text.find("warnings:"), std::string::npos) << "no warnings, no heading";
}

TEST(CliRender, TheBreakdownAddsUpToTheUpperBound) {
  const v1::EstimateResponse response = Response();
  const std::string text = RenderEstimate(response, "resnet", 32);
  EXPECT_EQ(LineStartingWith(text, "breakdown"),
            "breakdown (allocsim, 18.00 GiB, calibrated GPU constants):");
  const v1::MemoryBreakdown& b = response.results(2).memory().breakdown();
  struct Part {
    const char* name;
    uint64_t bytes;
    const char* share;
  };
  for (const Part& p : {Part{"activations", b.activations_bytes(), "50.0 %"},
                        Part{"optimizer state", b.optimizer_state_bytes(), "22.2 %"},
                        Part{"weights", b.weights_bytes(), "11.1 %"},
                        Part{"gradients", b.gradients_bytes(), "11.1 %"},
                        Part{"context", b.context_bytes(), "2.8 %"},
                        Part{"calibration", b.calibration_bytes(), "2.8 %"},
                        Part{"inputs", 0, "0.0 %"}}) {
    EXPECT_EQ(Cells(LineStartingWith(text, p.name)),
              (std::vector<std::string>{p.name, FormatBytes(p.bytes), p.share}));
  }
  // Largest part first.
  EXPECT_LT(text.find("  activations"), text.find("  optimizer state"));
  EXPECT_LT(text.find("  optimizer state"), text.find("  weights"));
}

TEST(CliRender, ARecommendationThatDoesNotFitSaysSo) {
  v1::EstimateResponse response = Response();
  std::string text = RenderEstimate(response, "resnet", 32);
  EXPECT_EQ(LineStartingWith(text, "recommended:"),
            "recommended: 18.00 GiB to reserve: the requirement (allocsim upper bound)");
  EXPECT_EQ(LineStartingWith(text, "fits"), "fits t4 (15.00 GiB): NO, short by 3.00 GiB");

  v1::GpuFit* fit = response.mutable_recommendation()->mutable_fit();
  fit->set_capacity_bytes(20 * kGiB);
  fit->set_fits(true);
  fit->set_headroom_bytes(2 * kGiB);
  text = RenderEstimate(response, "resnet", 32);
  EXPECT_EQ(LineStartingWith(text, "fits"),
            "fits t4 (20.00 GiB): yes, headroom 2.00 GiB");

  response.mutable_recommendation()->clear_fit();  // No --gpu: nothing about fitting.
  text = RenderEstimate(response, "", 0);
  EXPECT_EQ(text.find("fits "), std::string::npos) << text;
  EXPECT_TRUE(absl::StartsWith(text, "model (unnamed) (cnn)  models")) << text;
}

// The fit line says what the allocator's cache release and retry does, apart from
// whether the bound fits: "NO" stays "NO" when the retry saves the job.
TEST(CliRender, TheFitSaysWhatTheAllocatorsRetryDoes) {
  v1::EstimateResponse response = Response();
  v1::GpuFit* fit = response.mutable_recommendation()->mutable_fit();
  fit->set_allocator_retry(v1::ALLOCATOR_RETRY_SAVES_IT);
  EXPECT_EQ(LineStartingWith(RenderEstimate(response, "resnet", 32), "fits"),
            "fits t4 (15.00 GiB): NO, short by 3.00 GiB; allocator retry: SAVES IT (the "
            "step completes in simulation only after the allocator empties its cache and "
            "retries: slower steps, no margin)");
  fit->set_allocator_retry(v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT);
  EXPECT_EQ(LineStartingWith(RenderEstimate(response, "resnet", 32), "fits"),
            "fits t4 (15.00 GiB): NO, short by 3.00 GiB; allocator retry: does not save "
            "it (out of memory even after the allocator empties its cache)");
  fit->set_capacity_bytes(20 * kGiB);
  fit->set_fits(true);
  fit->set_headroom_bytes(2 * kGiB);
  fit->set_allocator_retry(v1::ALLOCATOR_RETRY_NOT_NEEDED);
  EXPECT_EQ(LineStartingWith(RenderEstimate(response, "resnet", 32), "fits"),
            "fits t4 (20.00 GiB): yes, headroom 2.00 GiB; allocator retry: not needed");
}

// The one place that builds warnings: printed by their short code name.
TEST(CliRender, WarningsAreListedWithTheirEstimator) {
  v1::EstimateResponse response = Response();
  v1::Warning* whole = response.add_warnings();
  whole->set_code(v1::WARNING_CODE_UNKNOWN_LAYER_TYPE);
  whole->set_message("CapsuleRouting is not a known layer type");
  v1::Warning* one = response.add_warnings();
  one->set_code(v1::WARNING_CODE_OUT_OF_DISTRIBUTION);
  one->set_estimator_id("gpumemnet-cnn-mlp");
  one->set_message("batch_size 4096 is outside the training range");
  const std::string text = RenderEstimate(response, "resnet", 32);
  const size_t heading = text.find("\nwarnings:\n");
  ASSERT_NE(heading, std::string::npos) << text;
  EXPECT_NE(text.find("\n  UNKNOWN_LAYER_TYPE: CapsuleRouting is not a known layer type\n"
                      "  OUT_OF_DISTRIBUTION [gpumemnet-cnn-mlp]: batch_size 4096 is "
                      "outside the training range\n",
                      heading),
            std::string::npos)
      << text;
}

TEST(CliRender, TheEstimatorList) {
  v1::ListEstimatorsResponse list;
  list.set_models_version("3-0000000000000abc");
  v1::EstimatorInfo* horus = list.add_estimators();
  horus->set_id("horus");
  horus->set_kind(v1::ESTIMATOR_KIND_ANALYTICAL);
  horus->set_version("1");
  horus->set_estimates_memory(true);  // No device: a server from before the field.
  v1::EstimatorInfo* net = list.add_estimators();
  net->set_id("gpumemnet-mlp-mlp");
  net->set_kind(v1::ESTIMATOR_KIND_CLASSIFIER);
  net->set_family(v1::MODEL_FAMILY_MLP);
  net->set_version("2025-01");
  net->set_estimates_memory(true);
  net->set_device("cuda");
  net->add_utilization_metrics(v1::UTILIZATION_METRIC_SMACT);
  net->add_utilization_metrics(v1::UTILIZATION_METRIC_FP32A);
  (*net->mutable_training_metrics())["memory_accuracy"] = 0.8712;
  (*net->mutable_training_metrics())["cv_accuracy"] = 0.85;
  const std::string text = RenderEstimators(list);
  EXPECT_EQ(
      Cells(LineStartingWith(text, "horus")),
      (std::vector<std::string>{"horus", "analytical", "any", "1", "-", "memory", "-"}));
  EXPECT_EQ(Cells(LineStartingWith(text, "gpumemnet-mlp-mlp")),
            (std::vector<std::string>{"gpumemnet-mlp-mlp", "classifier", "mlp", "2025-01",
                                      "cuda", "memory,smact,fp32a",
                                      "cv_accuracy=0.85 memory_accuracy=0.871"}));
  EXPECT_EQ(LineStartingWith(text, "models"), "models 3-0000000000000abc");
}

// --json is what schedulers parse: a field at its default (false, 0, empty) is
// printed, never left out. (A fixed bug: protobuf's JSON printer drops default fields
// unless always_print_primitive_fields is set, and `"fits": false` went missing.)
TEST(CliRender, JsonKeepsFalseAndZeroFields) {
  v1::EstimateResponse response = Response();
  response.set_server_latency_us(0);
  response.mutable_results(0)->set_confidence(0);
  const nlohmann::json doc = nlohmann::json::parse(RenderJson(response));
  const nlohmann::json& fit = doc.at("recommendation").at("fit");
  EXPECT_EQ(fit.at("fits"), false);
  EXPECT_EQ(fit.at("gpu"), "t4");
  EXPECT_EQ(fit.at("headroomBytes"), std::to_string(-static_cast<int64_t>(3 * kGiB)));
  EXPECT_EQ(doc.at("serverLatencyUs"), "0");
  EXPECT_EQ(doc.at("warnings"), nlohmann::json::array());
  EXPECT_EQ(doc.at("results").at(0).at("confidence"), 0);
  EXPECT_EQ(doc.at("results").at(0).at("memory").at("upperBytes"), "0");

  // A fit with no headroom to spare: both fields still there.
  v1::GpuFit* exact = response.mutable_recommendation()->mutable_fit();
  exact->set_capacity_bytes(18 * kGiB);
  exact->set_fits(true);
  exact->set_headroom_bytes(0);
  const nlohmann::json tight = nlohmann::json::parse(RenderJson(response));
  EXPECT_EQ(tight.at("recommendation").at("fit").at("headroomBytes"), "0");
  EXPECT_EQ(tight.at("recommendation").at("fit").at("fits"), true);
}

TEST(CliRender, JsonIsTheProtobufMappingOfTheResponse) {
  const v1::EstimateResponse response = Response();
  const std::string json = RenderJson(response);
  v1::EstimateResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok()) << json;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back, response)) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"estimatorId\": \"allocsim\"")) << json;
}

}  // namespace
}  // namespace gpuest::cli
