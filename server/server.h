// File: server.h
//
// gpuest-server's lifecycle: load the models, start gRPC (with health and reflection)
// and /metrics, and shut down gracefully: health NOT_SERVING first, then in-flight
// calls drain within the grace period.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/options.h"

namespace grpc {
class Server;
}

namespace gpuest {

class Admission;
class CallDispatcher;
class Engine;
class EstimatorService;
class ExtenderHttpServer;
class KubeExtender;
class Metrics;
class PlacementEngine;
class PlacementService;
class WorkerPool;

class GpuestServer {
 public:
  static absl::StatusOr<std::unique_ptr<GpuestServer>> Create(
      const ServerOptions& options);
  ~GpuestServer();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const;
  int extender_port() const;  // 0 when the extender is off.

  // Turns health NOT_SERVING, stops taking calls, lets in-flight ones finish within
  // the grace period (then cancels them) and stops the workers. Idempotent.
  void Shutdown();

 private:
  explicit GpuestServer(const ServerOptions& options);

  ServerOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<CallDispatcher> dispatcher_;
  std::unique_ptr<EstimatorService> service_;
  std::unique_ptr<PlacementEngine> placement_engine_;
  std::unique_ptr<PlacementService> placement_service_;
  std::unique_ptr<grpc::Server> server_;
  // The Kubernetes scheduler extender over placement_engine_ (--extender-listen).
  std::unique_ptr<KubeExtender> extender_;
  std::unique_ptr<ExtenderHttpServer> extender_http_;
  int grpc_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace gpuest
