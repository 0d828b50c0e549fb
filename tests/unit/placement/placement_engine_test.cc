// The PlacementEngine over the shipped model repository (placement/placement_engine.h):
// memory and contention on a GPU, MIG slices, transients and caps, ranking; and every
// numeric field of every request held to its bound row (estimators/core/
// field_bounds.h) on each path the engine reads it by.
#include "placement/placement_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/units.h"
#include "estimators/core/engine.h"
#include "estimators/core/field_bounds.h"
#include "estimators/core/gpu_profiles.h"
#include "estimators/core/registry.h"
#include "estimators/default_factories.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "placement/contention_model.h"
#include "placement/memory_fit.h"
#include "placement/placement_job.h"
#include "placement/placement_reasons.h"
#include "placement/placement_verdict.h"
#include "tests/support/examples.h"
#include "tests/support/shipped_models.h"

namespace gpuest::placement {
namespace {

const std::string kContentionFile = core::ContentionModelPath(GPUEST_MODELS_DIR);

class PlacementEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::shared_ptr<const ModelSet> set = testing::ShippedModelSet();
    engine_ = &set->engine();
    placement_ = &set->placement();
  }
  // The shipped set lives as long as the test binary.
  static const core::Engine* engine_;
  static const PlacementEngine* placement_;
};
const core::Engine* PlacementEngineTest::engine_ = nullptr;
const PlacementEngine* PlacementEngineTest::placement_ = nullptr;

TEST_F(PlacementEngineTest, ChecksMemoryAndContentionOnAMigSliceByItsNvidiaSmiName) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  *request.add_existing() = testing::MeasuredJob("busy", 12 * common::kGiB, 95);
  *request.mutable_candidate() = testing::MeasuredJob("new", 6 * common::kGiB, 90);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu(), "a100-40gb-mig-3g.20gb");
  EXPECT_EQ(r->capacity_bytes(), 20091 * common::kMiB);
  EXPECT_TRUE(r->fits());
  EXPECT_EQ(r->headroom_bytes(),
            static_cast<int64_t>(20091 * common::kMiB - 18 * common::kGiB));
  ASSERT_EQ(r->jobs_size(), 2);
  EXPECT_FALSE(r->jobs(0).candidate());
  EXPECT_TRUE(r->jobs(1).candidate());
  // Two jobs near saturation: Lucid's bad pairing.
  EXPECT_EQ(r->verdict(), v1::CONTENTION_VERDICT_BAD);
  EXPECT_LT(r->worst_predicted_speed(), 0.85);
  EXPECT_GT(r->jobs(1).confidence(), 0);
  // The other slices' jobs are said not to contend, not predicted.
  bool says_isolated = false;
  for (const std::string& reason : r->reasons())
    says_isolated |=
        absl::StrContains(reason, "MIG slice: jobs on the GPU's other slices");
  EXPECT_TRUE(says_isolated);
  // A whole GPU says no such thing.
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  auto whole = placement_->CheckPlacement(request);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const std::string& reason : whole->reasons())
    EXPECT_FALSE(absl::StrContains(reason, "MIG slice")) << reason;
}

// Jobs are packed by their requirement; beside others, a job with cuDNN benchmark
// mode's transient fits only if it is capped, and the response says so and how.
TEST_F(PlacementEngineTest, AJobWithATransientBesideOthersFitsOnlyWithACap) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-80gb");
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");  // Convolutions; benchmark not recorded.
  request.mutable_candidate()->set_name("cnn");
  auto alone = placement_->CheckPlacement(request);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->needs_cap().empty());  // Alone, the transient takes nobody's memory.

  *request.add_existing() = testing::MeasuredJob("light", 4 * common::kGiB, 10);
  auto beside = placement_->CheckPlacement(request);
  ASSERT_TRUE(beside.ok()) << beside.status();
  ASSERT_TRUE(beside->fits());
  EXPECT_EQ(beside->candidate_bytes(), alone->candidate_bytes());  // The requirement.
  ASSERT_EQ(beside->needs_cap_size(), 1);
  EXPECT_EQ(beside->needs_cap(0), "cnn");
  bool said = false;
  for (const std::string& reason : beside->reasons()) {
    said |= absl::StrContains(reason, "safe only with a cap: 'cnn'") &&
            absl::StrContains(reason, "set_per_process_memory_fraction(0.");
  }
  EXPECT_TRUE(said) << absl::StrJoin(beside->reasons(), "\n");

  request.mutable_candidate()
      ->mutable_description()
      ->mutable_model()
      ->set_cudnn_benchmark(false);
  auto off = placement_->CheckPlacement(request);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->needs_cap().empty());

  v1::RankGpusRequest rank;
  *rank.mutable_job()->mutable_description() = testing::ExampleRequest("cnn.json");
  auto ranked = placement_->RankGpus(rank);
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  ASSERT_GT(ranked->gpus_size(), 0);
  EXPECT_TRUE(ranked->gpus(0).needs_cap());
}

TEST_F(PlacementEngineTest, ADescribedCandidateUsesGpuestsOwnUtilizationEstimate) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-80gb");
  *request.add_existing() = testing::MeasuredJob("light", 4 * common::kGiB, 10);
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::JobOutcome& c = r->jobs(1);
  EXPECT_EQ(c.utilization_source(), v1::UTILIZATION_SOURCE_ESTIMATE);
  EXPECT_LE(c.gpu_util_low(), c.gpu_util());
  EXPECT_GE(c.gpu_util_high(), c.gpu_util());
  // Lower than the measured neighbour's judgement would be with both measured.
  EXPECT_LT(c.confidence(), placement_->contention().interval_coverage);
  EXPECT_EQ(r->candidate_bytes(), c.memory_bytes());
  EXPECT_GT(c.memory_bytes(), 0u);
}

TEST_F(PlacementEngineTest, NodeReportedMemoryIsNotCountedTwice) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->mutable_node_reported()->set_total_bytes(24 * common::kGiB);
  request.mutable_gpu()->mutable_node_reported()->set_free_bytes(14 * common::kGiB);
  *request.add_existing() = testing::MeasuredJob("running", 10 * common::kGiB, 40);
  *request.mutable_candidate() = testing::MeasuredJob("next", 15 * common::kGiB, 40);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu(), "node-reported");
  EXPECT_EQ(r->used_bytes(), 10 * common::kGiB);
  EXPECT_FALSE(r->fits());
  EXPECT_EQ(r->headroom_bytes(), -static_cast<int64_t>(common::kGiB));
}

// The extender judges each GPU with JudgeReportedGpu's arithmetic alone: over a grid of
// GPU states (empty, part used, nearly full; busy, idle, not said) and candidates (light
// and heavy, small and large), it says what CheckPlacement says for that GPU.
TEST_F(PlacementEngineTest, TheArithmeticPerGpuAgreesWithCheckPlacement) {
  const ContentionModel& contention = placement_->contention();
  for (const uint64_t free : {80 * common::kGiB, 50 * common::kGiB, 3 * common::kGiB}) {
    for (const double util : {-1.0, 5.0, 95.0}) {
      for (const double candidate_util : {0.1, 0.9}) {
        for (const uint64_t candidate_bytes : {2 * common::kGiB, 40 * common::kGiB}) {
          v1::CheckPlacementRequest check;
          v1::NodeReportedGpu* gpu = check.mutable_gpu()->mutable_node_reported();
          gpu->set_total_bytes(80 * common::kGiB);
          gpu->set_free_bytes(free);
          gpu->set_model("h100-80gb");
          if (free < 80 * common::kGiB) {
            v1::PlacementJob* running = check.add_existing();
            running->set_name("what runs on the GPU");
            if (util >= 0) {
              *running = testing::MeasuredJob("what runs on the GPU",
                                              80 * common::kGiB - free, util);
            } else {
              running->mutable_estimate()->set_peak_bytes(80 * common::kGiB - free);
            }
          }
          *check.mutable_candidate() =
              testing::MeasuredJob("pod", candidate_bytes, 100 * candidate_util);
          auto full = placement_->CheckPlacement(check);
          ASSERT_TRUE(full.ok()) << full.status();
          const GpuJudgement j = JudgeReportedGpu(
              contention, candidate_bytes, MeasuredByNvidiaSmi(100 * candidate_util),
              80 * common::kGiB, free,
              util >= 0 ? MeasuredByNvidiaSmi(util) : UnknownUtilization());
          SCOPED_TRACE(absl::StrCat("free ", free / common::kGiB, " GiB, util ", util,
                                    ", candidate ", candidate_bytes / common::kGiB,
                                    " GiB at ", candidate_util));
          EXPECT_EQ(j.fit.fits, full->fits());
          EXPECT_EQ(j.fit.used_bytes, full->used_bytes());
          EXPECT_EQ(j.fit.capacity_bytes, full->capacity_bytes());
          EXPECT_EQ(j.fit.headroom_bytes, full->headroom_bytes());
          EXPECT_EQ(j.contention.verdict, full->verdict());
          EXPECT_DOUBLE_EQ(j.contention.worst_speed, full->worst_predicted_speed());
          // The words of a fit are CheckPlacement's.
          const std::string reasons = absl::StrJoin(full->reasons(), "\n");
          EXPECT_TRUE(absl::StrContains(reasons, MemoryFitWords(j.fit))) << reasons;
        }
      }
    }
  }
}

TEST_F(PlacementEngineTest, BadInputNamesTheField) {
  const std::vector<
      std::pair<std::function<void(v1::CheckPlacementRequest&)>, std::string>>
      cases = {
          {[](v1::CheckPlacementRequest& r) { r.mutable_gpu()->set_catalog_id("b200"); },
           "gpu.catalog_id"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_existing(0)->mutable_measured()->set_gpu_util(140);
           },
           "existing[0].measured.gpu_util"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_candidate()->mutable_measured()->set_source(
                 v1::UTILIZATION_SOURCE_ESTIMATE);
           },
           "candidate.measured.source"},
          {[](v1::CheckPlacementRequest& r) { r.clear_candidate(); }, "candidate"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_gpu()->mutable_node_reported()->set_total_bytes(common::kGiB);
             r.mutable_gpu()->mutable_node_reported()->set_free_bytes(2 * common::kGiB);
           },
           "gpu.node_reported.free_bytes"},
          // Estimated for the GPU it is placed on: another GPU named is refused, not
          // silently replaced.
          {[](v1::CheckPlacementRequest& r) {
             *r.mutable_candidate()->mutable_description() =
                 testing::ExampleRequest("cnn.json");
             r.mutable_candidate()->mutable_description()->set_gpu("h100-80gb");
           },
           "candidate.description.gpu"},
          // Reasons and outcomes name jobs: two of one name would read as one.
          {[](v1::CheckPlacementRequest& r) { r.mutable_candidate()->set_name("a"); },
           "candidate.name"},
          // 256 jobs of 60 KB names took 4.47 GB and 45 s of CPU: names are bounded.
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_existing(0)->set_name(std::string(kMaxJobNameBytes + 1, 'n'));
           },
           "existing[0].name: 321 bytes"},
          // 8,000 existing jobs grew the server to 1.1 GB (each reason lists the
          // others); 16,000 aborted it.
          {[](v1::CheckPlacementRequest& r) {
             for (int i = 0; i < kMaxExistingJobs; ++i) {
               *r.add_existing() =
                   testing::MeasuredJob(absl::StrCat("x", i), common::kGiB, 1);
             }
           },
           "existing:"},
      };
  for (const auto& [mutate, field] : cases) {
    v1::CheckPlacementRequest request;
    request.mutable_gpu()->set_catalog_id("a100-40gb");
    *request.add_existing() = testing::MeasuredJob("a", common::kGiB, 50);
    *request.mutable_candidate() = testing::MeasuredJob("b", common::kGiB, 50);
    mutate(request);
    auto r = placement_->CheckPlacement(request);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), field))
        << field << ": " << r.status().message();
  }
}

// Each job's reason names its busiest neighbours and counts the rest: the response
// grows with the jobs (it named every other job: 171 KB at 100 jobs, 872 KB at 256).
TEST_F(PlacementEngineTest, TheResponseGrowsLinearlyWithTheJobs) {
  // Jobs named by `name_bytes`-byte names.
  auto size_with = [](int jobs, size_t name_bytes) {
    v1::CheckPlacementRequest request;
    request.mutable_gpu()->set_catalog_id("h200");
    for (int i = 0; i < jobs; ++i) {
      std::string name = absl::StrCat("job-", i);
      name.resize(std::max(name.size(), name_bytes), '-');
      *request.add_existing() =
          testing::MeasuredJob(name, 100 * common::kMiB, 1 + i % 90);
    }
    *request.mutable_candidate() = testing::MeasuredJob("new", common::kGiB, 50);
    auto r = placement_->CheckPlacement(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->ByteSizeLong() : 0;
  };
  for (const size_t name_bytes : {size_t{8}, size_t{64}, kMaxJobNameBytes}) {
    SCOPED_TRACE(absl::StrCat(name_bytes, "-byte names"));
    const size_t ten = size_with(10, name_bytes);
    const size_t most = size_with(kMaxExistingJobs, name_bytes);
    if (name_bytes <= 64) {
      EXPECT_LE(most, 100u << 10);
    }
    EXPECT_LT(static_cast<double>(most) / ten, 2.0 * (kMaxExistingJobs + 1) / 11);
  }
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("h200");
  for (int i = 0; i < 5; ++i) {
    *request.add_existing() =
        testing::MeasuredJob(absl::StrCat("j", i), common::kGiB, 10 + i);
  }
  *request.mutable_candidate() = testing::MeasuredJob("new", common::kGiB, 50);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok());
  bool said = false;
  for (const std::string& reason : r->reasons()) {
    if (absl::StartsWith(reason, "'new'")) {
      said = absl::StrContains(reason, "beside 'j4', 'j3', 'j2' and 2 more jobs");
      EXPECT_TRUE(said) << reason;
    }
  }
  EXPECT_TRUE(said);
}

TEST_F(PlacementEngineTest, ADescriptionNamingTheTargetGpuIsAccepted) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  request.mutable_candidate()->mutable_description()->set_gpu("NVIDIA A100-SXM4-40GB");
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->candidate_bytes(), 0u);
}

TEST_F(PlacementEngineTest, RanksEveryCatalogGpuAndMigProfile) {
  v1::RankGpusRequest request;
  *request.mutable_job() = testing::MeasuredJob("job", 15 * common::kGiB, 50);
  auto r = placement_->RankGpus(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(static_cast<size_t>(r->gpus_size()),
            engine_->registry()->gpus().All().size());
  int mig = 0;
  bool seen_not_fitting = false;
  for (const v1::GpuRanking& g : r->gpus()) {
    mig += g.mig();
    EXPECT_EQ(g.fits(), g.headroom_bytes() >= 0) << g.gpu();
    // Fitting GPUs first, tightest first.
    if (!g.fits()) seen_not_fitting = true;
    EXPECT_FALSE(seen_not_fitting && g.fits()) << g.gpu();
  }
  EXPECT_GE(mig, 14);                 // A100 40GB, A100 80GB and H100 profiles.
  EXPECT_EQ(r->gpus(0).gpu(), "t4");  // 15 GiB: the 15 GiB T4 is the tightest fit.
  EXPECT_TRUE(r->gpus(0).fits());
}

// RankGpusRequest.gpus: only the GPUs a cluster has (ids, aliases or nvidia-smi names),
// each with its catalog aliases; one the catalog does not know is refused naming it.
TEST_F(PlacementEngineTest, RanksOnlyTheGpusNamedAndRefusesAnUnknownOne) {
  v1::RankGpusRequest request;
  *request.mutable_job() = testing::MeasuredJob("job", 15 * common::kGiB, 50);
  request.add_gpus("h100-80gb");
  request.add_gpus("NVIDIA A100-SXM4-40GB");
  auto r = placement_->RankGpus(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->gpus_size(), 2);
  EXPECT_EQ(r->gpus(0).gpu(), "a100-40gb");  // The tighter fit first.
  EXPECT_EQ(r->gpus(1).gpu(), "h100-80gb");
  EXPECT_FALSE(r->gpus(0).aliases().empty());
  request.add_gpus("b300");
  auto unknown = placement_->RankGpus(request);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "gpus[2]"))
      << unknown.status();
}

namespace field_bounds {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets the row's field, in the first message of its type in m (depth first over the
// fields that are set), to value; false when m holds none.
bool SetField(Message& m, const std::string& field, double value) {
  const Descriptor& d = *m.GetDescriptor();
  const Reflection& r = *m.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.full_name() == field) {
      if (f.is_repeated() && r.FieldSize(m, &f) == 0) return false;
      switch (f.cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          f.is_repeated() ? r.SetRepeatedInt32(&m, &f, 0, static_cast<int32_t>(value))
                          : r.SetInt32(&m, &f, static_cast<int32_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_INT64:
          f.is_repeated() ? r.SetRepeatedInt64(&m, &f, 0, static_cast<int64_t>(value))
                          : r.SetInt64(&m, &f, static_cast<int64_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_UINT32:
          f.is_repeated() ? r.SetRepeatedUInt32(&m, &f, 0, static_cast<uint32_t>(value))
                          : r.SetUInt32(&m, &f, static_cast<uint32_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_UINT64:
          f.is_repeated() ? r.SetRepeatedUInt64(&m, &f, 0, static_cast<uint64_t>(value))
                          : r.SetUInt64(&m, &f, static_cast<uint64_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f.is_repeated() ? r.SetRepeatedDouble(&m, &f, 0, value)
                          : r.SetDouble(&m, &f, value);
          return true;
        default:
          return false;
      }
    }
  }
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.message_type() == nullptr) continue;
    if (f.is_repeated()) {
      for (int k = 0; k < r.FieldSize(m, &f); ++k) {
        if (SetField(*r.MutableRepeatedMessage(&m, &f, k), field, value)) return true;
      }
    } else if (r.HasField(m, &f) && SetField(*r.MutableMessage(&m, &f), field, value)) {
      return true;
    }
  }
  return false;
}

bool IsUnsigned(const std::string& field) {
  const FieldDescriptor* f =
      google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(field);
  return f != nullptr && (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
                          f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64);
}

}  // namespace field_bounds

// Each row is enforced where the field is read: every field set just past its bounds,
// in a request that is otherwise valid, is refused by the table's check. (A layer's
// input_activations of -1 or 2^63-1 was answered as a smaller job that fits.)
TEST_F(PlacementEngineTest, EveryRowIsEnforcedOnEveryPath) {
  v1::CheckPlacementRequest with_model;
  with_model.mutable_gpu()->set_catalog_id("a100-40gb");
  *with_model.add_existing() = testing::MeasuredJob("measured", common::kGiB, 50);
  v1::PlacementJob* estimated = with_model.add_existing();
  estimated->set_name("estimated");
  estimated->mutable_estimate()->set_peak_bytes(common::kGiB);
  v1::UtilizationEstimate* u = estimated->mutable_estimate()->mutable_utilization();
  u->set_metric(v1::UTILIZATION_METRIC_GRACT);
  for (double e : {0.0, 0.5, 1.0}) u->add_bin_edges(e);
  u->add_probabilities(0.5);
  u->add_probabilities(0.5);
  u->set_predicted_class(1);
  u->set_confidence(0.5);
  v1::EstimateRequest description = testing::ExampleRequest("resnet50.json");
  v1::ModelDescription* m = description.mutable_model();
  ASSERT_TRUE(m->has_trace());
  m->set_sequence_length(1);
  m->mutable_stack()->set_cuda_major(13);
  m->mutable_stack()->set_module_loading("LAZY");
  m->mutable_allocator()->set_max_split_size_mb(512);
  m->mutable_parallelism()->set_data_parallel(1);
  m->mutable_parallelism()->set_tensor_parallel(1);
  m->mutable_parallelism()->set_largest_unit_bytes(common::kMiB);
  for (v1::Layer& layer : *m->mutable_layers()) {
    if (layer.input_activations() == 0) layer.set_input_activations(1);
  }
  *with_model.mutable_candidate()->mutable_description() = description;

  v1::CheckPlacementRequest with_features;
  with_features.mutable_gpu()->mutable_node_reported()->set_total_bytes(80 *
                                                                        common::kGiB);
  with_features.mutable_gpu()->mutable_node_reported()->set_free_bytes(60 * common::kGiB);
  v1::FeatureVector* f =
      with_features.mutable_candidate()->mutable_description()->mutable_features();
  f->set_family(v1::MODEL_FAMILY_CNN);
  f->set_batch_size(32);
  f->set_total_parameters(1000000);
  f->set_total_activations(1000000);
  f->set_depth(10);
  f->set_sequence_length(1);
  (*f->mutable_layer_counts())["Conv2d"] = 5;
  for (const v1::CheckPlacementRequest* base : {&with_model, &with_features}) {
    auto ok = placement_->CheckPlacement(*base);
    ASSERT_TRUE(ok.ok()) << ok.status();
  }

  const core::ValidationLimits limits;
  for (const core::FieldBound& row : core::AllFieldBounds()) {
    const double max = core::UpperBound(row, limits);
    std::vector<double> outside = {max < 1e6 ? max + 1 : max * 2};
    if (row.min > 0 || !field_bounds::IsUnsigned(row.field))
      outside.push_back(row.min - 1);
    for (double value : outside) {
      bool set = false;
      for (const v1::CheckPlacementRequest* base : {&with_model, &with_features}) {
        v1::CheckPlacementRequest request = *base;
        if (!field_bounds::SetField(request, row.field, value)) continue;
        set = true;
        auto r = placement_->CheckPlacement(request);
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
            << row.field << " = " << value;
        EXPECT_TRUE(absl::StrContains(r.status().message(), "must be within"))
            << row.field << " = " << value << ": " << r.status();
      }
      EXPECT_TRUE(set) << row.field << ": no base request holds it";
    }
  }
}

}  // namespace
}  // namespace gpuest::placement
