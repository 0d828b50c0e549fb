// File: horus.h
//
// The Horus formula as the GPUMemNet study applies it: the analytical baseline.
// bytes = 4 x (A x B + P + B x P), A activations per sample, P parameters, B batch size.
#pragma once

#include <cstdint>
#include <memory>

#include "estimators/core/estimator.h"

namespace gpuest::horus {

uint64_t HorusBytes(int64_t activations_per_sample, int64_t parameters,
                    int64_t batch_size);

std::unique_ptr<core::Estimator> MakeHorusEstimator();

}  // namespace gpuest::horus
