#include "server/status_util.h"

#include <string>

#include "absl/strings/ascii.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace gpuest::server {
namespace {

using google::protobuf::internal::WireFormatLite;

bool IdentifierStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IdentifierChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// A length-delimited field (tag, length, bytes) onto out.
void PutBytes(std::string& out, int number, absl::string_view bytes) {
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag(
      WireFormatLite::MakeTag(number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  coded.WriteVarint32(static_cast<uint32_t>(bytes.size()));
  coded.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
}

void PutVarint(std::string& out, int number, uint32_t value) {
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag(WireFormatLite::MakeTag(number, WireFormatLite::WIRETYPE_VARINT));
  coded.WriteVarint32(value);
}

}  // namespace

std::optional<FieldError> FieldOfMessage(absl::string_view message) {
  size_t i = 0;
  auto identifier = [&] {
    if (i >= message.size() || !IdentifierStart(message[i])) return false;
    while (i < message.size() && IdentifierChar(message[i])) ++i;
    return true;
  };
  if (!identifier()) return std::nullopt;
  while (i < message.size()) {
    if (message[i] == '.') {
      ++i;
      if (!identifier()) return std::nullopt;
    } else if (message[i] == '[') {
      const size_t close = message.find(']', i);
      if (close == absl::string_view::npos) return std::nullopt;
      i = close + 1;
    } else {
      break;
    }
  }
  const size_t end = i;
  if (message.substr(i, 2) == " (") {  // "model.layers (total parameters): ..."
    const size_t close = message.find(')', i);
    if (close == absl::string_view::npos) return std::nullopt;
    i = close + 1;
  }
  if (message.substr(i, 2) != ": ") return std::nullopt;
  return FieldError{std::string(message.substr(0, end)),
                    std::string(message.substr(i + 2))};
}

std::string BadRequestDetails(int code, absl::string_view message,
                              absl::string_view field, absl::string_view description) {
  std::string violation, bad_request, any, status;
  PutBytes(violation, 1, field);        // FieldViolation.field
  PutBytes(violation, 2, description);  // FieldViolation.description
  PutBytes(bad_request, 1, violation);  // BadRequest.field_violations
  PutBytes(any, 1, "type.googleapis.com/google.rpc.BadRequest");  // Any.type_url
  PutBytes(any, 2, bad_request);                                  // Any.value
  PutVarint(status, 1, static_cast<uint32_t>(code));              // Status.code
  PutBytes(status, 2, message);                                   // Status.message
  PutBytes(status, 3, any);                                       // Status.details
  return status;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering by design.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    if (std::optional<FieldError> error = FieldOfMessage(message)) {
      std::string details = BadRequestDetails(static_cast<int>(code), message,
                                              error->field, error->description);
      return grpc::Status(code, std::move(message), std::move(details));
    }
  }
  return grpc::Status(code, std::move(message));
}

}  // namespace gpuest::server
