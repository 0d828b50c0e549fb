#include "client/cli/input.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/parsers/summary_parser.h"
#include "google/protobuf/struct.pb.h"
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

absl::StatusOr<v1::EstimateRequest> ReadSummary(const std::string& text,
                                                const std::string& name,
                                                const ReadOptions& options) {
  auto model = ParseModelSummary(text, name);
  if (!model.ok()) return model.status();
  if (options.batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     ": a model summary does not give the training batch size; pass "
                     "--batch-size N"));
  }
  model->set_batch_size(options.batch_size);
  model->set_name(name == "stdin" ? name : name.substr(name.find_last_of('/') + 1));
  v1::EstimateRequest request;
  *request.mutable_model() = *std::move(model);
  return request;
}

// Whether descriptor has a field spelled key in JSON (its lowerCamel or proto name).
bool HasJsonField(const google::protobuf::Descriptor& descriptor,
                  const std::string& key) {
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *descriptor.field(i);
    if (field.json_name() == key || field.name() == key) return true;
  }
  return false;
}

// Whether text is a JSON object with a top-level key that only an EstimateRequest has
// ("model", "features", "gpu", "estimators"). Only asked once both parses failed.
bool MeansARequest(const std::string& text) {
  google::protobuf::Struct top;
  if (!google::protobuf::util::JsonStringToMessage(text, &top).ok()) return false;
  for (const auto& [key, value] : top.fields()) {
    if (HasJsonField(*v1::EstimateRequest::descriptor(), key) &&
        !HasJsonField(*v1::ModelDescription::descriptor(), key)) {
      return true;
    }
  }
  return false;
}

// A trace records one step at the batch size it was described at; replaying it for
// another batch would answer for the wrong job (the server refuses it too, naming
// model.trace). Refused here, before any call, with what to do instead.
absl::Status CheckTraceBatch(const std::string& name, const v1::EstimateRequest& request,
                             int64_t batch_size) {
  if (!request.has_model()) return absl::OkStatus();
  const v1::ModelDescription& model = request.model();
  if (model.trace().size_bytes_size() == 0 || model.batch_size() == batch_size) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      name, ": --batch-size ", batch_size, " differs from the batch size ",
      model.batch_size(),
      " the description's allocation trace (model.trace) was recorded at, and a trace "
      "answers only for its own batch. Describe the model again at batch ",
      batch_size, " (python3 -m gpuest.describe ... --batch-size ", batch_size,
      "), or drop the trace (describe with --no-trace, or remove the \"trace\" key) "
      "to estimate from the layer sequence"));
}

}  // namespace

absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path,
                                                const ReadOptions& options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  return ParseRequestText(*text, path == "-" ? "stdin" : path, options);
}

absl::StatusOr<v1::EstimateRequest> ParseRequestText(const std::string& text_in,
                                                     const std::string& name,
                                                     const ReadOptions& options) {
  if (options.batch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch-size must be positive, got ", options.batch_size));
  }
  const std::string* text = &text_in;
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty input"));
  }
  if ((*text)[first] != '{') return ReadSummary(*text, name, options);
  v1::EstimateRequest request;
  auto as_model =
      google::protobuf::util::JsonStringToMessage(*text, request.mutable_model());
  if (!as_model.ok()) {
    request.Clear();
    auto as_request = google::protobuf::util::JsonStringToMessage(*text, &request);
    if (!as_request.ok()) {
      // Report the complaint about the form the text meant, so that it names the bad
      // field: "(model.batch_size): invalid value", not "model: Cannot find field".
      if (MeansARequest(*text)) {
        return absl::InvalidArgumentError(absl::StrCat(
            name,
            ": not an EstimateRequest in JSON: ", std::string(as_request.message())));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": not a ModelDescription (nor an EstimateRequest) in JSON: ",
          std::string(as_model.message())));
    }
  }
  if (options.batch_size > 0) {
    if (absl::Status traced = CheckTraceBatch(name, request, options.batch_size);
        !traced.ok()) {
      return traced;
    }
    if (request.has_features()) {
      request.mutable_features()->set_batch_size(options.batch_size);
    } else {
      request.mutable_model()->set_batch_size(options.batch_size);
    }
  }
  return request;
}

}  // namespace gpuest::cli
