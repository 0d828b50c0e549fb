// The card and the training rows the calibration's tests fit on: a 40 GiB card with a
// 1,000 MiB context, and rows of a simulated reserved peak and a measured one.
#pragma once

#include <cstdint>

#include "estimators/core/gpu_profiles.h"
#include "lab/calibration/calibration.h"

namespace gpuest::calibration::test_rows {

inline constexpr uint64_t kMiB = 1 << 20;

inline core::GpuProfile Card() {
  core::GpuProfile gpu;
  gpu.id = "card";
  gpu.memory_bytes = 40960 * kMiB;
  gpu.context_bytes = 1000 * kMiB;
  gpu.constants_calibrated = true;
  return gpu;
}

inline CalibrationRow Row(double simulated_mib, double measured_mib) {
  CalibrationRow row;
  row.replay.peak_reserved_bytes = static_cast<uint64_t>(simulated_mib * kMiB);
  row.measured_mib = measured_mib;
  return row;
}

}  // namespace gpuest::calibration::test_rows
