// estimators/core/stack_context: the context a job's stack chooses on a GPU (measured
// on that stack, else the nearest with a margin and a warning, else the profile's
// own), and the simulation's estimate holding exactly the chosen context.
#include "estimators/core/stack_context.h"

#include <cmath>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/estimators/allocsim/simulation_test_requests.h"

namespace gpuest::core {
namespace {

using allocsim::test_requests::Card;
using allocsim::test_requests::Create;
using allocsim::test_requests::EstimateWith;
using allocsim::test_requests::HasWarning;
using allocsim::test_requests::Manifest;
using allocsim::test_requests::MiB;
using allocsim::test_requests::MlpRequest;
using allocsim::test_requests::Outcome;

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
// A file of `gpuest-collect context`: the GPU's name and the context on its stack,
// where it came from in the basis; a key missing or a value out of range is refused
// naming the file and the key.
TEST(StackContext, ACollectedContextFileNamesItsGpuAndStack) {
  const std::string text = R"({"format": "gpuest-context/1",
    "gpu_name": "NVIDIA H100 80GB HBM3", "driver": "580.65", "context_mib": 757.6,
    "host": "node-1", "workloads": [{"name": "cnn", "context_mib": 757.6}],
    "stack": {"torch": "2.11.0+cu130", "cuda": "13.0", "cuda_major": 13,
              "module_loading": "LAZY"}})";
  auto parsed = ParseCollectedContext(text, "h100.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first, "NVIDIA H100 80GB HBM3");
  const StackContext& c = parsed->second;
  EXPECT_EQ(c.cuda_major, 13u);
  EXPECT_EQ(c.torch, "2.11");
  EXPECT_EQ(c.module_loading, "LAZY");
  EXPECT_EQ(c.context_bytes, 758 * MiB);
  EXPECT_EQ(c.basis,
            "gpuest-collect context on node-1, driver 580.65, torch 2.11.0+cu130, CUDA "
            "13.0; h100.json");
  const auto refused = [&](const std::string& from, const std::string& to) {
    std::string broken = text;
    broken.replace(broken.find(from), from.size(), to);
    return ParseCollectedContext(broken, "h100.json").status();
  };
  const absl::Status format = refused("context/1", "context/2");
  EXPECT_EQ(format.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(format.message(), "h100.json")) << format;
  EXPECT_TRUE(absl::StrContains(format.message(), "not gpuest-context/1")) << format;
  EXPECT_TRUE(absl::StrContains(refused("\"LAZY\"", "\"lazy\"").message(),
                                "must be LAZY or EAGER"));
  EXPECT_TRUE(
      absl::StrContains(refused("\"cuda_major\": 13", "\"cuda_major\": 0").message(),
                        "must be a CUDA major version"));
  EXPECT_TRUE(
      absl::StrContains(refused("\"driver\": \"580.65\", ", "").message(), "driver"));
  EXPECT_FALSE(refused("\"host\"", "\"hostname\"").ok());
}

}  // namespace
}  // namespace gpuest::core
