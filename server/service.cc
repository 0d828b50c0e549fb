#include "server/service.h"

#include <chrono>

#include "absl/time/clock.h"
#include "server/status_util.h"
#include "spdlog/spdlog.h"

namespace gpuest {
namespace {

// Why a call should not start now, or OK.
absl::Status Admissible(grpc::CallbackServerContext* context) {
  if (context->IsCancelled())
    return absl::CancelledError("the client cancelled the call");
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the deadline passed before the call was handled");
  }
  return absl::OkStatus();
}

// Runs work on the pool and finishes the call with its status, recording metrics.
template <typename Work>
grpc::ServerUnaryReactor* Dispatch(RpcMethod method, grpc::CallbackServerContext* context,
                                   Metrics& metrics, WorkerPool& pool, Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  metrics.RequestStarted(method);
  auto finish = [reactor, method, start, &metrics](const absl::Status& status) {
    metrics.RequestFinished(method, status.code(),
                            absl::ToDoubleSeconds(absl::Now() - start));
    reactor->Finish(ToGrpcStatus(status));
  };
  const bool queued = pool.Submit([context, start, work, finish]() mutable {
    absl::Status status = Admissible(context);
    if (status.ok()) status = work(start);
    finish(status);
  });
  if (!queued)
    finish(absl::ResourceExhaustedError("the server is overloaded; retry later"));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* EstimatorService::Estimate(grpc::CallbackServerContext* context,
                                                     const v1::EstimateRequest* request,
                                                     v1::EstimateResponse* response) {
  return Dispatch(
      RpcMethod::kEstimate, context, metrics_, pool_,
      [this, request, response](absl::Time start) -> absl::Status {
        absl::StatusOr<v1::EstimateResponse> result = engine_.Estimate(*request);
        if (!result.ok()) {
          spdlog::debug("Estimate: {}", result.status().ToString());
          return result.status();
        }
        *response = std::move(*result);
        for (const v1::EstimatorResult& r : response->results()) {
          metrics_.EstimatorObserved(r.estimator_id(), r.latency_us() * 1e-6);
        }
        response->set_server_latency_us(absl::ToInt64Microseconds(absl::Now() - start));
        spdlog::debug("Estimate: {} results in {} us", response->results_size(),
                      response->server_latency_us());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* EstimatorService::ListEstimators(
    grpc::CallbackServerContext* context, const v1::ListEstimatorsRequest*,
    v1::ListEstimatorsResponse* response) {
  return Dispatch(RpcMethod::kListEstimators, context, metrics_, pool_,
                  [this, response](absl::Time) -> absl::Status {
                    *response = engine_.ListEstimators();
                    return absl::OkStatus();
                  });
}

// A placement answer: the engine's response, or its status, with the latency set.
template <typename Response, typename Answer>
absl::Status PlacementAnswer(const char* method, absl::Time start, Response* response,
                             Answer answer) {
  absl::StatusOr<Response> result = answer();
  if (!result.ok()) {
    spdlog::debug("{}: {}", method, result.status().ToString());
    return result.status();
  }
  *response = std::move(*result);
  response->set_server_latency_us(absl::ToInt64Microseconds(absl::Now() - start));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PlacementService::CheckPlacement(
    grpc::CallbackServerContext* context, const v1::CheckPlacementRequest* request,
    v1::CheckPlacementResponse* response) {
  return Dispatch(RpcMethod::kCheckPlacement, context, metrics_, pool_,
                  [this, request, response](absl::Time start) {
                    return PlacementAnswer("CheckPlacement", start, response, [&] {
                      return engine_.CheckPlacement(*request);
                    });
                  });
}

grpc::ServerUnaryReactor* PlacementService::RankGpus(grpc::CallbackServerContext* context,
                                                     const v1::RankGpusRequest* request,
                                                     v1::RankGpusResponse* response) {
  return Dispatch(RpcMethod::kRankGpus, context, metrics_, pool_,
                  [this, request, response](absl::Time start) {
                    return PlacementAnswer("RankGpus", start, response,
                                           [&] { return engine_.RankGpus(*request); });
                  });
}

}  // namespace gpuest
