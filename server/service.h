// File: service.h
//
// The gpuest.v1.Estimator gRPC service on the callback API. Each call is handed to
// the worker pool at once, so gRPC's threads never run estimator work.
#pragma once

#include <memory>

#include "estimators/engine.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "gpuest/v1/placement.grpc.pb.h"
#include "placement/placement_engine.h"
#include "server/metrics.h"
#include "server/worker_pool.h"

namespace gpuest {

class EstimatorService final : public v1::Estimator::CallbackService {
 public:
  // The engine, metrics and pool must outlive the service.
  EstimatorService(const Engine& engine, Metrics& metrics, WorkerPool& pool)
      : engine_(engine), metrics_(metrics), pool_(pool) {}

  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* context,
                                     const v1::EstimateRequest* request,
                                     v1::EstimateResponse* response) override;

  grpc::ServerUnaryReactor* ListEstimators(grpc::CallbackServerContext* context,
                                           const v1::ListEstimatorsRequest* request,
                                           v1::ListEstimatorsResponse* response) override;

 private:
  const Engine& engine_;
  Metrics& metrics_;
  WorkerPool& pool_;
};

// gpuest.v1.Placement on the same worker pool and metrics as the Estimator service.
class PlacementService final : public v1::Placement::CallbackService {
 public:
  // The engine, metrics and pool must outlive the service.
  PlacementService(const PlacementEngine& engine, Metrics& metrics, WorkerPool& pool)
      : engine_(engine), metrics_(metrics), pool_(pool) {}

  grpc::ServerUnaryReactor* CheckPlacement(grpc::CallbackServerContext* context,
                                           const v1::CheckPlacementRequest* request,
                                           v1::CheckPlacementResponse* response) override;

  grpc::ServerUnaryReactor* RankGpus(grpc::CallbackServerContext* context,
                                     const v1::RankGpusRequest* request,
                                     v1::RankGpusResponse* response) override;

 private:
  const PlacementEngine& engine_;
  Metrics& metrics_;
  WorkerPool& pool_;
};

}  // namespace gpuest
