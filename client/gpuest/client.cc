#include "gpuest/client.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/client_policy.h"
#include "client/credentials.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "gpuest/v1/placement.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpuest {
namespace {

absl::Status FromGrpc(const grpc::Status& status, grpc::Channel& channel,
                      const std::string& target) {
  if (status.ok()) return absl::OkStatus();
  // Calls wait for a server to be reachable: a deadline that passed with no connection
  // means no server was there, which callers tell apart from a slow answer.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      channel.GetState(false) != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(
        absl::StrCat("no server was reachable at ", target,
                     " before the deadline: ", status.error_message()));
  }
  // This API gives callers no way to cancel, so a CANCELLED came from the server's side,
  // typically a call that raced its shutdown: to the caller the server is unavailable.
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::UnavailableError(absl::StrCat(
        "the server cancelled the call (shutting down?): ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

bool IsIpv4Address(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == absl::string_view::npos) return false;
  int dots = 0;
  for (char c : host_port.substr(0, colon)) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

// One channel target for the whole list: the ipv4:/ipv6: resolvers take several
// addresses, which round_robin then balances.
absl::StatusOr<std::string> ChannelTarget(const std::vector<std::string>& targets) {
  if (targets.empty())
    return absl::InvalidArgumentError("targets: at least one is required");
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("targets[", i, "]: is empty"));
    }
  }
  if (targets.size() == 1) return targets.front();
  bool all_v4 = true, all_v6 = true;
  for (const std::string& t : targets) {
    all_v4 = all_v4 && IsIpv4Address(t);
    all_v6 = all_v6 && absl::StartsWith(t, "[") && absl::StrContains(t, "]:");
  }
  if (all_v4) return absl::StrCat("ipv4:", absl::StrJoin(targets, ","));
  if (all_v6) return absl::StrCat("ipv6:", absl::StrJoin(targets, ","));
  return absl::InvalidArgumentError(
      "targets: several targets must all be IPv4 or all [IPv6] host:port addresses; "
      "for host names give one DNS target (dns:///name:port) and let it resolve to many");
}

}  // namespace

absl::Duration PolicyDefaultDeadline() {
  return client::EmbeddedClientPolicy().default_deadline;
}
int PolicyMaxAttempts() { return client::EmbeddedClientPolicy().max_attempts; }

struct Client::Impl {
  ClientOptions options;
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Estimator::Stub> stub;
  std::unique_ptr<v1::Placement::Stub> placement;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  // Async calls whose done callback has not yet returned. The destructor waits for
  // them: gRPC 1.51 aborts (grpc_cq_internal_unref) when a channel is destroyed while
  // its callback queue is still running a completion.
  absl::Mutex mu;
  int async_calls ABSL_GUARDED_BY(mu) = 0;

  void SetDeadline(grpc::ClientContext& context, absl::Duration deadline) const {
    if (deadline <= absl::ZeroDuration()) deadline = options.default_deadline;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }

  // One blocking call under the deadline, its gRPC status mapped by FromGrpc.
  // rpc(context, response) makes the call on a stub.
  template <typename Response, typename Rpc>
  absl::StatusOr<Response> Unary(absl::Duration deadline, Rpc rpc) const {
    grpc::ClientContext context;
    SetDeadline(context, deadline);
    Response response;
    absl::Status status = FromGrpc(rpc(&context, &response), *channel, target);
    if (!status.ok()) return status;
    return response;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() {
  absl::MutexLock lock(&impl_->mu);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl_->mu) {
    return impl_->async_calls == 0;
  };
  impl_->mu.Await(absl::Condition(&none));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (options.default_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_deadline: must be positive");
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("max_attempts: must be at least 1");
  }
  auto target = ChannelTarget(options.targets);
  if (!target.ok()) return target.status();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->target = *target;
  // The policy both clients share (client_policy.h): round robin, wait-for-ready and
  // the retry policy in the service config, and a quick reconnect.
  const client::ClientPolicy& policy = client::EmbeddedClientPolicy();
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(client::ServiceConfigJson(policy, options.max_attempts));
  if (options.max_attempts == 1) args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, policy.initial_reconnect_backoff_ms);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, policy.min_reconnect_backoff_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, policy.max_reconnect_backoff_ms);
  // A retry resends the request from gRPC's copy, which it keeps only up to this size
  // (256 KiB by default: a long trace would not be retried).
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, options.max_message_bytes);
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  auto credentials = client::ChannelCredentialsFor(options.tls);
  if (!credentials.ok()) return credentials.status();
  impl->channel = grpc::CreateCustomChannel(impl->target, *credentials, args);
  if (!impl->channel) {
    return absl::InvalidArgumentError(
        absl::StrCat("targets: cannot use '", impl->target, "'"));
  }
  impl->stub = v1::Estimator::NewStub(impl->channel);
  impl->placement = v1::Placement::NewStub(impl->channel);
  impl->health = grpc::health::v1::Health::NewStub(impl->channel);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<v1::EstimateResponse> Client::Estimate(const v1::EstimateRequest& request,
                                                      absl::Duration deadline) const {
  return impl_->Unary<v1::EstimateResponse>(
      deadline, [&](grpc::ClientContext* context, v1::EstimateResponse* response) {
        return impl_->stub->Estimate(context, request, response);
      });
}

void Client::EstimateAsync(const v1::EstimateRequest& request,
                           std::function<void(absl::StatusOr<v1::EstimateResponse>)> done,
                           absl::Duration deadline) const {
  // The call owns a copy of the request: the caller's may be gone before gRPC is done.
  struct Call {
    grpc::ClientContext context;
    v1::EstimateRequest request;
    v1::EstimateResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request = request;
  impl_->SetDeadline(call->context, deadline);
  {
    absl::MutexLock lock(&impl_->mu);
    ++impl_->async_calls;
  }
  impl_->stub->async()->Estimate(
      &call->context, &call->request, &call->response,
      [call, impl = impl_.get(), done = std::move(done)](grpc::Status status) mutable {
        if (status.ok()) {
          done(std::move(call->response));
        } else {
          done(FromGrpc(status, *impl->channel, impl->target));
        }
        call.reset();  // The context goes while the channel surely lives.
        absl::MutexLock lock(&impl->mu);
        --impl->async_calls;
      });
}

absl::StatusOr<v1::ListEstimatorsResponse> Client::ListEstimators(
    absl::Duration deadline) const {
  return impl_->Unary<v1::ListEstimatorsResponse>(
      deadline, [&](grpc::ClientContext* context, v1::ListEstimatorsResponse* response) {
        return impl_->stub->ListEstimators(context, v1::ListEstimatorsRequest(),
                                           response);
      });
}

absl::StatusOr<v1::CheckPlacementResponse> Client::CheckPlacement(
    const v1::CheckPlacementRequest& request, absl::Duration deadline) const {
  return impl_->Unary<v1::CheckPlacementResponse>(
      deadline, [&](grpc::ClientContext* context, v1::CheckPlacementResponse* response) {
        return impl_->placement->CheckPlacement(context, request, response);
      });
}

absl::StatusOr<v1::RankGpusResponse> Client::RankGpus(const v1::RankGpusRequest& request,
                                                      absl::Duration deadline) const {
  return impl_->Unary<v1::RankGpusResponse>(
      deadline, [&](grpc::ClientContext* context, v1::RankGpusResponse* response) {
        return impl_->placement->RankGpus(context, request, response);
      });
}

absl::StatusOr<ServingState> Client::Health(const std::string& service,
                                            absl::Duration deadline) const {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response =
      impl_->Unary<grpc::health::v1::HealthCheckResponse>(
          deadline,
          [&](grpc::ClientContext* context, grpc::health::v1::HealthCheckResponse* out) {
            return impl_->health->Check(context, request, out);
          });
  if (!response.ok()) return response.status();
  switch (response->status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return ServingState::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return ServingState::kNotServing;
    default:
      return ServingState::kUnknown;
  }
}

const std::string& Client::channel_target() const { return impl_->target; }

}  // namespace gpuest
