// server/status_util: the field an INVALID_ARGUMENT names, as a google.rpc.BadRequest
// in the rich error details (decoded here field by field, with the standard numbers).
#include "server/status_util.h"

#include <map>
#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

using google::protobuf::internal::WireFormatLite;

// The field a message names, or "" for none.
std::string FieldIn(absl::string_view message) {
  const std::optional<FieldError> error = FieldOfMessage(message);
  return error ? error->field : "";
}

TEST(FieldOfMessage, ReadsThePathEveryValidatorWrites) {
  EXPECT_EQ(FieldIn("model.layers[3].type: is empty"), "model.layers[3].type");
  EXPECT_EQ(FieldIn("features.layer_counts[\"Conv2d\"]: negative"),
            "features.layer_counts[\"Conv2d\"]");
  EXPECT_EQ(FieldIn("model.layers (total parameters): overflow"), "model.layers");
  EXPECT_EQ(FieldIn("gpu: unknown GPU 'x'"), "gpu");
  EXPECT_FALSE(FieldOfMessage("the server is overloaded: retry later").has_value());
  EXPECT_FALSE(FieldOfMessage("no colon here").has_value());
  EXPECT_FALSE(FieldOfMessage("model.layers[3: unclosed").has_value());
  EXPECT_FALSE(FieldOfMessage("").has_value());
}

// The description is what follows the path, even where the path itself holds ": ".
TEST(FieldOfMessage, TheDescriptionFollowsThePath) {
  auto error = FieldOfMessage("features.layer_counts[\"a: b\"]: negative");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->field, "features.layer_counts[\"a: b\"]");
  EXPECT_EQ(error->description, "negative");
  error = FieldOfMessage("model.layers (total parameters): overflow");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->description, "overflow");
}

// The length-delimited fields of one message: number -> bytes (the last of each).
std::map<int, std::string> Fields(const std::string& bytes) {
  std::map<int, std::string> out;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  while (uint32_t tag = in.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v = 0;
      in.ReadVarint64(&v);
      out[number] = std::to_string(v);
    } else {
      uint32_t size = 0;
      in.ReadVarint32(&size);
      std::string value;
      in.ReadString(&value, static_cast<int>(size));
      out[number] = value;
    }
  }
  return out;
}

TEST(ToGrpcStatus, AnInvalidArgumentCarriesItsFieldAsABadRequest) {
  const grpc::Status s = ToGrpcStatus(
      absl::InvalidArgumentError("model.batch_size: must be positive, got 0"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto status = Fields(s.error_details());
  EXPECT_EQ(status[1], "3");  // INVALID_ARGUMENT
  EXPECT_EQ(status[2], "model.batch_size: must be positive, got 0");
  auto any = Fields(status[3]);
  EXPECT_EQ(any[1], "type.googleapis.com/google.rpc.BadRequest");
  auto violation = Fields(Fields(any[2])[1]);
  EXPECT_EQ(violation[1], "model.batch_size");
  EXPECT_EQ(violation[2], "must be positive, got 0");
  // Other codes, and messages naming no field, carry none.
  EXPECT_TRUE(ToGrpcStatus(absl::UnavailableError("x: y")).error_details().empty());
  EXPECT_TRUE(ToGrpcStatus(absl::InvalidArgumentError("not a field path"))
                  .error_details()
                  .empty());
}

}  // namespace
}  // namespace gpuest::server
