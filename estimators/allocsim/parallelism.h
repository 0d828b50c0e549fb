// File: parallelism.h
//
// One rank's step of a job spread over GPUs, from the trace of the unsharded step
// (ModelDescription.parallelism; issue "llm"). The trace's allocations carry their
// category, so each rule applies to the tensors it divides:
//
// - Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): each layer's weight matrices
//   split over tp GPUs, so parameters, their gradients and optimizer state are / tp.
//   Activations are left whole: only those inside the split matmuls shrink, layer norms'
//   and dropouts' do not (without sequence parallelism), so the figure stays an upper
//   bound there.
// - ZeRO (Rajbhandari et al. 2020, section 5, "Pos", "Pos+g", "Pos+g+p"), which PyTorch's
//   FSDP follows (SHARD_GRAD_OP = stage 2, FULL_SHARD = stage 3): the optimizer state,
//   then the gradients, then the parameters are / the data-parallel world size N; the
//   optimizer step's temporaries (those after the last gradient) with the state, as a
//   rank updates its own partition.
//   Stage 2 and 3 reduce-scatter each unit's gradients: a unit's full gradients exist
//   during its backward (one unit, the largest). Stage 3 all-gathers each unit's
//   parameters for its forward and again for its backward, and prefetches the next
//   (FSDP forward_prefetch / BACKWARD_PRE): two units' full parameters during the
//   forward and backward.
// - DDP (torch/csrc/distributed/c10d/reducer.cpp): gradients are copied into flat
//   buckets for the all-reduce, a second copy of every gradient alive from the first
//   backward on, unless gradient_as_bucket_view makes the gradients views into them.
// - Offload: the optimizer state (and the sharded parameters) live in host memory.
#pragma once

#include <string>

#include "gpuest/v1/model.pb.h"

namespace gpuest::allocsim {

// Whether the layout changes anything (more than one GPU, or an offload).
bool SpreadsOverGpus(const v1::Parallelism& parallelism);

struct RankTrace {
  v1::AllocationTrace trace;
  std::string basis;          // The rules applied, in words, for the estimate's basis.
  bool unit_guessed = false;  // largest_unit_bytes was not given and was guessed.
};

// The step of one rank. trace must be valid (estimators/core/request_validation.h).
RankTrace PerRankTrace(const v1::AllocationTrace& trace,
                       const v1::Parallelism& parallelism);

}  // namespace gpuest::allocsim
