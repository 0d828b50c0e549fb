#include "estimators/core/request_validation.h"

#include <functional>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

v1::EstimateRequest ValidRequest() {
  v1::EstimateRequest r;
  v1::ModelDescription* m = r.mutable_model();
  m->set_batch_size(32);
  m->add_input_shape(3);
  m->add_input_shape(32);
  m->add_input_shape(32);
  for (int i = 0; i < 3; ++i) {
    v1::Layer* l = m->add_layers();
    l->set_type("Conv2d");
    l->set_output_activations(1000);
    l->set_parameters(100);
  }
  return r;
}

struct Case {
  const char* name;
  std::function<void(v1::EstimateRequest&)> mutate;
  const char* field;  // The message must start with it.
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ValidationTest : public ::testing::TestWithParam<Case> {};

TEST_P(ValidationTest, RejectsTheBadFieldByName) {
  v1::EstimateRequest r = ValidRequest();
  GetParam().mutate(r);
  const absl::Status s = ValidateRequest(r, ValidationLimits{});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message().substr(0, std::string(GetParam().field).size()), GetParam().field)
      << s.message();
}

v1::AllocationTrace* Trace(v1::EstimateRequest& r, int n) {
  v1::AllocationTrace* t = r.mutable_model()->mutable_trace();
  for (int i = 0; i < n; ++i) {
    t->add_size_bytes(512);
    t->add_alloc_at(i);
    t->add_free_at(0);
    t->add_category(v1::ALLOCATION_CATEGORY_ACTIVATION);
  }
  return t;
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ValidationTest,
    ::testing::Values(
        Case{"no_input", [](auto& r) { r.clear_model(); }, "input:"},
        Case{"zero_batch", [](auto& r) { r.mutable_model()->set_batch_size(0); },
             "model.batch_size:"},
        Case{"negative_batch", [](auto& r) { r.mutable_model()->set_batch_size(-4); },
             "model.batch_size:"},
        Case{"huge_batch",
             [](auto& r) { r.mutable_model()->set_batch_size(int64_t{1} << 40); },
             "model.batch_size:"},
        Case{"bad_shape", [](auto& r) { r.mutable_model()->set_input_shape(1, 0); },
             "model.input_shape[1]:"},
        Case{"negative_sequence",
             [](auto& r) { r.mutable_model()->set_sequence_length(-1); },
             "model.sequence_length:"},
        // Fields that state the same thing must agree.
        Case{"sequence_against_token_shape",
             [](auto& r) {
               r.mutable_model()->clear_input_shape();
               r.mutable_model()->add_input_shape(128);
               r.mutable_model()->set_sequence_length(int64_t{1} << 31);
             },
             "model.sequence_length:"},
        Case{"sequence_against_embedding",
             [](auto& r) {
               r.mutable_model()->set_sequence_length(3000);
               r.mutable_model()->mutable_layers(0)->set_type("Embedding");
               r.mutable_model()->mutable_layers(0)->set_output_activations(128 * 768);
             },
             "model.sequence_length:"},
        Case{"trace_beside_its_absence",
             [](auto& r) {
               Trace(r, 1);
               r.mutable_model()->set_trace_unavailable_reason("tracing failed");
             },
             "model.trace_unavailable_reason:"},
        Case{"input_from_a_later_layer",
             [](auto& r) { r.mutable_model()->mutable_layers(1)->set_input_from(1); },
             "model.layers[1].input_from:"},
        Case{"input_from_below_the_model_input",
             [](auto& r) { r.mutable_model()->mutable_layers(1)->set_input_from(-3); },
             "model.layers[1].input_from:"},
        Case{"input_op_without_an_input_no_module_made",
             [](auto& r) {
               r.mutable_model()->mutable_layers(1)->set_input_from(0);
               r.mutable_model()->mutable_layers(1)->set_input_op("add");
             },
             "model.layers[1].input_op:"},
        Case{"input_op_too_long",
             [](auto& r) {
               r.mutable_model()->mutable_layers(1)->set_input_from(-1);
               r.mutable_model()->mutable_layers(1)->set_input_op(std::string(5000, 'a'));
             },
             "model.layers[1].input_op:"},
        Case{"no_layers", [](auto& r) { r.mutable_model()->clear_layers(); },
             "model.layers:"},
        Case{"negative_params",
             [](auto& r) { r.mutable_model()->mutable_layers(2)->set_parameters(-1); },
             "model.layers[2].parameters:"},
        Case{"negative_activations",
             [](auto& r) {
               r.mutable_model()->mutable_layers(1)->set_output_activations(-7);
             },
             "model.layers[1].output_activations:"},
        Case{"absurd_params",
             [](auto& r) {
               r.mutable_model()->mutable_layers(0)->set_parameters(int64_t{1} << 60);
             },
             "model.layers[0].parameters:"},
        Case{"empty_type",
             [](auto& r) { r.mutable_model()->mutable_layers(0)->set_type(""); },
             "model.layers[0].type:"},
        Case{"too_many_layers",
             [](auto& r) {
               for (int i = 0; i < 10001; ++i)
                 r.mutable_model()->add_layers()->set_type("ReLU");
             },
             "model.layers:"},
        Case{"unknown_family",
             [](auto& r) {
               r.mutable_model()->set_family(static_cast<v1::ModelFamily>(42));
             },
             "model.family:"},
        Case{"unknown_optimizer",
             [](auto& r) {
               r.mutable_model()->set_optimizer(static_cast<v1::Optimizer>(42));
             },
             "model.optimizer:"},
        Case{"unknown_dtype",
             [](auto& r) { r.mutable_model()->set_dtype(static_cast<v1::DType>(9)); },
             "model.dtype:"},
        Case{"trace_columns", [](auto& r) { Trace(r, 3)->add_size_bytes(1); },
             "model.trace:"},
        Case{"trace_free_before_alloc",
             [](auto& r) {
               auto* t = Trace(r, 3);
               t->set_alloc_at(1, 5);
               t->set_free_at(1, 2);
             },
             "model.trace.free_at[1]:"},
        Case{"trace_category",
             [](auto& r) {
               Trace(r, 2)->set_category(0, v1::ALLOCATION_CATEGORY_UNSPECIFIED);
             },
             "model.trace.category[0]:"},
        Case{"features_batch",
             [](auto& r) { r.mutable_features()->set_total_parameters(10); },
             "features.batch_size:"},
        Case{"features_negative",
             [](auto& r) {
               auto* f = r.mutable_features();
               f->set_batch_size(2);
               f->set_total_parameters(-10);
             },
             "features.total_parameters:"},
        Case{"features_count",
             [](auto& r) {
               auto* f = r.mutable_features();
               f->set_batch_size(2);
               f->set_total_parameters(10);
               (*f->mutable_layer_counts())["Linear"] = -1;
             },
             "features.layer_counts[\"Linear\"]:"},
        Case{"features_empty", [](auto& r) { r.mutable_features()->set_batch_size(2); },
             "features:"},
        Case{"empty_estimator", [](auto& r) { r.add_estimators(""); }, "estimators[0]:"},
        // 100,000 copies of one id ran the simulation 100,000 times.
        Case{"duplicate_estimator",
             [](auto& r) {
               r.add_estimators("allocsim");
               r.add_estimators("horus");
               r.add_estimators("allocsim");
             },
             "estimators[2]:"},
        // [3, 2^31, 2^31] wrapped 64 bits in the layer rules and came back "fits".
        Case{"input_shape_wraps",
             [](auto& r) {
               r.mutable_model()->set_input_shape(1, int64_t{1} << 31);
               r.mutable_model()->set_input_shape(2, int64_t{1} << 31);
             },
             "model.input_shape:"},
        // Trace times are one clock's ticks: distinct, and within 2 per event.
        Case{"trace_shared_time",
             [](auto& r) {
               v1::AllocationTrace* t = Trace(r, 3);
               t->set_alloc_at(2, t->alloc_at(1));
             },
             "model.trace.alloc_at[2]:"},
        Case{"trace_free_shares_an_alloc_time",
             [](auto& r) {
               v1::AllocationTrace* t = Trace(r, 3);
               t->set_free_at(0, t->alloc_at(2));
             },
             "model.trace.alloc_at[2]:"},
        Case{"trace_past_the_end", [](auto& r) { Trace(r, 3)->set_free_at(1, 1000000); },
             "model.trace.free_at[1]:"},
        // An 8 KB id was echoed back whole in the error and broke the client.
        Case{"huge_estimator_id",
             [](auto& r) {
               r.add_estimators("horus");
               r.add_estimators(std::string(8192, 'x'));
             },
             "estimators[1]:"},
        // 2^24 samples x 2^43 activations x 4 B = 2^69 B: 64-bit arithmetic wraps it
        // (a 2^70 B job came back as 1.84 GiB, "fits").
        Case{"step_bytes_overflow",
             [](auto& r) {
               r.mutable_model()->set_batch_size(int64_t{1} << 24);
               r.mutable_model()->mutable_layers(0)->set_output_activations(int64_t{1}
                                                                            << 43);
             },
             "model.batch_size:"},
        Case{"features_step_bytes_overflow",
             [](auto& r) {
               auto* f = r.mutable_features();
               f->set_batch_size(int64_t{1} << 24);
               f->set_total_activations(int64_t{1} << 44);
             },
             "features.batch_size:"},
        Case{"trace_bytes_overflow",
             [](auto& r) {
               auto* t = Trace(r, 3);
               for (int i = 0; i < 3; ++i) t->set_size_bytes(i, uint64_t{1} << 44);
               for (int i = 0; i < 200000; ++i) {
                 t->add_size_bytes(uint64_t{1} << 44);
                 t->add_alloc_at(3 + i);
                 t->add_free_at(0);
                 t->add_category(v1::ALLOCATION_CATEGORY_ACTIVATION);
               }
             },
             "model.trace.size_bytes:"},
        // The batch ValidRequest's inputs were traced at is 32; the request asks for 256.
        Case{"trace_of_another_batch",
             [](auto& r) {
               auto* t = Trace(r, 2);
               t->set_category(0, v1::ALLOCATION_CATEGORY_INPUT);
               t->set_size_bytes(0, 32 * 3 * 32 * 32 * 4);
               r.mutable_model()->set_batch_size(256);
             },
             "model.trace:"},
        Case{"tiny_max_split",
             [](auto& r) {
               r.mutable_model()->mutable_allocator()->set_max_split_size_mb(20);
             },
             "model.allocator.max_split_size_mb:"},
        Case{"huge_data_parallel",
             [](auto& r) {
               r.mutable_model()->mutable_parallelism()->set_data_parallel(1u << 20);
             },
             "model.parallelism.data_parallel:"},
        Case{"huge_tensor_parallel",
             [](auto& r) {
               r.mutable_model()->mutable_parallelism()->set_tensor_parallel(4096);
             },
             "model.parallelism.tensor_parallel:"},
        Case{"unknown_sharding",
             [](auto& r) {
               r.mutable_model()->mutable_parallelism()->set_sharding(
                   static_cast<v1::Sharding>(9));
             },
             "model.parallelism.sharding:"},
        Case{"offloaded_parameters_unsharded",
             [](auto& r) {
               r.mutable_model()->mutable_parallelism()->set_data_parallel(8);
               r.mutable_model()->mutable_parallelism()->set_offload_parameters(true);
             },
             "model.parallelism.offload_parameters:"},
        // A trace answers for the batch it records, whatever else the description
        // holds: an input shape or none.
        Case{"trace_recorded_at_another_batch",
             [](auto& r) { Trace(r, 2)->set_batch_size(64); }, "model.trace.batch_size:"},
        Case{"trace_recorded_at_another_batch_without_an_input_shape",
             [](auto& r) {
               r.mutable_model()->clear_input_shape();
               Trace(r, 2)->set_batch_size(64);
             },
             "model.trace.batch_size:"},
        Case{"trace_batch_negative", [](auto& r) { Trace(r, 2)->set_batch_size(-32); },
             "model.trace.batch_size:"},
        Case{"too_many_trace_caveats",
             [](auto& r) {
               for (int i = 0; i < 17; ++i) r.mutable_model()->add_trace_caveats("c");
             },
             "model.trace_caveats: at most 16"},
        Case{"a_trace_caveat_too_long",
             [](auto& r) {
               r.mutable_model()->add_trace_caveats("ok");
               r.mutable_model()->add_trace_caveats(std::string(1025, 'x'));
             },
             "model.trace_caveats[1]: longer than 1024"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Validation, AcceptsAValidRequestAndTrace) {
  v1::EstimateRequest r = ValidRequest();
  Trace(r, 4)->set_free_at(0, 4);
  EXPECT_TRUE(ValidateRequest(r, ValidationLimits{}).ok());
}

TEST(Validation, AcceptsATraceWhoseInputsHoldTheBatch) {
  for (uint64_t width : {1, 2, 4, 8}) {
    v1::EstimateRequest r = ValidRequest();
    auto* t = Trace(r, 3);
    t->set_category(1, v1::ALLOCATION_CATEGORY_INPUT);  // The labels: another size.
    t->set_category(2, v1::ALLOCATION_CATEGORY_INPUT);
    t->set_size_bytes(2, 32 * 3 * 32 * 32 * width);
    EXPECT_TRUE(ValidateRequest(r, ValidationLimits{}).ok()) << width;
  }
}

// A trace that records its batch is held to it alone: its inputs need not show it (a
// step_function's batch may be no tensor of batch x input shape).
TEST(Validation, AcceptsATraceRecordedAtTheRequestsBatch) {
  v1::EstimateRequest r = ValidRequest();
  auto* t = Trace(r, 2);
  t->set_category(1, v1::ALLOCATION_CATEGORY_INPUT);  // Holds no batch of 32 samples.
  EXPECT_EQ(ValidateRequest(r, ValidationLimits{}).code(),
            absl::StatusCode::kInvalidArgument);  // Unrecorded: read from the inputs.
  t->set_batch_size(32);
  EXPECT_TRUE(ValidateRequest(r, ValidationLimits{}).ok());
}

TEST(Validation, AHugeEstimatorIdIsNotEchoedBack) {
  v1::EstimateRequest r = ValidRequest();
  r.add_estimators(std::string(8192, 'x'));
  const absl::Status s = ValidateRequest(r, ValidationLimits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 200u) << s.message().size();
}

// Found with the request_validation fuzz property (a refusal under 1 KiB): a 4 KB
// layer type in a feature vector's layer_counts was echoed whole in the field path.
TEST(Validation, AHugeLayerCountsTypeIsNotEchoedBack) {
  v1::EstimateRequest r;
  v1::FeatureVector* f = r.mutable_features();
  f->set_batch_size(32);
  f->set_total_parameters(1000);
  f->set_total_activations(1000);
  (*f->mutable_layer_counts())[std::string(4096, 'C')] = 20000;
  const absl::Status s = ValidateRequest(r, ValidationLimits{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "features.layer_counts: ")) << s.message();
  EXPECT_LT(s.message().size(), 200u) << s.message().size();
}

TEST(Validation, LimitsAreConfigurable) {
  ValidationLimits limits;
  limits.max_layers = 2;
  const absl::Status s = ValidateRequest(ValidRequest(), limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("limit of 2"), std::string::npos) << s;
}

}  // namespace
}  // namespace gpuest::core
