#include "estimators/core/stack_context.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/strict_json.h"
#include "common/units.h"

namespace gpuest::core {
namespace {

// "2.11.0" -> "2.11": the context follows the minor release, not the patch.
std::string MajorMinor(const std::string& version) {
  std::vector<std::string> parts = absl::StrSplit(version, absl::MaxSplits('.', 2));
  if (parts.size() < 2) return version;
  return absl::StrCat(parts[0], ".", parts[1]);
}

std::string Describe(const StackContext& c) {
  return absl::StrFormat("%.0f MiB measured with CUDA %d%s, %s module loading (%s)",
                         common::InMiB(static_cast<double>(c.context_bytes)),
                         c.cuda_major,
                         c.torch.empty() ? "" : absl::StrCat(", torch ", c.torch),
                         c.module_loading == "EAGER" ? "eager" : "lazy", c.basis);
}

uint64_t Scaled(uint64_t bytes, double factor) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * factor));
}

}  // namespace

namespace {

// The job's stack as the contexts are matched to it.
struct JobStack {
  const v1::SoftwareStack& stack;
  std::string loading;  // "LAZY" where the description does not say.
  std::string torch;    // Major.minor; empty where unknown.
};

// How far a context measured on stack c is from the job's: 0 on its own stack.
int Distance(const StackContext& c, const JobStack& job) {
  int distance = c.module_loading == job.loading ? 0 : 1000;
  // Without the job's CUDA (a CPU-only describe) the describing torch need not be the
  // job's either: the GPU's nodes' stack stands for both.
  if (job.stack.cuda_major() == 0) return distance;
  distance += 10 * std::abs(static_cast<int>(c.cuda_major) -
                            static_cast<int>(job.stack.cuda_major()));
  if (!c.torch.empty() && c.torch != job.torch) distance += 1;
  return distance;
}

// A context and its distance from the job's stack.
struct Nearest {
  const StackContext* context = nullptr;
  int distance = 0;
};

// The nearest measured context (the largest of those as near). The contexts measured
// on this GPU come first; those lent by other GPUs only when it has none.
Nearest NearestMeasured(const GpuProfile& gpu, const JobStack& job) {
  std::vector<const StackContext*> own, lent;
  for (const StackContext& c : gpu.contexts)
    (c.lent_by.empty() ? own : lent).push_back(&c);
  const std::vector<const StackContext*>& candidates = own.empty() ? lent : own;
  Nearest best;
  for (const StackContext* c : candidates) {
    const int distance = Distance(*c, job);
    if (best.context == nullptr || distance < best.distance ||
        (distance == best.distance && c->context_bytes > best.context->context_bytes)) {
      best = {c, distance};
    }
  }
  return best;
}

// The profile's own figure as a context measured on the stack it was calibrated on.
StackContext CalibratedContext(const GpuProfile& gpu) {
  StackContext calibrated = *gpu.context_stack;
  calibrated.context_bytes = gpu.context_bytes;
  calibrated.basis = absl::StrCat("calibrated on ", gpu.id, "'s measurements");
  calibrated.lent_by.clear();
  return calibrated;
}

// Rules 1 and 2: a context measured on the job's stack, or on the GPU's nodes' where
// the job's CUDA is not recorded.
ContextChoice OnTheJobsStack(const GpuProfile& gpu, const JobStack& job,
                             const StackContext& best) {
  ContextChoice choice;
  choice.bytes = best.context_bytes;
  choice.measured = true;
  choice.basis = job.stack.cuda_major() != 0
                     ? absl::StrCat("the job's stack: ", Describe(best))
                     : absl::StrCat("the stack measured on ", gpu.id,
                                    "'s nodes (the description does not record the "
                                    "job's CUDA: a CPU-only describe): ",
                                    Describe(best));
  return choice;
}

// Rule 3: the nearest stack measured, here or on another GPU, with the margin (and
// eager from lazy by the measured ratio), said in a warning.
ContextChoice OnTheNearestStack(const GpuProfile& gpu, const JobStack& job,
                                const StackContext& best) {
  ContextChoice choice;
  const std::string& loading = job.loading;
  double factor = 1 + kOtherStackMargin;
  std::string how = absl::StrFormat("+%.0f %%", 100 * kOtherStackMargin);
  if (best.module_loading != loading) {
    factor = loading == "EAGER" ? kEagerOverLazy : 1.0;
    how = loading == "EAGER" ? absl::StrFormat("x%.2f for eager loading", kEagerOverLazy)
                             : "eager's figure kept for a lazy job";
  }
  choice.bytes = Scaled(best.context_bytes, factor);
  const std::string where =
      best.lent_by.empty() ? "" : absl::StrCat(" on ", best.lent_by, ", not on ", gpu.id);
  choice.basis =
      absl::StrCat("the nearest measured stack", where, ", ", Describe(best), ", ", how);
  choice.warning = absl::StrFormat(
      "%s's context is not measured on the job's stack (CUDA %s, %s module loading, "
      "torch "
      "%s); it takes %.0f MiB: %s. Measure it on the job's nodes with `gpuest-collect "
      "context` and drop the file into the models' contexts/",
      gpu.id,
      job.stack.cuda_major() ? absl::StrCat(job.stack.cuda_major()) : "not recorded",
      loading == "EAGER" ? "eager" : "lazy", job.torch.empty() ? "unknown" : job.torch,
      common::InMiB(static_cast<double>(choice.bytes)), choice.basis);
  return choice;
}

}  // namespace

ContextChoice ChooseContext(const GpuProfile& gpu, const v1::ModelDescription& model) {
  const v1::SoftwareStack& stack = model.stack();
  const JobStack job{stack,
                     stack.module_loading().empty() ? "LAZY" : stack.module_loading(),
                     MajorMinor(model.framework_version())};
  Nearest best = NearestMeasured(gpu, job);
  // Rule 4: nothing measured anywhere: the profile's own figure. Where the calibration
  // recorded the stack it was fitted on, a job on another stack takes it as rule 3
  // takes a figure measured on another stack, never silently.
  StackContext calibrated;
  if (best.context == nullptr && gpu.constants_calibrated && gpu.context_stack) {
    calibrated = CalibratedContext(gpu);
    best = {&calibrated, Distance(calibrated, job)};
    if (best.distance == 0) {
      ContextChoice choice;
      choice.bytes = calibrated.context_bytes;
      choice.basis =
          absl::StrCat("calibrated on the job's stack: ", Describe(calibrated));
      return choice;
    }
  }
  if (best.context == nullptr) {
    ContextChoice choice;
    choice.bytes = gpu.context_bytes;
    // The profile's basis is long; an assumed one is quoted whole in its warning.
    choice.basis = gpu.constants_calibrated ? "calibrated" : "assumed";
    return choice;
  }
  if (best.distance == 0 && best.context->lent_by.empty()) {
    return OnTheJobsStack(gpu, job, *best.context);
  }
  return OnTheNearestStack(gpu, job, *best.context);
}

absl::StatusOr<std::pair<std::string, StackContext>> ParseCollectedContext(
    const std::string& text, const std::string& file) {
  using Json = nlohmann::ordered_json;
  using Fields = common::strict_json::Fields<Json>;
  GPUEST_ASSIGN_OR_RETURN(const Json doc, Fields::Parse(text, file));
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(doc, file));
  std::string format, gpu_name, driver, host, measured_at;
  double context_mib = 0;
  GPUEST_RETURN_IF_ERROR(f.Get("format", format));
  if (format != "gpuest-context/1") {
    return f.Error("format",
                   absl::StrCat("is '", format.substr(0, 64), "', not gpuest-context/1"));
  }
  GPUEST_RETURN_IF_ERROR(f.Get("gpu_name", gpu_name));
  GPUEST_RETURN_IF_ERROR(f.Get("driver", driver));
  GPUEST_RETURN_IF_ERROR(f.Get("context_mib", context_mib));
  GPUEST_RETURN_IF_ERROR(f.GetOptional("host", host));
  GPUEST_RETURN_IF_ERROR(f.GetOptional("measured_at", measured_at));
  GPUEST_ASSIGN_OR_RETURN(const Json* workloads, f.Value("workloads"));
  (void)workloads;  // Kept for people: the figure is the largest of them.
  GPUEST_ASSIGN_OR_RETURN(Fields s, f.Object("stack"));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  StackContext c;
  std::string torch, cuda;
  int64_t cudnn = 0;
  GPUEST_RETURN_IF_ERROR(s.Get("torch", torch));
  GPUEST_RETURN_IF_ERROR(s.Get("cuda", cuda));
  int cuda_major = 0;
  GPUEST_RETURN_IF_ERROR(s.Get("cuda_major", cuda_major));
  GPUEST_RETURN_IF_ERROR(s.Get("module_loading", c.module_loading));
  GPUEST_RETURN_IF_ERROR(s.GetOptional("cudnn", cudnn));
  GPUEST_RETURN_IF_ERROR(s.Finish());
  if (c.module_loading != "LAZY" && c.module_loading != "EAGER") {
    return s.Error("module_loading", "must be LAZY or EAGER");
  }
  if (cuda_major < 1 || cuda_major > 99) {
    return s.Error("cuda_major", "must be a CUDA major version");
  }
  c.cuda_major = static_cast<uint32_t>(cuda_major);
  if (!(context_mib >= 0 && context_mib < 1e6)) {
    return f.Error("context_mib", "must be a context in MiB");
  }
  c.torch = MajorMinor(torch);
  c.context_bytes = static_cast<uint64_t>(std::llround(context_mib)) << 20;
  c.basis = absl::StrCat("gpuest-collect context", host.empty() ? "" : " on " + host,
                         measured_at.empty() ? "" : " at " + measured_at, ", driver ",
                         driver, ", torch ", torch, ", CUDA ", cuda, "; ", file);
  return std::make_pair(gpu_name, c);
}

}  // namespace gpuest::core
