#include "tests/support/traced_steps.h"

#include <algorithm>
#include <tuple>
#include <vector>

namespace gpuest::testing {
namespace {

// The same events on the describer's clock: one distinct tick per allocation and per
// free, in the order the replay takes them (by time, allocations before frees at one
// time), as validation requires.
void Retime(v1::AllocationTrace& t) {
  std::vector<std::tuple<uint32_t, bool, int>> events;  // (time, is_free, index)
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    events.emplace_back(t.alloc_at(i), false, i);
    if (t.free_at(i) != 0) events.emplace_back(t.free_at(i), true, i);
  }
  std::sort(events.begin(), events.end());
  uint32_t tick = 0;
  for (const auto& [time, is_free, i] : events) {
    if (is_free) {
      t.set_free_at(i, ++tick);
    } else {
      t.set_alloc_at(i, ++tick);
    }
  }
}

}  // namespace

v1::EstimateRequest CacheHungryStep(uint64_t temporary_bytes) {
  constexpr int64_t kWidth = 1024, kBatch = 8, kParameters = kWidth * kWidth + kWidth;
  v1::EstimateRequest r;
  v1::ModelDescription& m = *r.mutable_model();
  m.set_name("cache-hungry");
  m.set_family(v1::MODEL_FAMILY_MLP);
  m.set_batch_size(kBatch);
  m.add_input_shape(kWidth);
  v1::Layer& dense = *m.add_layers();
  dense.set_type("Linear");
  dense.set_output_activations(kWidth);
  dense.set_parameters(kParameters);
  v1::AllocationTrace& t = *m.mutable_trace();
  auto add = [&t](uint64_t bytes, uint32_t alloc_at, uint32_t free_at,
                  v1::AllocationCategory category) {
    t.add_size_bytes(bytes);
    t.add_alloc_at(alloc_at);
    t.add_free_at(free_at);
    t.add_category(category);
  };
  add(kParameters * 4, 0, 0, v1::ALLOCATION_CATEGORY_PARAMETER);
  add(kBatch * kWidth * 4, 1, 6, v1::ALLOCATION_CATEGORY_INPUT);  // The batch, fp32.
  add(temporary_bytes, 2, 3, v1::ALLOCATION_CATEGORY_TEMPORARY);
  add(temporary_bytes + (uint64_t{2} << 20), 4, 5, v1::ALLOCATION_CATEGORY_ACTIVATION);
  return r;
}

v1::EstimateRequest LongTracedStep(int temporaries) {
  v1::EstimateRequest r = CacheHungryStep(uint64_t{64} << 20);
  v1::AllocationTrace& t = *r.mutable_model()->mutable_trace();
  t.mutable_size_bytes()->Reserve(t.size_bytes_size() + temporaries);
  uint64_t state = 12345;  // A fixed LCG: the same trace every run.
  uint32_t now = 7;
  for (int k = 0; k < temporaries; ++k) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t bytes = uint64_t{512} << ((state >> 33) % 18);  // 512 B .. 64 MiB.
    t.add_size_bytes(bytes + (state >> 40) % 4096);
    t.add_alloc_at(now);
    t.add_free_at(now + 1 + static_cast<uint32_t>((state >> 20) % 4));
    t.add_category(v1::ALLOCATION_CATEGORY_TEMPORARY);
    now += 1;
  }
  Retime(t);
  return r;
}

}  // namespace gpuest::testing
