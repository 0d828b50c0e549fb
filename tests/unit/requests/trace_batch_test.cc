// requests/trace_batch: a trace answers for the batch it records, or, from an older
// describer, for the description's batch as its input allocations show it.
#include "requests/trace_batch.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::requests {
namespace {

// A model of 3 x 4 inputs described at batch 8, with one trace allocation per entry of
// inputs (bytes) and a parameter before them.
v1::ModelDescription Traced(int64_t recorded_batch, std::vector<uint64_t> inputs) {
  v1::ModelDescription m;
  m.set_batch_size(8);
  m.add_input_shape(3);
  m.add_input_shape(4);
  v1::AllocationTrace& t = *m.mutable_trace();
  t.set_batch_size(recorded_batch);
  t.add_size_bytes(4096);
  t.add_category(v1::ALLOCATION_CATEGORY_PARAMETER);
  for (uint64_t bytes : inputs) {
    t.add_size_bytes(bytes);
    t.add_category(v1::ALLOCATION_CATEGORY_INPUT);
  }
  return m;
}

TEST(TraceBatch, ARecordedBatchIsTheOnlyOneTheTraceAnswersFor) {
  const v1::ModelDescription m = Traced(8, {});
  EXPECT_TRUE(TraceRecordsItsBatch(m));
  EXPECT_EQ(UnrecordedTraceBatchWords(m), "");
  EXPECT_TRUE(CheckTraceBatch(m, 8).ok());
  const absl::Status other = CheckTraceBatch(m, 16);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(other.message(),
                               "model.trace.batch_size: the trace was recorded at batch "
                               "8 and answers only for it, not for batch 16; describe "
                               "the model again at batch 16"))
      << other;
}

TEST(TraceBatch, NoTraceAnswersForAnyBatch) {
  v1::ModelDescription m;
  m.set_batch_size(8);
  EXPECT_FALSE(TraceRecordsItsBatch(m));
  EXPECT_EQ(UnrecordedTraceBatchWords(m), "");
  EXPECT_TRUE(CheckTraceBatch(m, 64).ok());
}

// An older trace: the description's batch, and an input allocation of that many
// samples at 1, 2, 4 or 8 bytes an element.
TEST(TraceBatch, AnOlderTracesBatchIsReadFromItsInputs) {
  for (uint64_t width : {1, 2, 4, 8}) {
    EXPECT_TRUE(CheckTraceBatch(Traced(0, {8 * 12 * width}), 8).ok()) << width;
  }
  const v1::ModelDescription other_batch = Traced(0, {5 * 12 * 4});
  EXPECT_FALSE(TraceRecordsItsBatch(other_batch));
  const absl::Status s = CheckTraceBatch(other_batch, 8);
  EXPECT_TRUE(absl::StartsWith(s.message(),
                               "model.trace: no input allocation holds a batch of 8 "
                               "samples of the input shape"))
      << s;
  EXPECT_TRUE(absl::StrContains(UnrecordedTraceBatchWords(other_batch),
                                "its batch was read from its input allocations"));
  // Another batch than the description's is wrong by that alone.
  const absl::Status other = CheckTraceBatch(Traced(0, {8 * 12 * 4}), 16);
  EXPECT_TRUE(absl::StartsWith(
      other.message(),
      "model.trace: the trace (an older describer's, which does not record its batch) "
      "was described at the description's batch size 8, not 16"))
      << other;
}

TEST(TraceBatch, AnOlderTraceWithNothingToCheckByPassesAndSaysSo) {
  EXPECT_TRUE(CheckTraceBatch(Traced(0, {}), 8).ok());  // No input allocation.
  v1::ModelDescription shapeless = Traced(0, {1});
  shapeless.clear_input_shape();
  EXPECT_TRUE(CheckTraceBatch(shapeless, 8).ok());
  EXPECT_TRUE(absl::StrContains(UnrecordedTraceBatchWords(shapeless),
                                "without an input shape its batch could not be checked"));
}

}  // namespace
}  // namespace gpuest::requests
