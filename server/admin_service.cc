#include "server/admin_service.h"

#include "absl/strings/str_cat.h"
#include "server/status_util.h"

namespace gpuest {

grpc::ServerUnaryReactor* AdminService::ReloadModels(grpc::CallbackServerContext* context,
                                                     const v1::ReloadModelsRequest*,
                                                     v1::ReloadModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool queued = pool_.Submit([this, reactor, response] {
    const ReloadOutcome outcome = models_.Reload();
    response->set_old_models_version(outcome.old_models_version);
    response->set_new_models_version(outcome.new_models_version);
    response->set_estimators(outcome.estimators);
    if (!outcome.status.ok()) {
      // The request was fine; the files are not: FAILED_PRECONDITION, whatever the
      // loader's own code (its name stays in the message).
      reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
          absl::StrCat("the new models were refused; still serving version ",
                       outcome.old_models_version, ": ", outcome.status.ToString()))));
      return;
    }
    reactor->Finish(ToGrpcStatus(absl::OkStatus()));
  });
  if (!queued) {
    reactor->Finish(ToGrpcStatus(absl::UnavailableError(
        "no reload can be queued now (too many are, or the server is stopping)")));
  }
  return reactor;
}

}  // namespace gpuest
