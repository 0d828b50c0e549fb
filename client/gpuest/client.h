// File: gpuest/client.h
//
// The C++ client a scheduler links to ask gpuest-server for estimates and placement
// checks on its critical path. One channel, round-robin over every target, a per-call
// deadline, and retries of UNAVAILABLE (and of CANCELLED, which only a shutting-down
// server causes here), each attempt waiting for a reachable server up to the deadline:
// a call whose deadline outlasts a server restart gets its answer. The deadline and
// retry policy is the one the Python client applies too, read from one file
// (proto/gpuest/v1/client_policy.json, embedded in this library). The calls are pure
// reads.
// Errors come back as absl::Status values; no exception crosses this API.
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

// The shared policy's defaults (client_policy.json: defaultDeadlineSeconds, and the
// retry policy's maxAttempts), which ClientOptions starts from.
absl::Duration PolicyDefaultDeadline();
int PolicyMaxAttempts();

struct ClientOptions {
  // Either host:port addresses (IPv4, [IPv6] or one host name), balanced round-robin,
  // or a single gRPC target URI ("dns:///gpuest.svc:50051") whose resolver yields them.
  std::vector<std::string> targets = {"127.0.0.1:50051"};
  // For calls given no deadline of their own: long enough to ride out a server
  // restart (client_policy.json has the figure and says why). A scheduler on its
  // critical path passes a tighter one per call.
  absl::Duration default_deadline = PolicyDefaultDeadline();
  // Attempts per call, the first included, when the server answers UNAVAILABLE (at
  // most 5, gRPC's limit); waiting for a reachable server uses up none. 1 turns
  // retries off, and calls then fail at once while no server is reachable.
  int max_attempts = PolicyMaxAttempts();
  int max_message_bytes = 16 << 20;
  ClientTlsOptions tls;  // Empty: plaintext.
};

enum class ServingState { kUnknown, kServing, kNotServing };

class Client {
 public:
  // InvalidArgument for an unusable target list. Does not connect: the first call does.
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);
  // Waits for the done callbacks of outstanding EstimateAsync calls (each ends by its
  // deadline at the latest); do not destroy the client from within one.
  ~Client();

  // deadline <= 0 uses options.default_deadline. A deadline that passes while no
  // server is reachable is UNAVAILABLE ("no server was reachable at TARGET before the
  // deadline"), not DEADLINE_EXCEEDED, which means a server was too slow.
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
