#include "server/admin_service.h"

#include "absl/strings/str_cat.h"
#include "server/raw_messages.h"
#include "server/status_util.h"

namespace gpuest::server {

grpc::ServerUnaryReactor* AdminService::ReloadModels(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* in,
                                                     grpc::ByteBuffer* out) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  v1::ReloadModelsRequest request;
  if (absl::Status decoded = DecodeRequest(*in, request); !decoded.ok()) {
    reactor->Finish(ToGrpcStatus(decoded));
    return reactor;
  }
  const bool queued = pool_.Submit([this, reactor, out] {
    const ReloadOutcome outcome = models_.Reload();
    v1::ReloadModelsResponse response;
    response.set_old_models_version(outcome.old_models_version);
    response.set_new_models_version(outcome.new_models_version);
    response.set_estimators(outcome.estimators);
    if (!outcome.status.ok()) {
      // The request was fine; the files are not: FAILED_PRECONDITION, whatever the
      // loader's own code (its name stays in the message).
      reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
          absl::StrCat("the new models were refused; still serving version ",
                       outcome.old_models_version, ": ", outcome.status.ToString()))));
      return;
    }
    EncodeResponse(response, *out);
    reactor->Finish(ToGrpcStatus(absl::OkStatus()));
  });
  if (!queued) {
    reactor->Finish(ToGrpcStatus(absl::UnavailableError(
        "no reload can be queued now (too many are, or the server is stopping)")));
  }
  return reactor;
}

}  // namespace gpuest::server
