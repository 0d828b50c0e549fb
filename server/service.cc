#include "server/service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/raw_messages.h"
#include "server/status_util.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// Why a call taken in should not start now (and why it is shed), or OK. queued: it
// waited for a worker (else it was about to run on the gRPC thread).
absl::Status MayStart(const common::WorkDeadline& deadline, bool queued,
                      ShedReason& reason) {
  const absl::Status status = deadline.Check();
  reason = status.code() == absl::StatusCode::kCancelled ? ShedReason::kCancelledInQueue
                                                         : ShedReason::kDeadlineInQueue;
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), queued ? " while the call waited for a worker"
                                            : " before its work started"));
}

// A unary call's reactor that tells the stream guard when its client cancels it before
// its deadline (RST_STREAM). gRPC calls OnCancel once the cancellation is processed,
// which for a HEADERS + DATA + RST_STREAM burst is often after the method has begun (or
// even answered), so the method's own IsCancelled() cannot see it.
class GuardedReactor final : public grpc::ServerUnaryReactor {
 public:
  GuardedReactor(StreamGuard* guard, grpc::CallbackServerContext* context)
      : guard_(guard), context_(context) {}
  void OnCancel() override {
    if (absl::Now() < absl::FromChrono(context_->deadline())) {
      guard_->CallCancelled(context_->peer());
    }
  }
  void OnDone() override { delete this; }

 private:
  StreamGuard* const guard_;
  grpc::CallbackServerContext* const context_;  // Valid until OnDone.
};

}  // namespace

grpc::ServerUnaryReactor* CallDispatcher::NewReactor(
    grpc::CallbackServerContext* context) {
  if (guard_ == nullptr) return context->DefaultReactor();
  return new GuardedReactor(guard_, context);
}

// Works on a call taken in with its deadline, unless the deadline passed or the
// caller cancelled before it started; then releases its bytes and finishes it.
template <typename Work, typename Finish, typename Release>
void CallDispatcher::Run(RpcMethod method, grpc::CallbackServerContext* context,
                         absl::Time start, absl::Time deadline, bool queued,
                         google::protobuf::Message& response, Work& work,
                         const Finish& finish, const Release& release) {
  const common::WorkDeadline work_deadline(deadline,
                                           [context] { return context->IsCancelled(); });
  absl::Status status = RunTakenIn(method, work_deadline, queued,
                                   [&] { return work(start, work_deadline); });
  // gRPC would refuse to send it, and the call would be counted OK here.
  if (status.ok()) {
    if (const size_t size = response.ByteSizeLong();
        static_cast<int64_t>(size) > max_response_bytes_) {
      response.Clear();
      status = absl::ResourceExhaustedError(
          absl::StrCat("the response (", size,
                       " bytes) is larger than the server's max message size (",
                       max_response_bytes_, " bytes)"));
    }
  }
  release();
  finish(status);
}

absl::Status CallDispatcher::ReserveBytes(RpcMethod method, int64_t bytes) {
  if (absl::Status s = intake_.ReserveBytes(bytes); !s.ok()) {
    metrics_.RequestShed(method, ShedReason::kBytesInFlight);
    return s;
  }
  metrics_.BytesInFlightChanged(bytes);
  return absl::OkStatus();
}

absl::Status CallDispatcher::CheckStartsInTime(RpcMethod method, absl::Time start,
                                               absl::Time deadline) {
  absl::Status s = intake_.CheckStartsInTime(pool_.queued(), start, deadline);
  if (!s.ok()) metrics_.RequestShed(method, ShedReason::kDeadlineUnmeetable);
  return s;
}

absl::Status CallDispatcher::TakeIn(RpcMethod method, int64_t bytes, absl::Time start,
                                    absl::Time deadline) {
  GPUEST_RETURN_IF_ERROR(ReserveBytes(method, bytes));
  if (absl::Status s = CheckStartsInTime(method, start, deadline); !s.ok()) {
    ReleaseBytes(bytes);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<CallDispatcher::HeldBytes> CallDispatcher::HoldRequestBytes(
    RpcMethod method, int64_t bytes) {
  if (absl::Status s = ReserveBytes(method, bytes); !s.ok()) {
    metrics_.RequestStarted(method);
    metrics_.RequestFinished(method, s.code(), 0);
    return s;
  }
  return HeldBytes(this, bytes);
}

void CallDispatcher::ReleaseBytes(int64_t bytes) {
  intake_.ReleaseBytes(bytes);
  metrics_.BytesInFlightChanged(-bytes);
}

absl::Status CallDispatcher::RunTakenIn(RpcMethod method,
                                        const common::WorkDeadline& deadline, bool queued,
                                        const std::function<absl::Status()>& work) {
  ShedReason reason;
  if (absl::Status s = MayStart(deadline, queued, reason); !s.ok()) {
    metrics_.RequestShed(method, reason);
    return s;
  }
  const absl::Time work_start = absl::Now();
  absl::Status status = work();
  intake_.RecordServiceTime(absl::Now() - work_start);
  return status;
}

absl::Status CallDispatcher::QueueFull(RpcMethod method) {
  metrics_.QueuedChanged(-1);
  metrics_.RequestShed(method, ShedReason::kQueueFull);
  return absl::ResourceExhaustedError(
      absl::StrCat("the server is overloaded: its queue holds ", pool_.max_queued(),
                   " calls; retry later"));
}

absl::Status CallDispatcher::RunBlocking(
    RpcMethod method, absl::Time deadline,
    const std::function<absl::Status(const common::WorkDeadline&)>& work) {
  const absl::Time start = absl::Now();
  metrics_.RequestStarted(method);
  auto finish = [&](const absl::Status& status) {
    metrics_.RequestFinished(method, status.code(),
                             absl::ToDoubleSeconds(absl::Now() - start));
    return status;
  };
  if (absl::Status s = CheckStartsInTime(method, start, deadline); !s.ok()) {
    return finish(s);
  }
  // Waits for a place in the share no longer than the call could still be worked on.
  if (!blocking_share_.Acquire(deadline - intake_.recent_service_time())) {
    metrics_.RequestShed(method, ShedReason::kEntryPointShare);
    return finish(absl::ResourceExhaustedError(absl::StrCat(
        "the server is busy with this entry point's calls: ", blocking_share_.limit(),
        " of its workers run them and none freed in time; the rest serve its gRPC API")));
  }
  const common::WorkDeadline work_deadline(deadline);
  absl::Status status;
  auto run = [&](bool queued) {
    status =
        RunTakenIn(method, work_deadline, queued, [&] { return work(work_deadline); });
  };
  if (!pool_.RunHereIfRoom([&] { run(/*queued=*/false); })) {
    absl::Notification done;
    metrics_.QueuedChanged(1);
    const bool queued = pool_.Submit([&] {
      metrics_.QueuedChanged(-1);
      run(/*queued=*/true);
      done.Notify();
    });
    if (!queued) {
      blocking_share_.Release();
      return finish(QueueFull(method));
    }
    done.WaitForNotification();
  }
  blocking_share_.Release();
  return finish(status);
}

// Takes in the call or refuses it at once, runs work with the call's deadline (on the
// pool, or here for a short request while the pool has room), and finishes the call
// with its status, recording metrics.
template <typename Work>
grpc::ServerUnaryReactor* CallDispatcher::Dispatch(
    RpcMethod method, grpc::CallbackServerContext* context,
    const google::protobuf::Message& request, google::protobuf::Message* response,
    Work work) {
  grpc::ServerUnaryReactor* reactor = NewReactor(context);
  const absl::Time start = absl::Now();
  metrics_.RequestStarted(method);
  // What the request holds in memory while the call is taken in.
  const int64_t bytes = static_cast<int64_t>(request.SpaceUsedLong());
  auto finish = [this, reactor, method, start](const absl::Status& status) {
    metrics_.RequestFinished(method, status.code(),
                             absl::ToDoubleSeconds(absl::Now() - start));
    reactor->Finish(ToGrpcStatus(status));
  };
  const absl::Time deadline = absl::FromChrono(context->deadline());
  if (absl::Status s = TakeIn(method, bytes, start, deadline); !s.ok()) {
    finish(s);
    return reactor;
  }
  auto release = [this, bytes] { ReleaseBytes(bytes); };
  // Short requests skip the hand-off to a worker while the workers have room (a
  // thread wake-up, at concurrency 1 about as long as the work itself).
  if (bytes <= inline_max_request_bytes_ && pool_.RunHereIfRoom([&] {
        metrics_.RanOnGrpcThread(method);  // Counted before the caller has its answer.
        Run(method, context, start, deadline, /*queued=*/false, *response, work, finish,
            release);
      })) {
    return reactor;
  }
  metrics_.QueuedChanged(1);
  const bool queued = pool_.Submit([this, context, start, deadline, response, work,
                                    finish, release, method]() mutable {
    metrics_.QueuedChanged(-1);
    Run(method, context, start, deadline, /*queued=*/true, *response, work, finish,
        release);
  });
  if (!queued) {
    release();
    finish(QueueFull(method));
  }
  return reactor;
}

template <typename Request, typename Response, typename Work>
grpc::ServerUnaryReactor* CallDispatcher::DispatchRaw(
    RpcMethod method, grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
    grpc::ByteBuffer* out, Work work) {
  struct Messages {
    Request request;
    Response response;
  };
  // A call answered before any work, counted as started and finished.
  auto refuse = [&](grpc::ServerUnaryReactor* reactor, const absl::Status& status) {
    metrics_.RequestStarted(method);
    metrics_.RequestFinished(method, status.code(), 0);
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  };
  // A stream its client reset before its message was read reaches the method all the
  // same, with no message at all (not an empty one): answered CANCELLED, and counted
  // against its connection here, since its RST_STREAM may be processed only after this
  // call is over (when OnCancel is no longer called; so gRPC's default reactor).
  if (!in->Valid() || context->IsCancelled()) {
    if (guard_ != nullptr) guard_->CallCancelled(context->peer());
    return refuse(
        context->DefaultReactor(),
        absl::CancelledError("the call's stream ended before its request arrived"));
  }
  auto messages = std::make_shared<Messages>();
  if (absl::Status decoded = DecodeRequest(*in, messages->request); !decoded.ok()) {
    return refuse(NewReactor(context), decoded);
  }
  // The work's copy of messages keeps both alive until the call finishes.
  return Dispatch(
      method, context, messages->request, &messages->response,
      [messages, out, work](absl::Time start,
                            const common::WorkDeadline& deadline) -> absl::Status {
        GPUEST_RETURN_IF_ERROR(
            work(messages->request, messages->response, start, deadline));
        EncodeResponse(messages->response, *out);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* EstimatorService::Estimate(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* in,
                                                     grpc::ByteBuffer* out) {
  return dispatcher_.DispatchRaw<v1::EstimateRequest, v1::EstimateResponse>(
      RpcMethod::kEstimate, context, in, out,
      [this](const v1::EstimateRequest& request, v1::EstimateResponse& response,
             absl::Time start, const common::WorkDeadline& deadline) -> absl::Status {
        // The set current now answers the whole call, whatever is reloaded meanwhile.
        const std::shared_ptr<const placement::ModelSet> models = models_.Current();
        absl::StatusOr<v1::EstimateResponse> result =
            models->engine().Estimate(request, deadline);
        if (!result.ok()) {
          spdlog::debug("Estimate: {}", result.status().ToString());
          return result.status();
        }
        response = std::move(*result);
        for (const v1::EstimatorResult& r : response.results()) {
          dispatcher_.metrics().EstimatorObserved(r.estimator_id(),
                                                  r.latency_us() * 1e-6);
        }
        response.set_server_latency_us(absl::ToInt64Microseconds(absl::Now() - start));
        spdlog::debug("Estimate: {} results in {} us", response.results_size(),
                      response.server_latency_us());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* EstimatorService::ListEstimators(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
    grpc::ByteBuffer* out) {
  return dispatcher_.DispatchRaw<v1::ListEstimatorsRequest, v1::ListEstimatorsResponse>(
      RpcMethod::kListEstimators, context, in, out,
      [this](const v1::ListEstimatorsRequest&, v1::ListEstimatorsResponse& response,
             absl::Time, const common::WorkDeadline&) -> absl::Status {
        response = models_.Current()->engine().ListEstimators();
        return absl::OkStatus();
      });
}

// A placement answer: the engine's response, or its status, with the latency set.
template <typename Response, typename Answer>
absl::Status PlacementAnswer(const char* method, absl::Time start, Response& response,
                             Answer answer) {
  absl::StatusOr<Response> result = answer();
  if (!result.ok()) {
    spdlog::debug("{}: {}", method, result.status().ToString());
    return result.status();
  }
  response = std::move(*result);
  response.set_server_latency_us(absl::ToInt64Microseconds(absl::Now() - start));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PlacementService::CheckPlacement(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
    grpc::ByteBuffer* out) {
  return dispatcher_.DispatchRaw<v1::CheckPlacementRequest, v1::CheckPlacementResponse>(
      RpcMethod::kCheckPlacement, context, in, out,
      [this](const v1::CheckPlacementRequest& request,
             v1::CheckPlacementResponse& response, absl::Time start,
             const common::WorkDeadline& deadline) {
        const std::shared_ptr<const placement::ModelSet> models = models_.Current();
        return PlacementAnswer("CheckPlacement", start, response, [&] {
          return models->placement().CheckPlacement(request, deadline);
        });
      });
}

grpc::ServerUnaryReactor* PlacementService::RankGpus(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* in,
                                                     grpc::ByteBuffer* out) {
  return dispatcher_.DispatchRaw<v1::RankGpusRequest, v1::RankGpusResponse>(
      RpcMethod::kRankGpus, context, in, out,
      [this](const v1::RankGpusRequest& request, v1::RankGpusResponse& response,
             absl::Time start, const common::WorkDeadline& deadline) {
        const std::shared_ptr<const placement::ModelSet> models = models_.Current();
        return PlacementAnswer("RankGpus", start, response, [&] {
          return models->placement().RankGpus(request, deadline);
        });
      });
}

}  // namespace gpuest::server
