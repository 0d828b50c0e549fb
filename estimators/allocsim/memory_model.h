// File: memory_model.h
//
// The one memory model: a training step's allocations, replayed through the
// caching-allocator simulation on a GPU profile, turned into the peak nvidia-smi would
// show. Served by the simulation estimators and calibrated by gpuest-calibrate-memory,
// so both use exactly the same arithmetic:
//
//   point = context + point_intercept + point_factor x simulated peak reserved
//   upper = context + intercept       + safe_factor  x (simulated peak reserved
//                                                       + uncertain bytes)
//                   + conv_output_factor x the largest convolution output of the batch
//
// where the uncertain bytes are what a layer-built step cannot settle (layer_trace.h;
// 0 for a trace): the bound widens for that job alone.
//
// context is the GPU's memory outside the allocator; the simulated peak includes the
// cuBLAS workspace. intercept and the factors are per family, fitted on measurements:
// they stand for what the trace cannot see (cuDNN workspaces, kernels and tensors a
// CPU-side trace leaves out or adds).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "estimators/allocsim/trace_replay.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::allocsim {

struct FamilyCalibration {
  double intercept_mib = 0;
  double safe_factor = 1;  // Keeps the calibration quantile of rows at or under it.
  // The median fit: half the measured rows above, half below.
  double point_intercept_mib = 0;
  double point_factor = 1;
  // Upper bound only: MiB per MiB of the job's largest convolution output (fp32, at its
  // batch). It covers what the convolutions hold beyond the workspaces the describer
  // traces (python/gpuest/describe/conv_workspace.py: a transform of each call's
  // tensors; cuDNN's engines also take larger ones, as for a depthwise 7x7 filter's
  // gradient), and, for a layer-built step, the workspaces themselves. Fitted on real
  // models' errors out of their architecture group (lab/calibration); 0 for a
  // family without convolutions measured.
  double conv_output_factor = 0;
};

// Whether a layer of the model is a convolution (by the layer-type table).
bool HasConvolution(const v1::ModelDescription& model);

// Whether the model is known to have no convolution: it lists its layers and none is
// one. Such a step runs no cuDNN convolution (FamilyTerms::without_convolutions).
bool WithoutConvolutions(const v1::ModelDescription& model);

// The largest convolution output of one batch, fp32, in MiB (0 without convolutions):
// what conv_output_factor multiplies. Computed in floating point, so a huge batch
// cannot wrap it.
double LargestConvOutputMib(const v1::ModelDescription& model);

// Whether the trace carries cuDNN's convolution workspaces (ALLOCATION_CATEGORY_WORKSPACE
// events, which gpuest.describe writes at each convolution call since they were modeled).
bool TraceHoldsWorkspaces(const v1::AllocationTrace& trace);

// A traced step of a model with convolutions whose trace holds no workspace (an older
// describer's): the workspaces are not in the simulation, so the upper bound adds this
// many times the largest convolution output for them. One call's workspace is held at a
// time, and the heuristics' engines hold at most a transformed copy of that call's
// tensors (python/gpuest/describe/conv_workspace.py): its output, its input (twice the
// output where a stride-2 convolution doubles the channels, as ResNet's downsampling
// does) and its filter: about three outputs.
inline constexpr double kUntracedWorkspacePerConvOutput = 3.0;

// The calibration to apply to this model's trace: `calibration`, plus the stand-in above
// where the trace should hold workspaces and does not. Sets *stand_in when it added it.
FamilyCalibration WithUntracedWorkspaces(const FamilyCalibration& calibration,
                                         const v1::ModelDescription& model,
                                         const v1::AllocationTrace& trace,
                                         bool* stand_in);

// The cuBLAS workspaces a training process holds through the caching allocator: one per
// (cuBLAS handle, stream) (CublasHandlePool.cpp, cublas_handle_stream_to_workspace), and
// each thread takes its own handle from the pool (DeviceThreadHandlePool): the forward's
// thread and autograd's device thread, which runs the backward, hold one each. Measured
// on an H200 (data/h200-benchmark-off/): with one, 60 timm models' simulated allocated
// peaks sat a median 35 MiB under max_memory_allocated, about one 32 MiB workspace.
std::vector<PersistentAllocation> CublasWorkspaces(uint64_t bytes_per_workspace);

// Replays the trace on the GPU (its cuBLAS workspaces held from the start): at least
// `steps` steps, on until the reserved peak settles (ReplayUntilSettled), until the
// deadline.
// config.capacity_bytes, when set, is the allocator's share of the card.
absl::StatusOr<ReplayResult> SimulatePeak(
    const v1::AllocationTrace& trace, const core::GpuProfile& gpu,
    const AllocatorConfig& config, int steps,
    const common::WorkDeadline& deadline = common::WorkDeadline::Never());

// The allocator's share of the card under this calibration: the largest simulated
// reserved peak whose safe estimate still fits.
uint64_t AllocatorCapacity(const core::GpuProfile& gpu,
                           const FamilyCalibration& calibration,
                           double largest_conv_output_mib);

// Point, upper bound and the breakdown (which adds up to the upper bound: the figure
// a scheduler reserves).
v1::MemoryEstimate CalibratedEstimate(const ReplayResult& replay,
                                      const core::GpuProfile& gpu,
                                      const FamilyCalibration& calibration,
                                      double largest_conv_output_mib);

}  // namespace gpuest::allocsim
