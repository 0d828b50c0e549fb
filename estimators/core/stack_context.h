// File: stack_context.h
//
// The context of a training process (the device memory it holds outside PyTorch's
// caching allocator: the CUDA context, cuDNN / cuBLAS handle state, the kernel modules
// loaded) is a constant of the GPU and the software stack, not of the job: an H100
// with torch 2.11 / CUDA 13 holds 758 MiB with lazy module loading and 2,052 MiB with
// eager loading (data/h100-clean-runs/). So a GPU's profile holds one context per
// stack it was measured on, each with where it came from, and the figure for a job is
// chosen by the stack the describer recorded (ModelDescription.stack):
//
//   1. a context measured on the job's stack (CUDA major and module loading; the torch
//      version too where the entry names one);
//   2. the job's CUDA not recorded (a CPU-only describe, an older describer): the
//      largest measured on the GPU with the job's module loading, what the collector
//      saw on that GPU's nodes;
//   3. measured on other stacks only: the nearest one plus a margin, with a warning;
//   4. none measured: the profile's context_mib (calibrated on the GPU's data or
//      assumed, as its constants say); where the calibration recorded the stack it
//      was fitted on (GpuProfile::context_stack), a job on another stack takes it as
//      rule 3 takes a figure measured on another stack, with the margin and a warning.
//
// Measured contexts come from gpu_profiles.json ("contexts" of a GPU) and from the
// files `gpuest-collect context` writes, dropped into the model repository's
// contexts/ directory (read at start and on a reload, no rebuild).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::core {

// A context measured on a stack is used for another with this margin (a documented
// allowance, not a fit: between the stacks measured so far, CUDA 12 on the A100's
// data to CUDA 13 on the H100, the context moved by more than that, so it is shown
// in the warning and the basis, never hidden).
inline constexpr double kOtherStackMargin = 0.25;
// Eager over lazy loading on the same stack: 2,052 / 758 MiB on the H100 (the fp32 CNN
// workload of gpuest-collect context, data/h100-clean-runs/): an eager job on a GPU
// measured lazy only takes the lazy figure times this.
inline constexpr double kEagerOverLazy = 2.71;

struct ContextChoice {
  uint64_t bytes = 0;
  bool measured = false;  // On the job's own stack (rules 1 and 2).
  std::string basis;      // Where the figure came from, for the answer's basis.
  std::string warning;    // Non-empty for rules 3 and 4 where a stack was measured.
};

ContextChoice ChooseContext(const GpuProfile& gpu, const v1::ModelDescription& model);

// A file of `gpuest-collect context` (format gpuest-context/1): the GPU's nvidia-smi
// name and the context measured on its stack. InvalidArgument names the file and key.
absl::StatusOr<std::pair<std::string, StackContext>> ParseCollectedContext(
    const std::string& text, const std::string& file);

}  // namespace gpuest::core
