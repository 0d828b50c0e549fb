#include "estimators/allocsim/parallelism.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "estimators/core/job_gpus.h"

namespace gpuest::allocsim {
namespace {

uint64_t DivideUp(uint64_t bytes, uint64_t by) {
  return by <= 1 ? bytes : (bytes + by - 1) / by;
}

void Add(v1::AllocationTrace& trace, uint64_t bytes, uint32_t alloc_at, uint32_t free_at,
         v1::AllocationCategory category) {
  if (bytes == 0) return;
  trace.add_size_bytes(bytes);
  trace.add_alloc_at(alloc_at);
  trace.add_free_at(free_at);
  trace.add_category(category);
}

}  // namespace

bool SpreadsOverGpus(const v1::Parallelism& p) {
  return core::GpusPerJob(p) > 1 || p.offload_optimizer() || p.offload_parameters();
}

RankTrace PerRankTrace(const v1::AllocationTrace& trace, const v1::Parallelism& p) {
  const uint64_t n = std::max<uint32_t>(1, p.data_parallel());
  const uint64_t tp = std::max<uint32_t>(1, p.tensor_parallel());
  const v1::Sharding sharding = p.sharding();
  const bool shard_optimizer = n > 1 && sharding >= v1::SHARDING_OPTIMIZER;
  const bool shard_gradients = n > 1 && sharding >= v1::SHARDING_GRADIENTS;
  const bool shard_parameters = n > 1 && sharding >= v1::SHARDING_PARAMETERS;
  const bool ddp = n > 1 && sharding == v1::SHARDING_NONE;

  RankTrace out;
  out.trace.set_tracer(trace.tracer());
  // The step's windows: forward and backward from the first activation to the last
  // gradient, backward from the first gradient; after the last gradient, the optimizer.
  uint32_t first_activation = UINT32_MAX, first_gradient = UINT32_MAX, last_gradient = 0;
  uint64_t gradient_bytes = 0, largest_parameter = 0;
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    const uint64_t size = trace.size_bytes(i);
    switch (trace.category(i)) {
      case v1::ALLOCATION_CATEGORY_PARAMETER:
        largest_parameter = std::max(largest_parameter, DivideUp(size, tp));
        break;
      case v1::ALLOCATION_CATEGORY_ACTIVATION:
        first_activation = std::min(first_activation, trace.alloc_at(i));
        break;
      case v1::ALLOCATION_CATEGORY_GRADIENT:
        first_gradient = std::min(first_gradient, trace.alloc_at(i));
        last_gradient = std::max(last_gradient, trace.alloc_at(i));
        gradient_bytes += DivideUp(size, tp);
        break;
      default:
        break;
    }
  }
  const bool has_backward = first_gradient != UINT32_MAX;
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    uint64_t by = 1;
    bool offloaded = false;
    const v1::AllocationCategory category = trace.category(i);
    // The optimizer step's temporaries (foreach updates, the multi-tensor AdamW's
    // intermediates) are made of the state it updates: a rank updates its own shard,
    // on the host when the state is offloaded.
    const bool optimizer_temporary = has_backward &&
                                     category == v1::ALLOCATION_CATEGORY_TEMPORARY &&
                                     trace.alloc_at(i) > last_gradient;
    if (category == v1::ALLOCATION_CATEGORY_PARAMETER) {
      by = tp * (shard_parameters ? n : 1);
      offloaded = shard_parameters && p.offload_parameters();
    } else if (category == v1::ALLOCATION_CATEGORY_GRADIENT) {
      by = tp * (shard_gradients ? n : 1);
    } else if (category == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE ||
               optimizer_temporary) {
      by = tp * (shard_optimizer ? n : 1);
      offloaded = p.offload_optimizer();
    }
    if (!offloaded) {
      Add(out.trace, DivideUp(trace.size_bytes(i), by), trace.alloc_at(i),
          trace.free_at(i), category);
    }
  }

  std::vector<std::string> rules;
  if (tp > 1) {
    rules.push_back(absl::StrCat("parameters, gradients and optimizer state / ", tp,
                                 " (tensor parallel; activations left whole)"));
  }
  const uint32_t window_start = std::min(first_activation, first_gradient);
  const uint32_t window_end = has_backward ? last_gradient + 1 : window_start + 1;
  uint64_t unit = p.largest_unit_bytes() > 0 ? DivideUp(p.largest_unit_bytes(), tp) : 0;
  if ((shard_gradients || shard_parameters) && unit == 0) {
    unit = largest_parameter;
    out.unit_guessed = true;
  }
  if (ddp) {
    if (!p.gradient_as_bucket_view() && has_backward) {
      // A persistent copy: freed with the gradients by zero_grad only in the replay's
      // bookkeeping, and made again before the gradients peak.
      Add(out.trace, gradient_bytes, first_gradient, 0, v1::ALLOCATION_CATEGORY_GRADIENT);
      rules.push_back(absl::StrCat("DDP over ", n,
                                   " GPUs: its buckets hold a copy of every gradient"));
    } else {
      rules.push_back(
          absl::StrCat("DDP over ", n, " GPUs, gradients as views into its buckets"));
    }
  }
  if (shard_optimizer) {
    const char* stage = shard_parameters  ? "ZeRO-3 / FSDP FULL_SHARD"
                        : shard_gradients ? "ZeRO-2 / FSDP SHARD_GRAD_OP"
                                          : "ZeRO-1";
    rules.push_back(absl::StrCat(stage, " over ", n, " GPUs: optimizer state",
                                 shard_gradients ? ", gradients" : "",
                                 shard_parameters ? ", parameters" : "", " / ", n));
  }
  if (shard_gradients && has_backward) {
    // One unit's full gradients before its reduce-scatter.
    Add(out.trace, unit, first_gradient, window_end, v1::ALLOCATION_CATEGORY_TEMPORARY);
    rules.push_back(absl::StrCat("one unit's full gradients during the backward (",
                                 unit >> 20, " MiB)"));
  }
  if (shard_parameters && window_start != UINT32_MAX) {
    // The unit being computed and the one prefetched, all-gathered.
    Add(out.trace, unit, window_start, window_end, v1::ALLOCATION_CATEGORY_TEMPORARY);
    Add(out.trace, unit, window_start, window_end, v1::ALLOCATION_CATEGORY_TEMPORARY);
    rules.push_back(
        absl::StrCat("two units' parameters all-gathered (", unit >> 20, " MiB each)"));
  }
  if (p.offload_optimizer()) rules.push_back("optimizer state offloaded to the host");
  if (shard_parameters && p.offload_parameters())
    rules.push_back("sharded parameters offloaded to the host");
  out.basis = absl::StrJoin(rules, "; ");
  return out;
}

}  // namespace gpuest::allocsim
