// estimators/core/field_bounds: every number a client can send has a row in the one
// table, and a value outside its row is refused naming the field's path and the row.
// (That each row is enforced on every path the engine reads it by is the placement
// engine's test, PlacementEngineTest.EveryRowIsEnforcedOnEveryPath.)
#include "estimators/core/field_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "gpuest/v1/placement.pb.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

bool IsNumber(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return true;
    default:
      return false;
  }
}

void NumericFields(const Descriptor& d, std::set<std::string>& seen,
                   std::vector<std::string>& out) {
  if (!seen.insert(d.full_name()).second) return;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (IsNumber(f)) out.push_back(f.full_name());
    if (f.message_type() != nullptr) NumericFields(*f.message_type(), seen, out);
  }
}

// Every number a client can send has a row in the one table (field_bounds.h): a field
// added to a request message without one fails here.
TEST(FieldBoundsTest, EveryNumericFieldOfEveryRequestHasARow) {
  std::set<std::string> seen;
  std::vector<std::string> fields;
  for (const auto* root :
       {v1::EstimateRequest::descriptor(), v1::CheckPlacementRequest::descriptor(),
        v1::RankGpusRequest::descriptor()}) {
    NumericFields(*root, seen, fields);
  }
  ASSERT_GT(fields.size(), 20u);
  for (const std::string& field : fields) {
    EXPECT_NE(FindFieldBound(field), nullptr) << field << " has no row in field_bounds.h";
  }
  for (const FieldBound& row : AllFieldBounds()) {
    EXPECT_NE(std::find(fields.begin(), fields.end(), row.field), fields.end())
        << row.field << ": a row for no request field";
  }
}

TEST(FieldBoundsTest, ARowsUpperBoundFollowsTheDeploymentsLimits) {
  ValidationLimits limits;
  limits.max_layers = 7;
  limits.max_trace_events = 100;
  limits.max_batch_size = 64;
  limits.max_count = 1000;
  EXPECT_EQ(UpperBound(kFeaturesDepth, limits), 7);
  EXPECT_EQ(UpperBound(kTraceAllocAt, limits), 200);  // Two ticks an event.
  EXPECT_EQ(UpperBound(kModelBatchSize, limits), 64);
  EXPECT_EQ(UpperBound(kLayerParameters, limits), 1000);
  EXPECT_EQ(UpperBound(kTensorParallel, limits), 1024);
  EXPECT_TRUE(InBounds(kModelBatchSize, 64, limits));
  EXPECT_FALSE(InBounds(kModelBatchSize, 65, limits));
  EXPECT_FALSE(InBounds(kModelBatchSize, 0, limits));
  EXPECT_FALSE(InBounds(kUtilConfidence, std::nan(""), limits));
  ASSERT_NE(FindFieldBound("gpuest.v1.Layer.input_from"), nullptr);
  EXPECT_EQ(FindFieldBound("gpuest.v1.Layer.input_from")->min, -2);
  EXPECT_EQ(FindFieldBound("gpuest.v1.Layer.name"), nullptr);
}

TEST(FieldBoundsTest, AValueOutsideItsRowIsRefusedByItsPath) {
  EXPECT_TRUE(CheckField(kModelBatchSize, int64_t{32}, "model.batch_size").ok());
  const absl::Status zero = CheckField(kModelBatchSize, int64_t{0}, "model.batch_size");
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.message(), "model.batch_size: must be within 1..16777216, got 0");
  // Integers are printed exactly, past a double's 53 bits.
  EXPECT_EQ(CheckField(kTraceSizeBytes, std::numeric_limits<uint64_t>::max(),
                       "model.trace.size_bytes[3]")
                .message(),
            "model.trace.size_bytes[3]: must be within 0..17592186044416, got "
            "18446744073709551615");
  EXPECT_FALSE(CheckField(kUtilConfidence, 1.5, "confidence").ok());
  EXPECT_FALSE(
      CheckField(kUtilConfidence, std::numeric_limits<double>::infinity(), "c").ok());
  EXPECT_FALSE(CheckField(kUtilConfidence, std::nan(""), "c").ok());
  EXPECT_TRUE(CheckField(kUtilConfidence, 1.0, "c").ok());
  ValidationLimits small;
  small.max_batch_size = 8;
  EXPECT_FALSE(CheckField(kModelBatchSize, int64_t{9}, "b", small).ok());
}

}  // namespace
}  // namespace gpuest::core
