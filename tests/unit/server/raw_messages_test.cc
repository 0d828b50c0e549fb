// server/raw_messages: requests decoded by gpuest, so that bytes that are not the
// method's message are INVALID_ARGUMENT saying what failed, and responses encoded.
#include "server/raw_messages.h"

#include <string>

#include "absl/strings/match.h"
#include "gpuest/v1/estimate.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

grpc::ByteBuffer Bytes(const std::string& wire) {
  grpc::Slice slice(wire);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(RawMessages, ARequestRoundTripsThroughItsWireBytes) {
  v1::EstimateRequest request;
  request.set_gpu("a100-40gb");
  request.mutable_model()->set_batch_size(32);
  grpc::ByteBuffer bytes;
  EncodeResponse(request, bytes);
  v1::EstimateRequest decoded;
  ASSERT_TRUE(DecodeRequest(bytes, decoded).ok());
  EXPECT_EQ(decoded.SerializeAsString(), request.SerializeAsString());
  // An empty message is a valid one, with every field at its default.
  v1::EstimateRequest empty;
  ASSERT_TRUE(DecodeRequest(Bytes(""), empty).ok());
  EXPECT_EQ(empty.ByteSizeLong(), 0u);
}

TEST(RawMessages, BytesThatAreNotTheMessageAreRefusedSayingWhy) {
  v1::EstimateRequest decoded;
  decoded.set_gpu("left over");
  // Field 1 (model) says 16 bytes follow; 3 do.
  const absl::Status truncated = DecodeRequest(Bytes("\x0a\x10"
                                                     "abc"),
                                               decoded);
  EXPECT_EQ(truncated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(truncated.message(),
                               "the request is not a valid gpuest.v1.EstimateRequest (5 "
                               "bytes): its protobuf encoding is malformed"))
      << truncated;
  EXPECT_EQ(decoded.ByteSizeLong(), 0u);  // Nothing half-read is left behind.
  // gpu (field 3, a string) that is not UTF-8.
  EXPECT_FALSE(DecodeRequest(Bytes(std::string("\x1a\x02\xff\xfe", 4)), decoded).ok());
  // A tag of field 0 is no field at all.
  EXPECT_FALSE(DecodeRequest(Bytes(std::string("\x00\x01", 2)), decoded).ok());
}

}  // namespace
}  // namespace gpuest::server
