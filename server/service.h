// File: service.h
//
// The gpuest.v1.Estimator gRPC service on the callback API. Each call is admitted or
// refused at once (admission.h, and the worker pool's queue bound), then handed to the
// worker pool, so gRPC's threads never run estimator work.
#pragma once

#include <memory>

#include "estimators/engine.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "server/admission.h"
#include "server/metrics.h"
#include "server/worker_pool.h"

namespace gpuest {

class EstimatorService final : public v1::Estimator::CallbackService {
 public:
  // The engine, metrics, pool and admission must outlive the service. A response
  // larger than max_response_bytes is answered RESOURCE_EXHAUSTED (gRPC would refuse
  // to send it).
  EstimatorService(const Engine& engine, Metrics& metrics, WorkerPool& pool,
                   Admission& admission, int64_t max_response_bytes)
      : engine_(engine),
        metrics_(metrics),
        pool_(pool),
        admission_(admission),
        max_response_bytes_(max_response_bytes) {}

  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* context,
                                     const v1::EstimateRequest* request,
                                     v1::EstimateResponse* response) override;

  grpc::ServerUnaryReactor* ListEstimators(grpc::CallbackServerContext* context,
                                           const v1::ListEstimatorsRequest* request,
                                           v1::ListEstimatorsResponse* response) override;

 private:
  template <typename Work>
  grpc::ServerUnaryReactor* Dispatch(RpcMethod method,
                                     grpc::CallbackServerContext* context,
                                     const google::protobuf::Message& request,
                                     google::protobuf::Message* response, Work work);

  const Engine& engine_;
  Metrics& metrics_;
  WorkerPool& pool_;
  Admission& admission_;
  const int64_t max_response_bytes_;
};

}  // namespace gpuest
