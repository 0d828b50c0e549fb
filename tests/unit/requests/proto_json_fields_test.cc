// requests/proto_json_fields: a field is one field under either of its names, and one
// set under both, at any depth, is refused naming both spellings and where.
#include "requests/proto_json_fields.h"

#include "absl/strings/match.h"
#include "gpuest/v1/estimate.pb.h"
#include "gtest/gtest.h"

namespace gpuest::requests {
namespace {

const google::protobuf::Descriptor& Request() {
  return *v1::EstimateRequest::descriptor();
}

TEST(ProtoJsonFields, AKeyIsAFieldsJsonNameOrItsProtoName) {
  const google::protobuf::Descriptor& model = *v1::ModelDescription::descriptor();
  ASSERT_NE(JsonField(model, "batchSize"), nullptr);
  EXPECT_EQ(JsonField(model, "batchSize"), JsonField(model, "batch_size"));
  EXPECT_EQ(JsonField(model, "batch_size")->name(), "batch_size");
  EXPECT_EQ(JsonField(model, "BatchSize"), nullptr);
  EXPECT_EQ(JsonField(model, "batch"), nullptr);
}

TEST(ProtoJsonFields, EachFieldOnceUnderEitherName) {
  EXPECT_TRUE(CheckEachFieldOnce(R"({"model": {"batchSize": 4, "name": "n"}})", Request(),
                                 "stdin")
                  .ok());
  EXPECT_TRUE(
      CheckEachFieldOnce(R"({"model": {"batch_size": 4}})", Request(), "stdin").ok());
  const absl::Status twice = CheckEachFieldOnce(
      R"({"gpu": "t4", "model": {"batchSize": 4, "batch_size": 8}})", Request(), "stdin");
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.message(),
            "stdin: field batch_size is given twice, as \"batchSize\" and as "
            "\"batch_size\" (in model)");
}

TEST(ProtoJsonFields, ObjectsInListsAreCheckedByTheirIndex) {
  const absl::Status s = CheckEachFieldOnce(
      R"({"model": {"layers": [{"type": "Linear"},
          {"outputActivations": 1, "output_activations": 2}]}})",
      Request(), "f.json");
  EXPECT_EQ(s.message(),
            "f.json: field output_activations is given twice, as "
            "\"outputActivations\" and as \"output_activations\" (in model.layers[1])");
}

// A map's keys are data, and text that is not an object is protobuf's parser's to
// refuse.
TEST(ProtoJsonFields, MapKeysAndNonObjectsPass) {
  EXPECT_TRUE(CheckEachFieldOnce(
                  R"({"features": {"layerCounts": {"batchSize": 1, "batch_size": 2}}})",
                  Request(), "stdin")
                  .ok());
  EXPECT_TRUE(CheckEachFieldOnce("not json", Request(), "stdin").ok());
  EXPECT_TRUE(CheckEachFieldOnce("[1, 2]", Request(), "stdin").ok());
  EXPECT_TRUE(
      CheckEachFieldOnce(R"({"unknownKey": 1, "unknown_key": 2})", Request(), "stdin")
          .ok());
}

}  // namespace
}  // namespace gpuest::requests
