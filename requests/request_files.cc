#include "requests/request_files.h"

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/json_guard.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "requests/proto_json_fields.h"
#include "requests/summary_parser.h"
#include "requests/trace_batch.h"

namespace gpuest::requests {
namespace {

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  if (path != "-") return common::ReadTextFile(path, kMaxRequestFileBytes);
  // In chunks, stopping one byte past the bound to tell a stream that is over it.
  std::string text;
  char chunk[64 << 10];
  while (text.size() <= kMaxRequestFileBytes &&
         std::cin.read(chunk, sizeof(chunk)).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(std::cin.gcount()));
  }
  if (text.size() > kMaxRequestFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("stdin: over the limit of ", kMaxRequestFileBytes, " bytes"));
  }
  return text;
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

// Whether text is a JSON object with a top-level key that only an EstimateRequest has
// ("model", "features", "gpu", "estimators"). Only asked once both parses failed.
bool MeansARequest(const std::string& text) {
  google::protobuf::Struct top;
  if (!google::protobuf::util::JsonStringToMessage(text, &top).ok()) return false;
  for (const auto& [key, value] : top.fields()) {
    if (JsonField(*v1::EstimateRequest::descriptor(), key) != nullptr &&
        JsonField(*v1::ModelDescription::descriptor(), key) == nullptr) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path,
                                                const ReadOptions& options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  return ParseRequestText(*text, path == "-" ? "stdin" : path, options);
}

namespace {

// JSON text as a ModelDescription or, failing that, an EstimateRequest, each field
// given once.
absl::StatusOr<v1::EstimateRequest> ParseJsonRequest(const std::string& text,
                                                     const std::string& name) {
  // Protobuf's JSON parser recurses per level and may run up to three times below,
  // and takes a key named twice as its last copy (appending a list's two copies).
  if (absl::Status shape = common::CheckJsonText(text, name); !shape.ok()) return shape;
  v1::EstimateRequest request;
  auto as_model =
      google::protobuf::util::JsonStringToMessage(text, request.mutable_model());
  if (as_model.ok()) {
    GPUEST_RETURN_IF_ERROR(
        CheckEachFieldOnce(text, *v1::ModelDescription::descriptor(), name));
    return request;
  }
  request.Clear();
  auto as_request = google::protobuf::util::JsonStringToMessage(text, &request);
  if (!as_request.ok()) {
    // Report the complaint about the form the text meant, so that it names the bad
    // field: "(model.batch_size): invalid value", not "model: Cannot find field".
    if (MeansARequest(text)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": not an EstimateRequest in JSON: ", std::string(as_request.message())));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a ModelDescription (nor an EstimateRequest) in JSON: ",
                     std::string(as_model.message())));
  }
  GPUEST_RETURN_IF_ERROR(
      CheckEachFieldOnce(text, *v1::EstimateRequest::descriptor(), name));
  return request;
}

// The flags' batch size and parallelism over what the file says.
absl::Status ApplyOptions(const std::string& name, const ReadOptions& options,
                          v1::EstimateRequest& request) {
  if (options.batch_size > 0) {
    // A trace answers for its own batch only: another --batch-size is refused before
    // any call, by the rule the server holds every request to.
    if (request.has_model()) {
      if (absl::Status traced = CheckTraceBatch(request.model(), options.batch_size);
          !traced.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": --batch-size ", options.batch_size, ": ", traced.message()));
      }
    }
    if (request.has_features()) {
      request.mutable_features()->set_batch_size(options.batch_size);
    } else {
      request.mutable_model()->set_batch_size(options.batch_size);
    }
  }
  if (options.parallelism) {
    if (!request.has_model()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name,
                       ": --data-parallel, --sharding and --tensor-parallel need a model "
                       "description, not features"));
    }
    *request.mutable_model()->mutable_parallelism() = *options.parallelism;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::EstimateRequest> ParseRequestText(const std::string& text,
                                                     const std::string& name,
                                                     const ReadOptions& options) {
  if (options.batch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch-size must be positive, got ", options.batch_size));
  }
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty input"));
  }
  if (text[first] != '{') return ReadSummary(text, name, options);
  GPUEST_ASSIGN_OR_RETURN(v1::EstimateRequest request, ParseJsonRequest(text, name));
  GPUEST_RETURN_IF_ERROR(ApplyOptions(name, options, request));
  return request;
}

absl::StatusOr<v1::Sharding> ParseSharding(const std::string& word) {
  static const auto* words = new std::map<std::string, v1::Sharding>{
      {"none", v1::SHARDING_NONE},
      {"ddp", v1::SHARDING_NONE},
      {"optimizer", v1::SHARDING_OPTIMIZER},
      {"zero1", v1::SHARDING_OPTIMIZER},
      {"gradients", v1::SHARDING_GRADIENTS},
      {"zero2", v1::SHARDING_GRADIENTS},
      {"fsdp-shard-grad-op", v1::SHARDING_GRADIENTS},
      {"parameters", v1::SHARDING_PARAMETERS},
      {"zero3", v1::SHARDING_PARAMETERS},
      {"fsdp-full-shard", v1::SHARDING_PARAMETERS}};
  auto it = words->find(word);
  if (it != words->end()) return it->second;
  return absl::InvalidArgumentError(absl::StrCat(
      "--sharding: '", word,
      "' is none of none|ddp, optimizer|zero1, gradients|zero2|fsdp-shard-grad-op, "
      "parameters|zero3|fsdp-full-shard"));
}

namespace {

// The top-level keys of a JSON object; empty for anything else.
std::vector<std::string> TopLevelKeys(const std::string& text) {
  std::vector<std::string> keys;
  google::protobuf::Struct top;
  if (!google::protobuf::util::JsonStringToMessage(text, &top).ok()) return keys;
  for (const auto& [key, value] : top.fields()) keys.push_back(key);
  return keys;
}

bool HasAnyKey(const std::vector<std::string>& keys,
               std::initializer_list<const char*> wanted) {
  for (const std::string& k : keys)
    for (const char* w : wanted)
      if (k == w) return true;
  return false;
}

template <typename Message>
absl::StatusOr<Message> ParseJson(const std::string& text, const std::string& name,
                                  const char* what) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(text, &message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": not a ", what, " in JSON: ", std::string(status.message())));
  }
  return message;
}

std::string BaseName(const std::string& path) {
  return path == "-" ? "stdin" : path.substr(path.find_last_of('/') + 1);
}

}  // namespace

namespace {

// ReadPlacementJob on text already read.
absl::StatusOr<v1::PlacementJob> JobFromText(const std::string& text,
                                             const std::string& path,
                                             const ReadOptions& options) {
  const std::string name = path == "-" ? "stdin" : path;
  v1::PlacementJob job;
  if (HasAnyKey(TopLevelKeys(text), {"measured", "estimate", "description"})) {
    auto parsed = ParseJson<v1::PlacementJob>(text, name, "PlacementJob");
    if (!parsed.ok()) return parsed.status();
    job = *std::move(parsed);
  } else {
    auto request = ParseRequestText(text, name, options);
    if (!request.ok()) return request.status();
    *job.mutable_description() = *std::move(request);
  }
  if (job.name().empty()) job.set_name(BaseName(path));
  return job;
}

}  // namespace

absl::StatusOr<v1::PlacementJob> ReadPlacementJob(const std::string& path,
                                                  const ReadOptions& options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  return JobFromText(*text, path, options);
}

absl::StatusOr<v1::CheckPlacementRequest> ReadPlacementRequest(
    const std::string& path, const PlacementReadOptions& options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  const std::string name = path == "-" ? "stdin" : path;
  v1::CheckPlacementRequest request;
  if (HasAnyKey(TopLevelKeys(*text), {"candidate", "existing"})) {
    auto parsed =
        ParseJson<v1::CheckPlacementRequest>(*text, name, "CheckPlacementRequest");
    if (!parsed.ok()) return parsed.status();
    request = *std::move(parsed);
  } else {
    auto candidate = JobFromText(*text, path, options.job);
    if (!candidate.ok()) return candidate.status();
    *request.mutable_candidate() = *std::move(candidate);
    if (options.gpu.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name,
          ": a single job needs --gpu (a catalog id or nvidia-smi name); or give a "
          "CheckPlacementRequest with its \"gpu\""));
    }
  }
  if (!options.gpu.empty()) request.mutable_gpu()->set_catalog_id(options.gpu);
  // The jobs beside keep their own layouts: the flags' parallelism is the candidate's.
  ReadOptions beside_options = options.job;
  beside_options.parallelism.reset();
  for (const std::string& file : options.beside) {
    auto job = ReadPlacementJob(file, beside_options);
    if (!job.ok()) return job.status();
    *request.add_existing() = *std::move(job);
  }
  return request;
}

absl::StatusOr<v1::RankGpusRequest> ReadRankRequest(const std::string& path,
                                                    const ReadOptions& options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  if (HasAnyKey(TopLevelKeys(*text), {"job"})) {
    return ParseJson<v1::RankGpusRequest>(*text, path == "-" ? "stdin" : path,
                                          "RankGpusRequest");
  }
  v1::RankGpusRequest request;
  auto job = JobFromText(*text, path, options);
  if (!job.ok()) return job.status();
  *request.mutable_job() = *std::move(job);
  return request;
}

}  // namespace gpuest::requests
