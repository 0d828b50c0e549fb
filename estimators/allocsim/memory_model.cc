#include "estimators/allocsim/memory_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/units.h"
#include "estimators/core/layer_types.h"

namespace gpuest::allocsim {
namespace {

// Saturates: a figure beyond 2^64 bytes is reported as the largest, never wrapped.
uint64_t Bytes(double value) {
  if (!(value > 0)) return 0;
  constexpr double kTwoTo64 = 18446744073709551616.0;
  if (value + 0.5 >= kTwoTo64) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(value + 0.5);
}

// Everything the upper bound adds outside the simulated reserve, in bytes.
double OutsideBytes(const core::GpuProfile& gpu, const FamilyCalibration& calibration,
                    double largest_conv_output_mib) {
  return static_cast<double>(gpu.context_bytes) +
         calibration.intercept_mib * common::kMiB +
         calibration.conv_output_factor * largest_conv_output_mib * common::kMiB;
}

}  // namespace

std::vector<PersistentAllocation> CublasWorkspaces(uint64_t bytes_per_workspace) {
  if (bytes_per_workspace == 0) return {};
  constexpr int kThreadsCallingCublas =
      2;  // The forward's, and autograd's device thread.
  return std::vector<PersistentAllocation>(kThreadsCallingCublas, {bytes_per_workspace});
}

absl::StatusOr<ReplayResult> SimulatePeak(const v1::AllocationTrace& trace,
                                          const core::GpuProfile& gpu,
                                          const AllocatorConfig& config, int steps,
                                          const common::WorkDeadline& deadline) {
  return ReplayUntilSettled(trace, config, CublasWorkspaces(gpu.cublas_workspace_bytes),
                            steps, deadline);
}

bool HasConvolution(const v1::ModelDescription& model) {
  return std::any_of(
      model.layers().begin(), model.layers().end(), [](const v1::Layer& layer) {
        return core::ClassifyLayerType(layer.type()).kind == core::LayerKind::kConv;
      });
}

bool WithoutConvolutions(const v1::ModelDescription& model) {
  return model.layers_size() > 0 && !HasConvolution(model);
}

bool TraceHoldsWorkspaces(const v1::AllocationTrace& trace) {
  return std::find(trace.category().begin(), trace.category().end(),
                   v1::ALLOCATION_CATEGORY_WORKSPACE) != trace.category().end();
}

FamilyCalibration WithUntracedWorkspaces(const FamilyCalibration& calibration,
                                         const v1::ModelDescription& model,
                                         const v1::AllocationTrace& trace,
                                         bool* stand_in) {
  FamilyCalibration out = calibration;
  *stand_in = HasConvolution(model) && !TraceHoldsWorkspaces(trace);
  if (*stand_in) out.conv_output_factor += kUntracedWorkspacePerConvOutput;
  return out;
}

double LargestConvOutputMib(const v1::ModelDescription& model) {
  double largest = 0;
  for (const v1::Layer& l : model.layers()) {
    if (core::ClassifyLayerType(l.type()).kind == core::LayerKind::kConv) {
      largest = std::max(largest, 4.0 * static_cast<double>(l.output_activations()) *
                                      static_cast<double>(model.batch_size()));
    }
  }
  return largest / common::kMiB;
}

uint64_t AllocatorCapacity(const core::GpuProfile& gpu,
                           const FamilyCalibration& calibration,
                           double largest_conv_output_mib) {
  const double outside = OutsideBytes(gpu, calibration, largest_conv_output_mib);
  const double share =
      (gpu.memory_bytes - outside) / std::max(1.0, calibration.safe_factor);
  // At least one byte: 0 would mean "unlimited" to the allocator.
  return std::max<uint64_t>(1, Bytes(share));
}

v1::MemoryEstimate CalibratedEstimate(const ReplayResult& replay,
                                      const core::GpuProfile& gpu,
                                      const FamilyCalibration& calibration,
                                      double largest_conv_output_mib) {
  const double reserved = static_cast<double>(replay.peak_reserved_bytes);
  const double outside = OutsideBytes(gpu, calibration, largest_conv_output_mib);
  v1::MemoryEstimate m;
  m.set_point_bytes(Bytes(gpu.context_bytes +
                          calibration.point_intercept_mib * common::kMiB +
                          calibration.point_factor * reserved));
  // The uncertain layers widen the bound as the simulated peak would have grown.
  const double uncertain = static_cast<double>(replay.uncertain_bytes);
  m.set_upper_bytes(
      std::max(m.point_bytes(),
               Bytes(outside + calibration.safe_factor * (reserved + uncertain))));
  m.set_uncertain_bytes(replay.uncertain_bytes);
  m.set_gpu_constants(gpu.constants_calibrated ? v1::GPU_CONSTANTS_CALIBRATED
                                               : v1::GPU_CONSTANTS_ASSUMED);
  m.set_allocated_peak_bytes(replay.peak_allocated_bytes);
  m.set_reserved_peak_bytes(replay.peak_reserved_bytes);

  const CategoryBytes& live = replay.live_at_peak;
  v1::MemoryBreakdown& b = *m.mutable_breakdown();
  b.set_weights_bytes(live[v1::ALLOCATION_CATEGORY_PARAMETER]);
  b.set_gradients_bytes(live[v1::ALLOCATION_CATEGORY_GRADIENT]);
  b.set_optimizer_state_bytes(live[v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE]);
  b.set_inputs_bytes(live[v1::ALLOCATION_CATEGORY_INPUT]);
  b.set_activations_bytes(live[v1::ALLOCATION_CATEGORY_ACTIVATION]);
  b.set_temporaries_bytes(live[v1::ALLOCATION_CATEGORY_TEMPORARY]);
  b.set_workspaces_bytes(live[v1::ALLOCATION_CATEGORY_WORKSPACE]);
  // Index 0 holds the persistent library workspaces (validation refuses uncategorised
  // trace events).
  b.set_context_bytes(gpu.context_bytes + live[0]);
  // Reserved beyond the tensors' rounded sizes: cached free blocks, and the unsplit
  // remainders of blocks handed out whole (the allocator counts those as allocated).
  uint64_t tensors = 0;
  for (uint64_t bytes : live) tensors += bytes;
  b.set_fragmentation_bytes(replay.peak_reserved_bytes -
                            std::min(tensors, replay.peak_reserved_bytes));
  const uint64_t widening = Bytes(calibration.safe_factor * uncertain);
  const uint64_t explained = replay.peak_reserved_bytes + gpu.context_bytes;
  const uint64_t beyond = m.upper_bytes() > explained ? m.upper_bytes() - explained : 0;
  b.set_uncertain_layers_bytes(std::min(widening, beyond));
  b.set_calibration_bytes(beyond - b.uncertain_layers_bytes());
  return m;
}

}  // namespace gpuest::allocsim
