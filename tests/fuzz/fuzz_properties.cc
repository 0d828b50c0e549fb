#include "tests/fuzz/fuzz_properties.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_guard.h"
#include "estimators/validation.h"
#include "extender/kube_extender.h"
#include "extender/kube_nodes.h"
#include "gpuest/v1/estimate.pb.h"
#include "nlohmann/json.hpp"
#include "requests/request_files.h"
#include "requests/summary_parser.h"

namespace gpuest::fuzz {
namespace {

// Far above any real refusal, far below what breaks a client's status handling.
constexpr size_t kMaxMessageBytes = 1024;

absl::Status Broken(absl::string_view property, const absl::Status& status) {
  return absl::InternalError(absl::StrCat(property, ": ", status.ToString()));
}

absl::Status CheckSummary(const absl::StatusOr<v1::ModelDescription>& model) {
  if (!model.ok()) {
    if (!absl::StrContains(model.status().message(), "fuzz.txt")) {
      return Broken("a refusal names the source", model.status());
    }
    return absl::OkStatus();
  }
  for (int i = 0; i < model->layers_size(); ++i) {
    if (model->layers(i).type().empty()) {
      return absl::InternalError(absl::StrCat("layer ", i, " has no type"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DescriptionTextProperties(absl::string_view data) {
  requests::ReadOptions options;
  options.batch_size = 32;  // A summary needs one; a description takes it.
  const auto request =
      requests::ParseRequestText(std::string(data), "fuzz.json", options);
  if (!request.ok()) {
    if (!absl::StrContains(request.status().message(), "fuzz.json")) {
      return Broken("a refusal names the input", request.status());
    }
    return absl::OkStatus();
  }
  const absl::Status valid = ValidateRequest(*request, ValidationLimits{});
  if (!valid.ok() && valid.code() != absl::StatusCode::kInvalidArgument) {
    return Broken("validation refuses with InvalidArgument", valid);
  }
  return absl::OkStatus();
}

absl::Status SummaryParserProperties(absl::string_view data) {
  for (const auto& model :
       {ParseModelSummary(data, "fuzz.txt"),
        ParseModelSummaryAs(SummaryFormat::kTorchsummary, data, "fuzz.txt"),
        ParseModelSummaryAs(SummaryFormat::kTorchinfo, data, "fuzz.txt")}) {
    if (absl::Status s = CheckSummary(model); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RequestValidationProperties(absl::string_view data) {
  v1::EstimateRequest request;
  if (!request.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    return absl::OkStatus();  // Not a request: gRPC refuses it before validation.
  }
  // Small limits as well as the server's defaults, so that the limit paths run too.
  ValidationLimits small;
  small.max_layers = 8;
  small.max_trace_events = 16;
  small.max_batch_size = 1024;
  small.max_name_length = 16;
  for (const ValidationLimits& limits : {ValidationLimits{}, small}) {
    const absl::Status status = ValidateRequest(request, limits);
    if (status.ok()) continue;
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      return Broken("validation refuses with InvalidArgument", status);
    }
    // "model.layers[3].parameters: ...": a field path first, and never the caller's
    // input echoed whole (an 8 KB estimator id once broke the client this way).
    const std::string message(status.message());
    const size_t colon = message.find(": ");
    if (colon == std::string::npos || colon == 0) {
      return Broken("a refusal starts with a field path", status);
    }
    if (message.size() > kMaxMessageBytes) {
      return Broken(absl::StrCat("a refusal is at most ", kMaxMessageBytes, " bytes"),
                    absl::Status(status.code(), message.substr(0, 200)));
    }
  }
  return absl::OkStatus();
}

absl::Status ExtenderArgsProperties(absl::string_view data) {
  const std::string body(data);
  nlohmann::json reply = {{"Error", ""}};
  try {
    if (absl::Status deep = CheckJsonDepth(body, "the body"); !deep.ok()) {
      if (deep.code() != absl::StatusCode::kInvalidArgument) {
        return Broken("the depth check refuses with InvalidArgument", deep);
      }
      reply["Error"] = std::string(deep.message());
    } else {
      const nlohmann::json args = nlohmann::json::parse(body, nullptr, false);
      const nlohmann::json* items = nullptr;
      if (args.is_object() && args.contains("Nodes") && args["Nodes"].is_object() &&
          args["Nodes"].contains("items") && args["Nodes"]["items"].is_array()) {
        items = &args["Nodes"]["items"];
      }
      for (size_t i = 0; items != nullptr && i < items->size(); ++i) {
        const absl::StatusOr<std::vector<NodeGpu>> gpus = NodeGpus((*items)[i]);
        if (!gpus.ok() && gpus.status().code() != absl::StatusCode::kInvalidArgument) {
          return Broken("a node's refusal is InvalidArgument", gpus.status());
        }
        reply["FailedNodes"][NodeName((*items)[i])] =
            gpus.ok() ? "" : std::string(gpus.status().message());
      }
      if (items != nullptr) reply["Nodes"] = args["Nodes"];  // Echoed, as Filter does.
    }
    (void)ReplyText(reply);
  } catch (const std::exception& e) {
    return Broken("nothing throws", absl::InternalError(e.what()));
  }
  return absl::OkStatus();
}

}  // namespace gpuest::fuzz
