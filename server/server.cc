#include "server/server.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "integrations/kubernetes/kube_extender.h"
#include "nlohmann/json.hpp"
#include "placement/placement_engine.h"
#include "server/admin_service.h"
#include "server/admission_http.h"
#include "server/credentials.h"
#include "server/extender_http.h"
#include "server/http_front.h"
#include "server/intake.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/worker_pool.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// The limits hold bytes after decoding: a 4 MB gzip message can inflate to gigabytes
// before a size check sees it, and no client of gpuest needs compression (its requests
// are a few hundred KB at most). A compressed message is refused (UNIMPLEMENTED,
// "Compression algorithm ... is disabled") before it is inflated.
void AcceptUncompressedOnly(grpc::ServerBuilder& builder) {
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
}

constexpr char kServiceName[] = "gpuest.v1.Estimator";
constexpr char kPlacementServiceName[] = "gpuest.v1.Placement";

// GET /metrics on the HTTP front: scrapes are answered on its polling threads, so idle
// or half-sent connections (which cost a socket there, not a thread) never hold one.
absl::StatusOr<std::unique_ptr<HttpFront>> StartMetricsHttp(const Metrics& metrics,
                                                            const std::string& address) {
  HttpFrontOptions options;
  options.name = "metrics";
  options.flag = "--metrics-listen";
  options.listen_address = address;
  options.timeout = absl::Seconds(1);  // A scrape sends its request at once.
  options.error_content_type = "text/plain";
  options.error_body = [](const std::string& why) { return "gpuest: " + why + "\n"; };
  options.pages.push_back({"/metrics", "text/plain; version=0.0.4; charset=utf-8",
                           [&metrics] { return metrics.Text(); }});
  return HttpFront::Start(std::move(options), {}, nullptr);
}

// Written to a temporary name and renamed, so a reader never sees half a file.
absl::Status WriteReadyFile(const std::string& path, int grpc_port, int metrics_port,
                            int admin_port, int extender_port, int admission_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"grpc_port", grpc_port},
                          {"metrics_port", metrics_port},
                          {"admin_port", admin_port},
                          {"extender_port", extender_port},
                          {"admission_port", admission_port},
                          {"pid", static_cast<int>(getpid())}}
               .dump()
        << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// Estimator workers: --workers, or one per CPU core.
int WorkerThreads(const WorkOptions& work) {
  return work.worker_threads > 0 ? work.worker_threads
                                 : std::max(1u, std::thread::hardware_concurrency());
}

// The admin address without a loopback host: said in the log, since Admin has no
// authentication of its own.
bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "[::1]:") ||
         absl::StartsWith(address, "localhost:");
}

}  // namespace

GpuestServer::GpuestServer(const ServerOptions& options) : options_(options) {}
GpuestServer::~GpuestServer() { Shutdown(); }

int GpuestServer::metrics_port() const {
  return metrics_http_ ? metrics_http_->port() : 0;
}
int GpuestServer::extender_port() const {
  return extender_http_ ? extender_http_->port() : 0;
}
int GpuestServer::admission_port() const {
  return webhook_https_ ? webhook_https_->port() : 0;
}

absl::StatusOr<std::unique_ptr<GpuestServer>> GpuestServer::Create(
    const ServerOptions& options) {
  std::unique_ptr<GpuestServer> s(new GpuestServer(options));
  // Transport security first: a refused configuration fails before models load.
  GPUEST_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ServerCredentials> credentials,
      ServerCredentialsFor(options.grpc.listen_address, options.grpc.tls));
  spdlog::info("gRPC transport: {}", TransportSecurityName(options.grpc.tls));
  GPUEST_RETURN_IF_ERROR(s->StartMetrics());
  GPUEST_ASSIGN_OR_RETURN(
      s->models_,
      ModelLifecycle::Create(options.models, options.work.limits, *s->metrics_));
  const int threads = WorkerThreads(options.work);
  s->SetUpWork(threads);
  GPUEST_RETURN_IF_ERROR(s->StartGrpc(std::move(credentials)));
  GPUEST_RETURN_IF_ERROR(s->StartAdmin());
  s->AnnounceServing(threads);
  GPUEST_RETURN_IF_ERROR(s->StartExtender());
  GPUEST_RETURN_IF_ERROR(s->StartAdmission());
  if (!options.ready_file.empty()) {
    GPUEST_RETURN_IF_ERROR(WriteReadyFile(options.ready_file, s->grpc_port_,
                                          s->metrics_port(), s->admin_port_,
                                          s->extender_port(), s->admission_port()));
  }
  return s;
}

absl::Status GpuestServer::StartMetrics() {
  metrics_ = Metrics::Create();
  metrics_->SetBuildInfo(GPUEST_VERSION, grpc::Version());
  if (!options_.metrics_listen_address.empty()) {
    GPUEST_ASSIGN_OR_RETURN(metrics_http_,
                            StartMetricsHttp(*metrics_, options_.metrics_listen_address));
  }
  return absl::OkStatus();
}

void GpuestServer::SetUpWork(int threads) {
  pool_ = std::make_unique<WorkerPool>(threads, options_.work.max_queued);
  intake_ = std::make_unique<Intake>(options_.work.max_bytes_in_flight, threads);
  const GrpcTransportOptions& transport = options_.grpc.transport;
  if (transport.max_resets_per_second > 0) {
    Metrics* metrics = metrics_.get();
    stream_guard_ = std::make_unique<StreamGuard>(
        transport.max_resets_per_second,
        [metrics](const std::string&) { metrics->ConnectionCut(); });
  }
  // The extender's calls may hold half the workers (at least one): a flood of them
  // leaves the others to the gRPC API.
  dispatcher_ = std::make_unique<CallDispatcher>(
      *metrics_, *pool_, *intake_, options_.grpc.max_message_bytes,
      options_.work.inline_max_request_bytes, std::max(1, threads / 2),
      stream_guard_.get());
  service_ = std::make_unique<EstimatorService>(*models_, *dispatcher_);
  placement_service_ = std::make_unique<PlacementService>(*models_, *dispatcher_);
}

absl::Status GpuestServer::StartGrpc(
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would start and
  // silently take half the connections. Without it, the second one fails to bind.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.grpc.listen_address, credentials, &grpc_port_);
  builder.SetMaxReceiveMessageSize(options_.grpc.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.grpc.max_message_bytes);
  ApplyTransportBounds(options_.grpc.transport, "grpc", builder);
  spdlog::info("gRPC transport bounds: {}",
               DescribeTransportBounds(options_.grpc.transport));
  AcceptUncompressedOnly(builder);
  builder.RegisterService(service_.get());
  builder.RegisterService(placement_service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.grpc.listen_address));
  }
  if (stream_guard_) stream_guard_->SetLocalPort(grpc_port_);
  return absl::OkStatus();
}

absl::Status GpuestServer::StartAdmin() {
  const std::string& address = options_.admin_listen_address;
  if (address.empty()) return absl::OkStatus();
  admin_pool_ = std::make_unique<WorkerPool>(1, 4);
  admin_service_ = std::make_unique<AdminService>(*models_, *admin_pool_);
  grpc::ServerBuilder admin;
  admin.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyTransportBounds(options_.grpc.transport, "admin", admin);
  AcceptUncompressedOnly(admin);
  admin.AddListeningPort(address, grpc::InsecureServerCredentials(), &admin_port_);
  admin.RegisterService(admin_service_.get());
  admin_server_ = admin.BuildAndStart();
  if (!admin_server_ || admin_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (admin)"));
  }
  if (!IsLoopback(address)) {
    spdlog::warn(
        "gpuest.v1.Admin is served on {}, not on loopback: anyone who reaches "
        "it can reload the models",
        address);
  }
  return absl::OkStatus();
}

void GpuestServer::AnnounceServing(int threads) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kServiceName, true);
  health->SetServingStatus(kPlacementServiceName, true);
  health->SetServingStatus(true);
  spdlog::info("serving gRPC on port {} ({} workers), /metrics on {}, Admin on {}",
               grpc_port_, threads,
               metrics_port() ? absl::StrCat("port ", metrics_port()) : "nothing",
               admin_port_ ? absl::StrCat("port ", admin_port_) : "nothing");
}

absl::Status GpuestServer::StartExtender() {
  const kubernetes::ExtenderOptions& extender = options_.extender;
  if (extender.listen_address.empty()) return absl::OkStatus();
  // The extender answers from the same engines as the gRPC services, through the
  // same dispatcher (intake, queue, deadlines, metrics).
  extender_ = std::make_unique<kubernetes::KubeExtender>(*models_, extender);
  GPUEST_ASSIGN_OR_RETURN(
      extender_http_,
      StartExtenderHttp(*extender_, extender.listen_address, options_.extender_tls,
                        static_cast<size_t>(extender.max_body_bytes), extender.timeout,
                        *dispatcher_));
  return absl::OkStatus();
}

absl::Status GpuestServer::StartAdmission() {
  if (options_.admission.listen_address.empty()) return absl::OkStatus();
  webhook_ =
      std::make_unique<kubernetes::AdmissionWebhook>(*models_, options_.admission.sizing);
  GPUEST_ASSIGN_OR_RETURN(
      webhook_https_, StartAdmissionHttps(*webhook_, options_.admission, *dispatcher_));
  return absl::OkStatus();
}

ReloadOutcome GpuestServer::ReloadModels() { return models_->Reload(); }

void GpuestServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_) {
    server_->GetHealthCheckService()->SetServingStatus(false);
    spdlog::info("shutting down: health NOT_SERVING, draining for up to {}",
                 absl::FormatDuration(options_.grace_period));
    server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.grace_period));
  }
  if (extender_http_) extender_http_->Stop();
  if (webhook_https_) webhook_https_->Stop();
  if (metrics_http_) metrics_http_->Stop();
  // A reload under way finishes (or is cancelled at the deadline); none starts after.
  if (admin_server_) {
    admin_server_->Shutdown(absl::ToChronoTime(absl::Now() + options_.grace_period));
  }
  if (admin_pool_) admin_pool_->Stop();
  if (pool_) pool_->Stop();
  if (!options_.ready_file.empty()) {
    std::error_code ec;
    std::filesystem::remove(options_.ready_file, ec);
  }
  spdlog::info("stopped");
}

}  // namespace gpuest::server
