// File: metrics.h
//
// The one module that knows Prometheus: it owns the registry and every metric family,
// and writes them as Prometheus' text (served as GET /metrics by the server's HTTP
// front, server/http_front.h). Every metric is declared once, in the table in
// metrics.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/intake.h"

namespace gpuest::server {

enum class RpcMethod {
  kEstimate = 0,
  kListEstimators = 1,
  kCheckPlacement = 2,
  kRankGpus = 3,
  // The Kubernetes scheduler extender's verbs (HTTP), counted beside the gRPC methods.
  kExtenderFilter = 4,
  kExtenderPrioritize = 5,
  // The admission webhook's POST /mutate (HTTPS).
  kAdmissionMutate = 6,
};
inline constexpr int kRpcMethodCount = 7;

// An estimator of the served set and the device it computes on ("cpu", "cuda").
struct ServedEstimator {
  std::string id;
  std::string device;
};

class Metrics {
 public:
  static std::unique_ptr<Metrics> Create();
  ~Metrics();

  // Every family now, in Prometheus' text exposition format (version 0.0.4).
  std::string Text() const;

  void SetBuildInfo(const std::string& version, const std::string& grpc_version);
  // The models served from now on: their version in gpuest_models_info (the previous
  // version's series goes), each estimator's device in gpuest_estimator_info (likewise
  // replaced) and their estimators' latency series. At start and after each reload.
  void SetModels(const std::string& models_version,
                 const std::vector<ServedEstimator>& estimators);
  // One model reload (SIGHUP or the Admin RPC) and whether the new set was taken.
  void ModelsReloaded(bool succeeded);

  void RequestStarted(RpcMethod method);
  void RequestFinished(RpcMethod method, absl::StatusCode code, double seconds);
  void EstimatorObserved(const std::string& estimator_id, double seconds);
  // A call refused without being worked on; it is also counted by RequestFinished.
  void RequestShed(RpcMethod method, ShedReason reason);
  // A gRPC connection shut for resetting its streams too fast (server/stream_guard.h).
  void ConnectionCut();
  // A call taken in worked on by the gRPC thread that received it, not a worker.
  void RanOnGrpcThread(RpcMethod method);
  // Request bytes held by calls taken in, and calls waiting for a worker.
  void BytesInFlightChanged(int64_t delta);
  void QueuedChanged(int delta);

 private:
  struct State;
  explicit Metrics(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gpuest::server
