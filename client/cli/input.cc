#include "client/cli/input.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace gpuest::cli {
namespace {

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    text << in.rdbuf();
  }
  return text.str();
}

}  // namespace

absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  const std::string name = path == "-" ? "stdin" : path;
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty input"));
  }
  v1::EstimateRequest request;
  auto as_model = google::protobuf::util::JsonStringToMessage(*text, request.mutable_model());
  if (as_model.ok()) return request;
  request.Clear();
  if (google::protobuf::util::JsonStringToMessage(*text, &request).ok()) return request;
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": not a ModelDescription (nor an EstimateRequest) in JSON: ",
                   std::string(as_model.message())));
}

}  // namespace gpuest::cli
