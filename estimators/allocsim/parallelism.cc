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

// How the job divides the step: data-parallel ranks n, tensor-parallel tp, and which
// of the step's tensors ZeRO / FSDP shards over the n ranks.
struct Layout {
  uint64_t n = 1;
  uint64_t tp = 1;
  bool shard_optimizer = false;
  bool shard_gradients = false;
  bool shard_parameters = false;
  bool ddp = false;  // Data parallel without sharding.
};

Layout LayoutOf(const v1::Parallelism& p) {
  Layout l;
  l.n = std::max<uint32_t>(1, p.data_parallel());
  l.tp = std::max<uint32_t>(1, p.tensor_parallel());
  const v1::Sharding sharding = p.sharding();
  l.shard_optimizer = l.n > 1 && sharding >= v1::SHARDING_OPTIMIZER;
  l.shard_gradients = l.n > 1 && sharding >= v1::SHARDING_GRADIENTS;
  l.shard_parameters = l.n > 1 && sharding >= v1::SHARDING_PARAMETERS;
  l.ddp = l.n > 1 && sharding == v1::SHARDING_NONE;
  return l;
}

// The step's windows: forward and backward from the first activation to the last
// gradient, backward from the first gradient; after the last gradient, the optimizer.
// With the sizes the rules need, divided by tp.
struct StepWindows {
  uint32_t first_activation = UINT32_MAX, first_gradient = UINT32_MAX, last_gradient = 0;
  uint64_t gradient_bytes = 0, largest_parameter = 0;

  bool has_backward() const { return first_gradient != UINT32_MAX; }
  uint32_t start() const { return std::min(first_activation, first_gradient); }
  uint32_t end() const { return has_backward() ? last_gradient + 1 : start() + 1; }
};

StepWindows WindowsOf(const v1::AllocationTrace& trace, uint64_t tp) {
  StepWindows w;
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    const uint64_t size = trace.size_bytes(i);
    switch (trace.category(i)) {
      case v1::ALLOCATION_CATEGORY_PARAMETER:
        w.largest_parameter = std::max(w.largest_parameter, DivideUp(size, tp));
        break;
      case v1::ALLOCATION_CATEGORY_ACTIVATION:
        w.first_activation = std::min(w.first_activation, trace.alloc_at(i));
        break;
      case v1::ALLOCATION_CATEGORY_GRADIENT:
        w.first_gradient = std::min(w.first_gradient, trace.alloc_at(i));
        w.last_gradient = std::max(w.last_gradient, trace.alloc_at(i));
        w.gradient_bytes += DivideUp(size, tp);
        break;
      default:
        break;
    }
  }
  return w;
}

// Each of the step's allocations, divided as the layout divides its category; what
// is offloaded stays on the host.
void AddRanksShares(const v1::AllocationTrace& trace, const v1::Parallelism& p,
                    const Layout& l, const StepWindows& w, v1::AllocationTrace& out) {
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    uint64_t by = 1;
    bool offloaded = false;
    const v1::AllocationCategory category = trace.category(i);
    // The optimizer step's temporaries (foreach updates, the multi-tensor AdamW's
    // intermediates) are made of the state it updates: a rank updates its own shard,
    // on the host when the state is offloaded.
    const bool optimizer_temporary = w.has_backward() &&
                                     category == v1::ALLOCATION_CATEGORY_TEMPORARY &&
                                     trace.alloc_at(i) > w.last_gradient;
    if (category == v1::ALLOCATION_CATEGORY_PARAMETER) {
      by = l.tp * (l.shard_parameters ? l.n : 1);
      offloaded = l.shard_parameters && p.offload_parameters();
    } else if (category == v1::ALLOCATION_CATEGORY_GRADIENT) {
      by = l.tp * (l.shard_gradients ? l.n : 1);
    } else if (category == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE ||
               optimizer_temporary) {
      by = l.tp * (l.shard_optimizer ? l.n : 1);
      offloaded = p.offload_optimizer();
    }
    if (!offloaded) {
      Add(out, DivideUp(trace.size_bytes(i), by), trace.alloc_at(i), trace.free_at(i),
          category);
    }
  }
}

// DDP's buckets: a copy of every gradient unless the gradients are views into them.
void AddDdpBuckets(const v1::Parallelism& p, const Layout& l, const StepWindows& w,
                   v1::AllocationTrace& out, std::vector<std::string>& rules) {
  if (!l.ddp) return;
  if (!p.gradient_as_bucket_view() && w.has_backward()) {
    // A persistent copy: freed with the gradients by zero_grad only in the replay's
    // bookkeeping, and made again before the gradients peak.
    Add(out, w.gradient_bytes, w.first_gradient, 0, v1::ALLOCATION_CATEGORY_GRADIENT);
    rules.push_back(absl::StrCat("DDP over ", l.n,
                                 " GPUs: its buckets hold a copy of every gradient"));
  } else {
    rules.push_back(
        absl::StrCat("DDP over ", l.n, " GPUs, gradients as views into its buckets"));
  }
}

// The full units sharding gathers: one unit's gradients before their reduce-scatter,
// and with sharded parameters two units' parameters.
void AddFullUnits(const Layout& l, const StepWindows& w, uint64_t unit,
                  v1::AllocationTrace& out, std::vector<std::string>& rules) {
  if (l.shard_gradients && w.has_backward()) {
    // One unit's full gradients before its reduce-scatter.
    Add(out, unit, w.first_gradient, w.end(), v1::ALLOCATION_CATEGORY_TEMPORARY);
    rules.push_back(absl::StrCat("one unit's full gradients during the backward (",
                                 unit >> 20, " MiB)"));
  }
  if (l.shard_parameters && w.start() != UINT32_MAX) {
    // The unit being computed and the one prefetched, all-gathered.
    Add(out, unit, w.start(), w.end(), v1::ALLOCATION_CATEGORY_TEMPORARY);
    Add(out, unit, w.start(), w.end(), v1::ALLOCATION_CATEGORY_TEMPORARY);
    rules.push_back(
        absl::StrCat("two units' parameters all-gathered (", unit >> 20, " MiB each)"));
  }
}

}  // namespace

bool SpreadsOverGpus(const v1::Parallelism& p) {
  return core::GpusPerJob(p) > 1 || p.offload_optimizer() || p.offload_parameters();
}

RankTrace PerRankTrace(const v1::AllocationTrace& trace, const v1::Parallelism& p) {
  const Layout l = LayoutOf(p);
  RankTrace out;
  out.trace.set_tracer(trace.tracer());
  const StepWindows w = WindowsOf(trace, l.tp);
  AddRanksShares(trace, p, l, w, out.trace);

  std::vector<std::string> rules;
  if (l.tp > 1) {
    rules.push_back(absl::StrCat("parameters, gradients and optimizer state / ", l.tp,
                                 " (tensor parallel; activations left whole)"));
  }
  uint64_t unit = p.largest_unit_bytes() > 0 ? DivideUp(p.largest_unit_bytes(), l.tp) : 0;
  if ((l.shard_gradients || l.shard_parameters) && unit == 0) {
    unit = w.largest_parameter;
    out.unit_guessed = true;
  }
  AddDdpBuckets(p, l, w, out.trace, rules);
  if (l.shard_optimizer) {
    const char* stage = l.shard_parameters  ? "ZeRO-3 / FSDP FULL_SHARD"
                        : l.shard_gradients ? "ZeRO-2 / FSDP SHARD_GRAD_OP"
                                            : "ZeRO-1";
    rules.push_back(absl::StrCat(stage, " over ", l.n, " GPUs: optimizer state",
                                 l.shard_gradients ? ", gradients" : "",
                                 l.shard_parameters ? ", parameters" : "", " / ", l.n));
  }
  AddFullUnits(l, w, unit, out.trace, rules);
  if (p.offload_optimizer()) rules.push_back("optimizer state offloaded to the host");
  if (l.shard_parameters && p.offload_parameters())
    rules.push_back("sharded parameters offloaded to the host");
  out.basis = absl::StrJoin(rules, "; ");
  return out;
}

}  // namespace gpuest::allocsim
