// File: admin_service.h
//
// The gpuest.v1.Admin gRPC service (admin.proto): ReloadModels. gpuest-server serves it
// on a separate address, only when --admin-listen names one. The reload runs on a
// thread of its own (the admin pool), never on gRPC's threads nor the estimators'.
#pragma once

#include "gpuest/v1/admin.grpc.pb.h"
#include "server/model_lifecycle.h"
#include "server/worker_pool.h"

namespace gpuest::server {

// Raw, as the other services (server/raw_messages.h): an undecodable request is
// INVALID_ARGUMENT, not UNIMPLEMENTED.
class AdminService final
    : public v1::Admin::WithRawCallbackMethod_ReloadModels<v1::Admin::Service> {
 public:
  // The lifecycle and the pool must outlive the service.
  AdminService(ModelLifecycle& models, WorkerPool& pool) : models_(models), pool_(pool) {}

  grpc::ServerUnaryReactor* ReloadModels(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  ModelLifecycle& models_;
  WorkerPool& pool_;
};

}  // namespace gpuest::server
