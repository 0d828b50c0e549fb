// File: admission_http.h
//
// Serves the mutating admission webhook (integrations/kubernetes/admission_webhook.h)
// on the server's HTTP front over HTTPS, as kube-apiserver calls webhooks: POST
// /mutate, GET /healthz. Each call goes through the server's CallDispatcher (intake,
// the workers' share, deadline, the request metrics as "admission/mutate"), as a gRPC
// call does.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/http_front.h"
#include "server/options.h"

namespace gpuest::server {

// Binds options.listen_address with options' certificate; webhook and dispatcher must
// outlive the front.
absl::StatusOr<std::unique_ptr<HttpFront>> StartAdmissionHttps(
    const kubernetes::AdmissionWebhook& webhook, const AdmissionWebhookOptions& options,
    CallDispatcher& dispatcher);

}  // namespace gpuest::server
