// File: gpu_profiles.h
//
// The GPU models a request can target, read from gpu_profiles.json in the model
// repository (gpu_profiles_manifest.h reads and writes the file): capacity and
// architecture for fit decisions, and the constants the memory simulation adds to the
// allocator's peak.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuest::core {

// A context measured on one software stack (stack_context.h chooses among them).
struct StackContext {
  uint32_t cuda_major = 0;     // The CUDA runtime's major version.
  std::string torch;           // "2.11" (major.minor); empty: any.
  std::string module_loading;  // "LAZY" or "EAGER".
  uint64_t context_bytes = 0;
  std::string basis;  // Where it was measured: host, date, driver, versions.
  // Non-empty: measured on that GPU, not this one (GpuProfiles::LendContexts), so the
  // figure is an assumption here, with a margin.
  std::string lent_by;
};

struct GpuProfile {
  std::string id;    // "a100-40gb"
  std::string name;  // "NVIDIA A100-SXM4-40GB"
  std::string architecture;
  // Total memory as nvidia-smi reports it.
  uint64_t memory_bytes = 0;
  std::vector<std::string> aliases;
  // Memory a training process holds outside the caching allocator: CUDA context,
  // library handles, loaded kernels.
  uint64_t context_bytes = 0;
  // cuBLAS workspace, allocated through the caching allocator for the process lifetime.
  uint64_t cublas_workspace_bytes = 0;
  // Whether the two constants above were calibrated on measurements of this GPU (else
  // they are documented assumptions), and where they come from.
  bool constants_calibrated = false;
  std::string constants_basis;
  // Contexts measured on given stacks; context_bytes above is the figure for a job
  // whose stack none of them matches (stack_context.h).
  std::vector<StackContext> contexts;
  // The stack context_bytes was calibrated on, where the calibration recorded it
  // (gpu_profiles.json "context_stack": cuda_major, torch, module_loading; its
  // context_bytes and basis unused): a job on another stack takes the figure as one
  // measured on another stack, with the margin and a warning (stack_context.h rule 3).
  std::optional<StackContext> context_stack;
};

struct GpuProfilesManifest;  // gpu_profiles_manifest.h: the file's format.

// Whether the profile is a MIG instance of a larger GPU: its nvidia-smi name says
// "MIG" ("NVIDIA A100-SXM4-40GB MIG 1g.5gb").
bool IsMigProfile(const GpuProfile& profile);

class GpuProfiles {
 public:
  static absl::StatusOr<GpuProfiles> LoadFile(const std::string& path);
  // The file's text; errors name it "GPU profiles".
  static absl::StatusOr<GpuProfiles> Parse(const std::string& json_text);
  explicit GpuProfiles(const GpuProfilesManifest& manifest);

  // By id, alias or the name nvidia-smi prints ("NVIDIA A100-SXM4-80GB"),
  // case-insensitively; nullptr when unknown.
  const GpuProfile* Find(absl::string_view name) const;
  // The GPU the shipped estimators were trained on.
  const GpuProfile& Default() const { return profiles_[default_index_]; }
  const std::vector<GpuProfile>& All() const { return profiles_; }
  // "a100-40gb, a100-80gb, ..." for error messages.
  std::string KnownIds() const;
  // A context `gpuest-collect context` measured on a GPU of this nvidia-smi name (or
  // id, or alias): NotFound when no profile has it.
  absl::Status AddMeasuredContext(absl::string_view gpu_name, StackContext context);
  // A GPU with no context measured on it, and none calibrated on its own
  // measurements (constants "assumed"), takes those measured on the other GPUs
  // (lent_by set): the context follows the driver and software stack far more than
  // the GPU (758 MiB on an H100, 775 on an H200 on one stack; 2,052 eager against 758
  // lazy on the same H100), so a figure measured on the job's stack on another GPU is
  // a better assumption than a figure fitted on another stack (stack_context.h adds
  // the margin and the warning). Called once every context is in.
  void LendContexts();

 private:
  std::vector<GpuProfile> profiles_;
  size_t default_index_ = 0;
};

}  // namespace gpuest::core
