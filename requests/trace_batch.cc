#include "requests/trace_batch.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpuest::requests {
namespace {

std::string WhatToDo(int64_t batch_size) {
  return absl::StrCat("; describe the model again at batch ", batch_size,
                      " (python3 -m gpuest.describe ... --batch-size ", batch_size,
                      "), or drop the trace (describe with --no-trace, or remove the "
                      "\"trace\" key) to estimate from the layer sequence");
}

// An older trace's batch, read from its inputs: one INPUT allocation holds batch x the
// sample's elements at 1, 2, 4 or 8 bytes each. True when nothing tells (no input shape,
// no input allocation).
bool InputsHoldBatch(const v1::ModelDescription& model, int64_t batch_size) {
  const v1::AllocationTrace& trace = model.trace();
  if (model.input_shape_size() == 0) return true;
  double sample = 1;
  for (int64_t d : model.input_shape()) sample *= static_cast<double>(d);
  const double batch_elements = sample * static_cast<double>(batch_size);
  bool has_input = false;
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    if (trace.category(i) != v1::ALLOCATION_CATEGORY_INPUT) continue;
    has_input = true;
    for (double width : {1.0, 2.0, 4.0, 8.0}) {
      if (static_cast<double>(trace.size_bytes(i)) == batch_elements * width) return true;
    }
  }
  return !has_input;
}

}  // namespace

bool TraceRecordsItsBatch(const v1::ModelDescription& model) {
  return model.trace().batch_size() != 0;
}

std::string UnrecordedTraceBatchWords(const v1::ModelDescription& model) {
  if (model.trace().size_bytes_size() == 0 || TraceRecordsItsBatch(model)) return "";
  return model.input_shape_size() > 0
             ? "the description's trace does not record the batch it was traced at (a "
               "describer before AllocationTrace.batch_size): its batch was read from "
               "its "
               "input allocations, which do not tell apart batches whose inputs differ "
               "only in element width; describe the model again to record it"
             : "the description's trace does not record the batch it was traced at (a "
               "describer before AllocationTrace.batch_size), and without an input shape "
               "its batch could not be checked: the estimate is for the batch traced, "
               "whatever model.batch_size says; describe the model again to record it";
}

absl::Status CheckTraceBatch(const v1::ModelDescription& model, int64_t batch_size) {
  const v1::AllocationTrace& trace = model.trace();
  if (trace.size_bytes_size() == 0) return absl::OkStatus();
  if (TraceRecordsItsBatch(model)) {
    if (trace.batch_size() == batch_size) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "model.trace.batch_size: the trace was recorded at batch ", trace.batch_size(),
        " and answers only for it, not for batch ", batch_size, WhatToDo(batch_size)));
  }
  // An older describer wrote the trace's batch as the description's: another batch (the
  // CLI's --batch-size) is the wrong one by that statement alone.
  if (model.batch_size() != batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.trace: the trace (an older describer's, which does not record its batch) "
        "was described at the description's batch size ",
        model.batch_size(), ", not ", batch_size, WhatToDo(batch_size)));
  }
  if (InputsHoldBatch(model, batch_size)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model.trace: no input allocation holds a batch of ", batch_size,
      " samples of the input shape: the trace (an older describer's, which does not "
      "record its batch) was recorded at another batch size",
      WhatToDo(batch_size)));
}

}  // namespace gpuest::requests
