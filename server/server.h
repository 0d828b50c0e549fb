// File: server.h
//
// gpuest-server's lifecycle: load the models, start gRPC (with health and reflection),
// /metrics and, when asked for, the Admin service on its own address; reload the
// models on request; and shut down gracefully: health NOT_SERVING first, then
// in-flight calls drain within the grace period.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/model_lifecycle.h"
#include "server/options.h"
#include "server/stream_guard.h"

namespace grpc {
class Server;
class ServerCredentials;
}  // namespace grpc

namespace gpuest::kubernetes {
class AdmissionWebhook;
class KubeExtender;
}  // namespace gpuest::kubernetes

namespace gpuest::server {

class AdminService;
class CallDispatcher;
class EstimatorService;
class HttpFront;
class Intake;
class Metrics;
class PlacementService;
class WorkerPool;

class GpuestServer {
 public:
  static absl::StatusOr<std::unique_ptr<GpuestServer>> Create(
      const ServerOptions& options);
  ~GpuestServer();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const;
  int extender_port() const;                      // 0 when the extender is off.
  int admin_port() const { return admin_port_; }  // 0 when Admin is not served.
  int admission_port() const;                     // 0 when the admission webhook is off.

  // Loads and verifies the whole model set again and swaps it in; on any failure the
  // old set keeps serving (ModelLifecycle::Reload). SIGHUP and Admin.ReloadModels.
  ReloadOutcome ReloadModels();

  // Turns health NOT_SERVING, stops taking calls, lets in-flight ones finish within
  // the grace period (then cancels them) and stops the workers. Idempotent.
  void Shutdown();

 private:
  explicit GpuestServer(const ServerOptions& options);

  // Create's steps, in their order; each builds its part from options_.
  absl::Status StartMetrics();  // metrics_, and GET /metrics when asked for.
  void SetUpWork(int threads);  // The workers, intake, dispatcher and services.
  absl::Status StartGrpc(std::shared_ptr<grpc::ServerCredentials> credentials);
  absl::Status StartAdmin();          // Only with an admin address.
  void AnnounceServing(int threads);  // Health SERVING, and the log line that says so.
  absl::Status StartExtender();       // Only with an extender address.
  absl::Status StartAdmission();      // Only with an admission address.

  ServerOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<HttpFront> metrics_http_;  // GET /metrics (--metrics-listen).
  std::unique_ptr<ModelLifecycle> models_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Intake> intake_;
  std::unique_ptr<StreamGuard> stream_guard_;  // Null when not bounded.
  std::unique_ptr<CallDispatcher> dispatcher_;
  std::unique_ptr<EstimatorService> service_;
  std::unique_ptr<PlacementService> placement_service_;
  std::unique_ptr<grpc::Server> server_;
  // The Kubernetes scheduler extender over the models' placement (--extender-listen).
  std::unique_ptr<kubernetes::KubeExtender> extender_;
  std::unique_ptr<HttpFront> extender_http_;
  // The mutating admission webhook over HTTPS (--admission-listen).
  std::unique_ptr<kubernetes::AdmissionWebhook> webhook_;
  std::unique_ptr<HttpFront> webhook_https_;
  int grpc_port_ = 0;
  // Admin: one thread, so that a reload never takes an estimator worker.
  std::unique_ptr<WorkerPool> admin_pool_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<grpc::Server> admin_server_;
  int admin_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gpuest::server
