// File: service.h
//
// The gpuest.v1.Estimator and gpuest.v1.Placement gRPC services on the callback API.
// Each call is taken in or refused at once (intake.h, and the worker pool's queue
// bound), then handed to the worker pool, so gRPC's threads never run estimator work.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "estimators/core/engine.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "gpuest/v1/placement.grpc.pb.h"
#include "placement/model_set.h"
#include "server/intake.h"
#include "server/metrics.h"
#include "server/stream_guard.h"
#include "server/worker_pool.h"

namespace gpuest::server {

// Takes in each call or refuses it at once (intake.h, and the worker pool's queue
// bound), runs its work on the pool with the call's deadline, and finishes the call
// with its status, recording metrics. One for every service of the server, so that
// all of them share the same queue, bounds and counts.
class CallDispatcher {
 public:
  // The metrics, pool and intake must outlive the dispatcher. A response larger
  // than max_response_bytes is answered RESOURCE_EXHAUSTED (gRPC would refuse to send
  // it). A request of at most inline_max_request_bytes (in memory) is worked on by the
  // gRPC thread that received it while the pool has room (WorkerPool::RunHereIfRoom);
  // 0 sends every call to a worker. RunBlocking's calls hold at most blocking_share
  // workers (running or queued) at once: the rest are the gRPC API's.
  // guard (may be null) is told of every call its client cancelled before its
  // deadline, and cuts connections that do so too fast (stream_guard.h).
  CallDispatcher(Metrics& metrics, WorkerPool& pool, Intake& intake,
                 int64_t max_response_bytes, int64_t inline_max_request_bytes,
                 int blocking_share, StreamGuard* guard = nullptr)
      : metrics_(metrics),
        pool_(pool),
        intake_(intake),
        max_response_bytes_(max_response_bytes),
        inline_max_request_bytes_(inline_max_request_bytes),
        blocking_share_(blocking_share),
        guard_(guard) {}

  // work(start, deadline) -> absl::Status fills response; it runs on a worker, or for
  // a short request on the calling gRPC thread.
  template <typename Work>
  grpc::ServerUnaryReactor* Dispatch(RpcMethod method,
                                     grpc::CallbackServerContext* context,
                                     const google::protobuf::Message& request,
                                     google::protobuf::Message* response, Work work);

  // Dispatch for a raw method: decodes the request (INVALID_ARGUMENT, counted, when it
  // does not decode), then work(request, response, start, deadline) as Dispatch's, and
  // encodes the response into out. Request and response live until the call finishes.
  template <typename Request, typename Response, typename Work>
  grpc::ServerUnaryReactor* DispatchRaw(RpcMethod method,
                                        grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* in, grpc::ByteBuffer* out,
                                        Work work);

  // For an entry point that answers on a thread of its own (the scheduler extender's
  // HTTP): the same intake, queue bound, deadline and metrics as a gRPC call, within
  // the blocking share (a call beyond it waits for a place until its deadline). Its
  // request's bytes are held by the caller (HoldRequestBytes). The calling thread runs
  // work itself while the pool has room, else waits for a worker; the status is the
  // call's outcome (RESOURCE_EXHAUSTED or DEADLINE_EXCEEDED when shed).
  absl::Status RunBlocking(
      RpcMethod method, absl::Time deadline,
      const std::function<absl::Status(const common::WorkDeadline&)>& work);

  // Request bytes an entry point holds against the in-flight bound while it reads a
  // body itself and works on it (the extender's HTTP, whose bodies can be tens of MB):
  // taken before the body is read, so that concurrent large bodies are refused before
  // they are in memory; released when the object goes.
  class HeldBytes {
   public:
    HeldBytes(HeldBytes&& other) noexcept
        : dispatcher_(std::exchange(other.dispatcher_, nullptr)), bytes_(other.bytes_) {}
    HeldBytes& operator=(HeldBytes&&) = delete;
    ~HeldBytes() {
      if (dispatcher_ != nullptr) dispatcher_->ReleaseBytes(bytes_);
    }

   private:
    friend class CallDispatcher;
    HeldBytes(CallDispatcher* dispatcher, int64_t bytes)
        : dispatcher_(dispatcher), bytes_(bytes) {}
    CallDispatcher* dispatcher_;
    int64_t bytes_;
  };
  // ResourceExhausted (counted shed, bytes_in_flight, and finished in the request
  // metrics) when the bytes do not fit the bound.
  absl::StatusOr<HeldBytes> HoldRequestBytes(RpcMethod method, int64_t bytes);

  Metrics& metrics() { return metrics_; }

 private:
  // The call's reactor: gRPC's default, or one that reports the client's cancellations
  // to the guard.
  grpc::ServerUnaryReactor* NewReactor(grpc::CallbackServerContext* context);
  template <typename Work, typename Finish, typename Release>
  void Run(RpcMethod method, grpc::CallbackServerContext* context, absl::Time start,
           absl::Time deadline, bool queued, google::protobuf::Message& response,
           Work& work, const Finish& finish, const Release& release);

  // The steps every entry point shares. ReserveBytes: the request's bytes fit the
  // in-flight bound (then held until ReleaseBytes). CheckStartsInTime: the call can
  // start before its deadline. TakeIn: both. A refusal is counted shed. RunTakenIn: the
  // work of a call taken in, unless its deadline passed or its caller went away before it
  // started (counted shed), with its service time recorded. QueueFull: the refusal of a
  // call the workers' queue had no room for.
  absl::Status ReserveBytes(RpcMethod method, int64_t bytes);
  absl::Status CheckStartsInTime(RpcMethod method, absl::Time start, absl::Time deadline);
  absl::Status TakeIn(RpcMethod method, int64_t bytes, absl::Time start,
                      absl::Time deadline);
  void ReleaseBytes(int64_t bytes);
  absl::Status RunTakenIn(RpcMethod method, const common::WorkDeadline& deadline,
                          bool queued, const std::function<absl::Status()>& work);
  absl::Status QueueFull(RpcMethod method);

  Metrics& metrics_;
  WorkerPool& pool_;
  Intake& intake_;
  const int64_t max_response_bytes_;
  const int64_t inline_max_request_bytes_;
  EntryPointShare blocking_share_;
  StreamGuard* const guard_;
};

// The services take their methods raw (server/raw_messages.h): an undecodable request is
// INVALID_ARGUMENT naming its type, where gRPC 1.51 would answer UNIMPLEMENTED.
using EstimatorServiceBase = v1::Estimator::WithRawCallbackMethod_Estimate<
    v1::Estimator::WithRawCallbackMethod_ListEstimators<v1::Estimator::Service>>;
using PlacementServiceBase = v1::Placement::WithRawCallbackMethod_CheckPlacement<
    v1::Placement::WithRawCallbackMethod_RankGpus<v1::Placement::Service>>;

class EstimatorService final : public EstimatorServiceBase {
 public:
  // Each call answers with the set models holds at its start; models and dispatcher
  // must outlive the service.
  EstimatorService(const placement::ModelSetSource& models, CallDispatcher& dispatcher)
      : models_(models), dispatcher_(dispatcher) {}

  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

  grpc::ServerUnaryReactor* ListEstimators(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

 private:
  const placement::ModelSetSource& models_;
  CallDispatcher& dispatcher_;
};

// gpuest.v1.Placement on the same workers, bounds and metrics as the Estimator service.
class PlacementService final : public PlacementServiceBase {
 public:
  // As EstimatorService.
  PlacementService(const placement::ModelSetSource& models, CallDispatcher& dispatcher)
      : models_(models), dispatcher_(dispatcher) {}

  grpc::ServerUnaryReactor* CheckPlacement(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

  grpc::ServerUnaryReactor* RankGpus(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

 private:
  const placement::ModelSetSource& models_;
  CallDispatcher& dispatcher_;
};

}  // namespace gpuest::server
