// File: transient_evidence.h
//
// Completed runs whose measured peak holds more than the job needs, found with the
// trace. What the traced step does not explain (the CUDA context, cuDNN's and cuBLAS's
// workspaces, the allocator's rounding) cannot fall as the batch grows. Where it is
// larger at a smaller batch of a model than at a larger one, the difference is a
// transient: cuDNN benchmark mode's algorithm search, sized by the free memory
// (../shared/data/README.md, timm section; data/h200-benchmark-mode/). That is the
// data's SPIKE rule ("memory needed cannot fall as the batch grows") applied to the
// part of the peak the trace leaves unexplained, so it also finds the smaller
// transients that keep the raw peak rising with the batch.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpuest::calibration {

// One completed run: its measured peak and its traced step's simulated reserved peak.
struct PeakRun {
  std::string model;
  int batch = 0;
  double measured_mib = 0;
  double simulated_mib = 0;
};

// The case that a run's peak holds a transient: its excess over the traced step, and
// the smaller excess of a larger batch of the same model (the largest drop found).
struct TransientCase {
  int larger_batch = 0;
  double excess_mib = 0;         // measured - simulated, at the run's batch.
  double larger_excess_mib = 0;  // The same at larger_batch.
};

// A drop smaller than this is not evidence: the simulated reserved peak is a median
// 3.6 % (mean |error| 5.4 %) from the step's on the H200 (data/h200-benchmark-off/),
// and heuristic-mode workspaces change with the shape. The margin is 512 MiB plus
// this share of the larger batch's simulated peak.
inline constexpr double kTransientMarginMib = 512;
inline constexpr double kTransientMarginShare = 0.10;

// Per run, in input order: its case, or none. Runs of the same model are compared only
// with each other, across batch sizes.
std::vector<std::optional<TransientCase>> FindTransients(
    const std::vector<PeakRun>& runs);

}  // namespace gpuest::calibration
