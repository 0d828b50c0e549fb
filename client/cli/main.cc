// gpuest: the operator's command line for gpuest-server.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli/render.h"
#include "common/flags.h"
#include "google/protobuf/util/json_util.h"
#include "gpuest/client.h"
#include "integrations/kubernetes/dra_claim.h"
#include "integrations/kubernetes/pod_patch.h"
#include "requests/request_files.h"

ABSL_FLAG(std::string, target, "",
          "server address(es), host:port[,host:port...]; default $GPUEST_TARGET, else "
          "127.0.0.1:50051");
// The default is the client policy's, the one every gpuest client uses.
ABSL_FLAG(absl::Duration, timeout, gpuest::PolicyDefaultDeadline(),
          "deadline of the command from its start: reading the file, waiting for a "
          "server and retries included");
ABSL_FLAG(std::string, gpu, "",
          "estimate, place: target GPU model, e.g. a100-40gb, h100-80gb, "
          "a100-40gb-mig-3g.20gb, or the name nvidia-smi prints");
ABSL_FLAG(std::vector<std::string>, beside, {},
          "place: comma-separated job files already on the GPU (each a PlacementJob in "
          "JSON, e.g. {\"measured\": {...}}, or a description as `estimate` reads it)");
ABSL_FLAG(std::string, estimators, "", "estimate: comma-separated estimator ids to run");
ABSL_FLAG(int64_t, batch_size, 0,
          "estimate: training batch size; sets (overrides) the file's, and is required "
          "when FILE is a torchsummary/torchinfo summary; refused for a description "
          "with an allocation trace recorded at another batch size (describe it again "
          "at this batch size)");
ABSL_FLAG(uint32_t, data_parallel, 0,
          "estimate/place/rank: GPUs the job runs on (data-parallel world size); the "
          "estimate is then per GPU. Sets (overrides) the description's parallelism");
ABSL_FLAG(std::string, sharding, "none",
          "with --data-parallel: none|ddp, optimizer|zero1, gradients|zero2|"
          "fsdp-shard-grad-op, parameters|zero3|fsdp-full-shard");
ABSL_FLAG(uint32_t, tensor_parallel, 0, "tensor-parallel degree (Megatron); 0: none");
ABSL_FLAG(bool, offload_optimizer, false, "the optimizer state lives in host memory");
ABSL_FLAG(bool, offload_parameters, false,
          "with --sharding=parameters: the sharded parameters live in host memory");
ABSL_FLAG(uint64_t, largest_unit_bytes, 0,
          "with --sharding gradients or parameters: bytes of the largest unit gathered "
          "at once (an FSDP-wrapped block); 0 keeps the description's");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signed the server's certificate: talk TLS (default plaintext)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate, for a server that requires mutual TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, scheduler, "",
          "pod-patch: hami, volcano, kai or alibaba (which request the patch sets)");
ABSL_FLAG(int, container, 0, "pod-patch: index of the pod's container to patch");
ABSL_FLAG(bool, json, false, "print the response as JSON instead of a table");
ABSL_FLAG(std::string, device_class, "gpu.nvidia.com",
          "claim: the DRA device class the template's request asks for (one of the "
          "table's: gpu.nvidia.com, mig.nvidia.com, gpu-shared.gpuest.io built in)");
ABSL_FLAG(std::string, dra_classes, "",
          "claim: a table of DRA device classes (the shape of "
          "integrations/kubernetes/dra_device_classes.json) instead of the built-in one");
ABSL_FLAG(std::string, name, "",
          "claim: the ResourceClaimTemplate's name (default gpuest-<model name>)");
ABSL_FLAG(std::string, description_ref, "",
          "claim: put this ConfigMap reference (NAME or NAME/KEY, mounted on the "
          "server) in gpuest.io/description instead of the description itself");
ABSL_FLAG(bool, unsized, false,
          "claim: print the template before sizing (what kubectl would send the "
          "webhook), not after");

namespace {

// The deadline runs from the process's start: reading and parsing a large description
// counts against --timeout, so a caller's own limit (the Slurm plugin's) is kept, and
// a file too large to answer in time is said to be that, not a slow server.
absl::Time g_deadline = absl::InfiniteFuture();

absl::StatusOr<absl::Duration> TimeLeft(const std::string& path) {
  const absl::Duration left = g_deadline - absl::Now();
  if (left > absl::ZeroDuration()) return left;
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": reading the description took the whole --timeout (",
                   absl::FormatDuration(absl::GetFlag(FLAGS_timeout)),
                   "): it is too large to be answered in time"));
}

enum ExitCode { kOk = 0, kFailed = 1, kBadInput = 2, kUnavailable = 3 };

constexpr char kEpilogue[] =
    "Commands:\n"
    "  estimate FILE   estimate a job; FILE (or - for stdin) is a ModelDescription\n"
    "                  (or EstimateRequest) in JSON, e.g. from\n"
    "                  `python3 -m gpuest.describe`, or the text printed by\n"
    "                  torchsummary.summary() or torchinfo.summary(model,\n"
    "                  input_size=...), which also needs --batch-size\n"
    "  place FILE      does a job fit a GPU beside the jobs already on it, and how\n"
    "                  much will they slow each other: FILE is a CheckPlacementRequest\n"
    "                  in JSON, or one job (a PlacementJob in JSON, or a description\n"
    "                  as for estimate) with --gpu and optionally --beside FILE,...\n"
    "  rank FILE       one job (RankGpusRequest, PlacementJob or description) against\n"
    "                  every GPU of the server's catalog, MIG profiles included\n"
    "  pod-patch FILE  estimate FILE (as estimate does, --gpu too) and print the JSON\n"
    "                  Patch (RFC 6902) setting the recommended memory as --scheduler\n"
    "                  reads it: hami nvidia.com/gpumem (MiB), volcano\n"
    "                  volcano.sh/gpu-memory (MiB), kai annotation gpu-memory (MiB),\n"
    "                  alibaba aliyun.com/gpu-mem (GiB); always rounded up; and the\n"
    "                  annotations gpuest.io/requirement-bytes, uncapped-peak-bytes,\n"
    "                  models-version, memory-request: the admission webhook's patch\n"
    "                  for the same pod, byte for byte. Only HAMi enforces the figure\n"
    "                  (HAMi-core); for the others a note on stderr says how the job\n"
    "                  caps itself\n"
    "  claim FILE      estimate FILE for every GPU model (RankGpus) and print the\n"
    "                  resource.k8s.io/v1 ResourceClaimTemplate (JSON) whose request\n"
    "                  asks --device-class for one model of those the job fits, in\n"
    "                  that order (firstAvailable), each with a CEL selector for the\n"
    "                  model and, for a shared class, capacity.requests of its own\n"
    "                  figure, rounded as the class's requestPolicy rounds: the\n"
    "                  admission webhook's sizing of the same template, byte for byte.\n"
    "                  --gpu keeps one model; --name, --description-ref, --unsized\n"
    "  models          list the estimators the server has loaded\n"
    "  health          report whether the server is serving\n"
    "\n"
    "Environment: GPUEST_TARGET is the default --target.\n"
    "Exit codes: 0 ok, 1 other failure, 2 bad input (usage, file, or a request the\n"
    "server rejects as INVALID_ARGUMENT), 3 server unavailable (not reachable, not\n"
    "serving, or no answer before the deadline).";

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return kBadInput;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kUnavailable;
    default:
      return kFailed;
  }
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gpuest: %s: %s\n",
               absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return ExitCodeFor(status);
}

// The parallelism the flags give; nullopt when none is given (the file's stays).
absl::StatusOr<std::optional<gpuest::v1::Parallelism>> ParallelismFromFlags() {
  const bool given = absl::GetFlag(FLAGS_data_parallel) > 0 ||
                     absl::GetFlag(FLAGS_tensor_parallel) > 0 ||
                     absl::GetFlag(FLAGS_offload_optimizer) ||
                     absl::GetFlag(FLAGS_offload_parameters) ||
                     absl::GetFlag(FLAGS_sharding) != "none";
  if (!given) return std::optional<gpuest::v1::Parallelism>();
  auto sharding = gpuest::requests::ParseSharding(absl::GetFlag(FLAGS_sharding));
  if (!sharding.ok()) return sharding.status();
  gpuest::v1::Parallelism p;
  p.set_data_parallel(absl::GetFlag(FLAGS_data_parallel));
  p.set_sharding(*sharding);
  p.set_tensor_parallel(absl::GetFlag(FLAGS_tensor_parallel));
  p.set_offload_optimizer(absl::GetFlag(FLAGS_offload_optimizer));
  p.set_offload_parameters(absl::GetFlag(FLAGS_offload_parameters));
  p.set_largest_unit_bytes(absl::GetFlag(FLAGS_largest_unit_bytes));
  return std::optional<gpuest::v1::Parallelism>(p);
}

// How a job file is read: --batch-size and the parallelism flags.
absl::StatusOr<gpuest::requests::ReadOptions> JobReadOptionsFromFlags() {
  gpuest::requests::ReadOptions read_options;
  read_options.batch_size = absl::GetFlag(FLAGS_batch_size);
  auto parallelism = ParallelismFromFlags();
  if (!parallelism.ok()) return parallelism.status();
  read_options.parallelism = *parallelism;
  return read_options;
}

// FILE read and sent as the estimate flags say.
absl::StatusOr<gpuest::v1::EstimateRequest> RequestFromFlags(const std::string& path) {
  auto read_options = JobReadOptionsFromFlags();
  if (!read_options.ok()) return read_options.status();
  auto request = gpuest::requests::ReadRequest(path, *read_options);
  if (!request.ok()) return request.status();
  if (!absl::GetFlag(FLAGS_gpu).empty()) request->set_gpu(absl::GetFlag(FLAGS_gpu));
  for (absl::string_view id :
       absl::StrSplit(absl::GetFlag(FLAGS_estimators), ',', absl::SkipEmpty())) {
    request->add_estimators(std::string(id));
  }
  return request;
}

// The server's answer to request (read from path) through one of the client's calls,
// given what is left of --timeout.
template <typename Request, typename Response>
absl::StatusOr<Response> Ask(const gpuest::Client& client,
                             absl::StatusOr<Response> (gpuest::Client::*call)(
                                 const Request&, absl::Duration) const,
                             const Request& request, const std::string& path) {
  auto left = TimeLeft(path);
  if (!left.ok()) return left.status();
  return (client.*call)(request, *left);
}

// The response as JSON (--json), else as render prints it for people.
template <typename Response>
int Print(const Response& response, std::string (*render)(const Response&)) {
  std::cout << (absl::GetFlag(FLAGS_json) ? gpuest::cli::RenderJson(response)
                                          : render(response));
  return kOk;
}

int Estimate(const gpuest::Client& client, const std::string& path) {
  auto request = RequestFromFlags(path);
  if (!request.ok()) return Fail(request.status());
  auto response = Ask(client, &gpuest::Client::Estimate, *request, path);
  if (!response.ok()) return Fail(response.status());
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << gpuest::cli::RenderJson(*response);
  } else {
    const bool has_model = request->has_model();
    std::cout << gpuest::cli::RenderEstimate(
        *response, has_model ? request->model().name() : "(features)",
        has_model ? request->model().batch_size() : request->features().batch_size());
  }
  return kOk;
}

int PodPatch(const gpuest::Client& client, const std::string& path) {
  auto scheduler =
      gpuest::kubernetes::ParseSharingScheduler(absl::GetFlag(FLAGS_scheduler));
  if (!scheduler.ok()) return Fail(scheduler.status());
  if (absl::GetFlag(FLAGS_container) < 0) {
    return Fail(absl::InvalidArgumentError("--container must be 0 or more"));
  }
  auto request = RequestFromFlags(path);
  if (!request.ok()) return Fail(request.status());
  auto response = Ask(client, &gpuest::Client::Estimate, *request, path);
  if (!response.ok()) return Fail(response.status());
  auto memory = gpuest::kubernetes::MemoryRequestFor(
      *scheduler, response->recommendation().memory_bytes());
  if (!memory.ok()) return Fail(memory.status());
  gpuest::kubernetes::PodShape shape;
  shape.container_index = absl::GetFlag(FLAGS_container);
  std::cout << gpuest::kubernetes::PodPatchJson(
      *memory, gpuest::kubernetes::PodFiguresOf(*response), shape);
  const gpuest::v1::MemoryCap& cap = response->recommendation().cap();
  std::cerr << gpuest::kubernetes::EnforcementNote(*scheduler, *memory, cap.needed(),
                                                   cap.per_process_memory_fraction());
  return kOk;
}

// A DNS-1123 name from a model's name: "gpuest-resnet50".
std::string TemplateName(const gpuest::v1::EstimateRequest& request) {
  std::string name = "gpuest-";
  for (const char ch : request.has_model() ? request.model().name() : std::string()) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9');
    if (ok || name.back() != '-') name.push_back(ok ? lower : '-');
  }
  while (name.back() == '-') name.pop_back();
  return name == "gpuest" ? "gpuest-claim" : name.substr(0, 63);
}

// --device-class, found in classes (the table --dra-classes names, else the built-in
// one); InvalidArgument listing the table's classes when it is not there.
absl::StatusOr<const gpuest::kubernetes::DraDeviceClass*> DeviceClassFromFlags(
    const gpuest::kubernetes::DraClasses& classes) {
  const gpuest::kubernetes::DraDeviceClass* cls =
      classes.Find(absl::GetFlag(FLAGS_device_class));
  if (cls != nullptr) return cls;
  std::string known;
  for (const auto& c : classes.classes)
    absl::StrAppend(&known, known.empty() ? "" : ", ", c.device_class);
  return absl::InvalidArgumentError(absl::StrCat("--device-class: '",
                                                 absl::GetFlag(FLAGS_device_class),
                                                 "' is not in the table (", known, ")"));
}

// What the template's gpuest.io/description annotation holds: --description-ref, else
// the request itself in JSON, if it fits an annotation.
absl::StatusOr<std::string> ClaimDescription(const gpuest::v1::EstimateRequest& request,
                                             const std::string& path) {
  std::string description = absl::GetFlag(FLAGS_description_ref);
  if (!description.empty()) return description;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (auto printed =
          google::protobuf::util::MessageToJsonString(request, &description, options);
      !printed.ok()) {
    return absl::InternalError(std::string(printed.message()));
  }
  // Kubernetes holds all of an object's annotations to 256 KiB.
  if (description.size() > (200 << 10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", description.size(),
        " bytes of description do not fit an annotation: put it in a ConfigMap "
        "mounted on the server and name it with --description-ref"));
  }
  return description;
}

int Claim(const gpuest::Client& client, const std::string& path) {
  auto classes = gpuest::kubernetes::LoadDraClasses(absl::GetFlag(FLAGS_dra_classes));
  if (!classes.ok()) return Fail(classes.status());
  auto device_class = DeviceClassFromFlags(*classes);
  if (!device_class.ok()) return Fail(device_class.status());
  const gpuest::kubernetes::DraDeviceClass* cls = *device_class;
  auto request = RequestFromFlags(path);
  if (!request.ok()) return Fail(request.status());
  auto claim_description = ClaimDescription(*request, path);
  if (!claim_description.ok()) return Fail(claim_description.status());
  const std::string& description = *claim_description;
  const std::string name = absl::GetFlag(FLAGS_name).empty() ? TemplateName(*request)
                                                             : absl::GetFlag(FLAGS_name);
  if (absl::GetFlag(FLAGS_unsized)) {
    std::cout << gpuest::kubernetes::ClaimTemplateSkeleton(name, description, *cls);
    return kOk;
  }
  // The description may name one GPU (or --gpu does): that model only.
  const std::string only_gpu = request->gpu();
  request->clear_gpu();
  const gpuest::v1::RankGpusRequest rank =
      gpuest::kubernetes::RankRequestFor(*request, {cls});
  auto ranking = Ask(client, &gpuest::Client::RankGpus, rank, path);
  if (!ranking.ok()) return Fail(ranking.status());
  auto sizing = gpuest::kubernetes::SizeClaim(*ranking, *cls, only_gpu, path);
  if (!sizing.ok()) return Fail(sizing.status());
  auto text = gpuest::kubernetes::ClaimTemplateJson(name, description, *cls, *sizing);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text;
  for (const std::string& w : sizing->warnings) std::cerr << w << "\n";
  return kOk;
}

int Place(const gpuest::Client& client, const std::string& path) {
  gpuest::requests::PlacementReadOptions read_options;
  auto job = JobReadOptionsFromFlags();
  if (!job.ok()) return Fail(job.status());
  read_options.job = *job;
  read_options.gpu = absl::GetFlag(FLAGS_gpu);
  read_options.beside = absl::GetFlag(FLAGS_beside);
  auto request = gpuest::requests::ReadPlacementRequest(path, read_options);
  if (!request.ok()) return Fail(request.status());
  auto response = Ask(client, &gpuest::Client::CheckPlacement, *request, path);
  if (!response.ok()) return Fail(response.status());
  return Print(*response, gpuest::cli::RenderPlacement);
}

int Rank(const gpuest::Client& client, const std::string& path) {
  auto read_options = JobReadOptionsFromFlags();
  if (!read_options.ok()) return Fail(read_options.status());
  auto request = gpuest::requests::ReadRankRequest(path, *read_options);
  if (!request.ok()) return Fail(request.status());
  auto response = Ask(client, &gpuest::Client::RankGpus, *request, path);
  if (!response.ok()) return Fail(response.status());
  return Print(*response, gpuest::cli::RenderRanking);
}

int Models(const gpuest::Client& client) {
  auto response = client.ListEstimators(absl::GetFlag(FLAGS_timeout));
  if (!response.ok()) return Fail(response.status());
  return Print(*response, gpuest::cli::RenderEstimators);
}

int Health(const gpuest::Client& client) {
  auto state = client.Health("", absl::GetFlag(FLAGS_timeout));
  if (!state.ok()) return Fail(state.status());
  const char* name = *state == gpuest::ServingState::kServing      ? "SERVING"
                     : *state == gpuest::ServingState::kNotServing ? "NOT_SERVING"
                                                                   : "UNKNOWN";
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("{\"status\": \"%s\", \"target\": \"%s\"}\n", name,
                client.channel_target().c_str());
  } else {
    std::printf("%s %s\n", client.channel_target().c_str(), name);
  }
  return *state == gpuest::ServingState::kServing ? kOk : kUnavailable;
}

// The client --target (else $GPUEST_TARGET, else the default), --timeout and the TLS
// flags say.
gpuest::ClientOptions ClientOptionsFromFlags() {
  std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) {
    const char* env = std::getenv("GPUEST_TARGET");
    target = env != nullptr && *env != '\0' ? env : "127.0.0.1:50051";
  }
  gpuest::ClientOptions options;
  options.targets = absl::StrSplit(target, ',', absl::SkipEmpty());
  options.default_deadline = absl::GetFlag(FLAGS_timeout);
  options.tls = {absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
                 absl::GetFlag(FLAGS_tls_key)};
  return options;
}

// args: the command and its arguments; the exit code.
int RunCommand(const gpuest::Client& client, const std::vector<std::string>& args) {
  const std::string& command = args.front();
  const bool takes_file = command == "estimate" || command == "place" ||
                          command == "rank" || command == "pod-patch" ||
                          command == "claim";
  const size_t want_args = takes_file ? 2 : 1;
  if ((takes_file || command == "models" || command == "health") &&
      args.size() != want_args) {
    std::fprintf(stderr, "gpuest: '%s' takes %s; see --help\n", command.c_str(),
                 want_args == 2 ? "one FILE argument (or -)" : "no arguments");
    return kBadInput;
  }
  if (command == "estimate") return Estimate(client, args[1]);
  if (command == "place") return Place(client, args[1]);
  if (command == "rank") return Rank(client, args[1]);
  if (command == "pod-patch") return PodPatch(client, args[1]);
  if (command == "claim") return Claim(client, args[1]);
  if (command == "models") return Models(client);
  if (command == "health") return Health(client);
  std::fprintf(stderr, "gpuest: unknown command '%s'; see --help\n", command.c_str());
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  const gpuest::common::ProgramUsage usage{
      "gpuest [flags] COMMAND [ARGS]",
      "Asks a gpuest-server for the peak GPU memory and utilization of a training job.",
      kEpilogue, __FILE__};
  const absl::Time started = absl::Now();
  const std::vector<std::string> args = gpuest::common::ParseFlags(argc, argv, usage);
  g_deadline = started + absl::GetFlag(FLAGS_timeout);
  if (args.empty()) {
    std::fprintf(stderr, "gpuest: a command is required\n\n%s",
                 gpuest::common::UsageText(usage).c_str());
    return kBadInput;
  }
  auto client = gpuest::Client::Create(ClientOptionsFromFlags());
  if (!client.ok()) return Fail(client.status());
  return RunCommand(**client, args);
}
