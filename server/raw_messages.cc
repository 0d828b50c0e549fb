#include "server/raw_messages.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "grpcpp/support/slice.h"

namespace gpuest::server {

absl::Status DecodeRequest(const grpc::ByteBuffer& bytes,
                           google::protobuf::Message& message) {
  // One contiguous buffer: requests are bounded by the server's max message size.
  grpc::Slice wire;
  if (grpc::Status dumped = bytes.DumpToSingleSlice(&wire); !dumped.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request's bytes could not be read: ", dumped.error_message()));
  }
  const std::string type = message.GetDescriptor()->full_name();
  google::protobuf::io::CodedInputStream input(wire.begin(),
                                               static_cast<int>(wire.size()));
  if (!message.MergePartialFromCodedStream(&input) || !input.ConsumedEntireMessage()) {
    message.Clear();
    return absl::InvalidArgumentError(absl::StrCat(
        "the request is not a valid ", type, " (", wire.size(),
        " bytes): its protobuf encoding is malformed at or before byte ",
        input.CurrentPosition(),
        " (a wire type or length that does not fit the field, a truncated field, or "
        "bytes that are not a message)"));
  }
  if (!message.IsInitialized()) {
    message.Clear();
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a valid ", type, ": required fields missing"));
  }
  return absl::OkStatus();
}

void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer& bytes) {
  grpc::Slice slice(message.SerializeAsString());
  grpc::ByteBuffer encoded(&slice, 1);
  bytes.Swap(&encoded);
}

}  // namespace gpuest::server
