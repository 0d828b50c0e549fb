// File: gpuest/client.h
//
// The C++ client a scheduler links to ask gpuest-server for estimates and placement
// checks on its critical path. One channel, round-robin over every target, a per-call
// deadline (a few milliseconds by default) and retries of UNAVAILABLE (and of CANCELLED,
// which only a shutting-down server causes here) through the service config; the calls
// are pure reads. Errors come back as absl::Status values; no exception crosses this API.
//
//   gpuest::ClientOptions options;
//   options.targets = {"127.0.0.1:50051"};
//   auto client = gpuest::Client::Create(options);
//   if (!client.ok()) ...
//   absl::StatusOr<gpuest::v1::EstimateResponse> r = (*client)->Estimate(request);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpuest/tls.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/placement.pb.h"

namespace gpuest {

struct ClientOptions {
  // Either host:port addresses (IPv4, [IPv6] or one host name), balanced round-robin,
  // or a single gRPC target URI ("dns:///gpuest.svc:50051") whose resolver yields them.
  std::vector<std::string> targets = {"127.0.0.1:50051"};
  absl::Duration default_deadline = absl::Milliseconds(5);
  // Attempts per call, the first included, when the server answers UNAVAILABLE.
  // 1 turns retries off.
  int max_attempts = 3;
  int max_message_bytes = 16 << 20;
  ClientTlsOptions tls;  // Empty: plaintext.
};

enum class ServingState { kUnknown, kServing, kNotServing };

class Client {
 public:
  // InvalidArgument for an unusable target list. Does not connect: the first call does.
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);
  ~Client();

  // deadline <= 0 uses options.default_deadline.
  absl::StatusOr<v1::EstimateResponse> Estimate(
      const v1::EstimateRequest& request,
      absl::Duration deadline = absl::ZeroDuration()) const;

  // Non-blocking Estimate: done runs on a gRPC thread with the outcome.
  void EstimateAsync(const v1::EstimateRequest& request,
                     std::function<void(absl::StatusOr<v1::EstimateResponse>)> done,
                     absl::Duration deadline = absl::ZeroDuration()) const;

  absl::StatusOr<v1::ListEstimatorsResponse> ListEstimators(
      absl::Duration deadline = absl::ZeroDuration()) const;

  // gpuest.v1.Placement: does a job fit a GPU beside the jobs already on it, and how
  // much will they slow each other (placement.proto). Description-given jobs are
  // estimated on the server, so give these calls a deadline of tens of milliseconds.
  absl::StatusOr<v1::CheckPlacementResponse> CheckPlacement(
      const v1::CheckPlacementRequest& request,
      absl::Duration deadline = absl::ZeroDuration()) const;
  // One job against every GPU model of the server's catalog, MIG profiles included.
  absl::StatusOr<v1::RankGpusResponse> RankGpus(
      const v1::RankGpusRequest& request,
      absl::Duration deadline = absl::ZeroDuration()) const;

  // grpc.health.v1 Check, for the whole server or for service "gpuest.v1.Estimator".
  absl::StatusOr<ServingState> Health(
      const std::string& service = "",
      absl::Duration deadline = absl::ZeroDuration()) const;

  // The target string the channel was made with.
  const std::string& channel_target() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuest
