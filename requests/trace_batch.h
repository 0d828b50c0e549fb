// File: trace_batch.h
//
// The one rule for the batch a description's allocation trace answers for. A trace
// records one step at the batch it was made at; replayed for another batch it would
// answer for the wrong job, silently. The server's request validation, the CLI's
// --batch-size and the extender's pods (through the server's validation) all call it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::requests {

// Whether the trace says its own batch (AllocationTrace.batch_size, which gpuest.describe
// writes). A trace from an older describer does not: CheckTraceBatch then reads the
// batch from its input allocations, and the answer says so (a warning).
bool TraceRecordsItsBatch(const v1::ModelDescription& model);

// For a trace that does not record its batch, the warning's words: how far
// CheckTraceBatch's fallback could check it. Empty for a recorded batch or no trace.
std::string UnrecordedTraceBatchWords(const v1::ModelDescription& model);

// OK when model has no trace, or its trace answers for batch_size:
// - AllocationTrace.batch_size set: it must equal batch_size;
// - unset (an older describer, which wrote the trace's batch as model.batch_size only):
//   model.batch_size must equal batch_size, and one INPUT allocation must hold
//   batch_size samples of the input shape at 1, 2, 4 or 8 bytes each (without an input
//   shape or an input allocation that part has nothing to check by, and passes).
// Otherwise INVALID_ARGUMENT naming model.trace.batch_size (or model.trace), with what to
// do instead: describe the model again at that batch, or drop the trace.
absl::Status CheckTraceBatch(const v1::ModelDescription& model, int64_t batch_size);

}  // namespace gpuest::requests
