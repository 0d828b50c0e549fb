// File: job_gpus.h
//
// How many GPUs one job occupies, from its description's layout: every rank is a
// process on a GPU of its own, data-parallel replicas times the tensor-parallel degree.
#pragma once

#include <algorithm>
#include <cstdint>

#include "gpuest/v1/model.pb.h"

namespace gpuest::core {

inline uint64_t GpusPerJob(const v1::Parallelism& parallelism) {
  return uint64_t{std::max<uint32_t>(1, parallelism.data_parallel())} *
         std::max<uint32_t>(1, parallelism.tensor_parallel());
}

}  // namespace gpuest::core
