// File: extender_http.h
//
// Serves a KubeExtender on the server's HTTP front (http_front.h): POST /filter and
// /prioritize (kube-scheduler appends the verb to urlPrefix), GET /healthz. Each call
// goes through the server's CallDispatcher (intake, the workers' share, deadline,
// metrics), as a gRPC call does, and does bounded work: one estimate of the pod's job
// per GPU model met, then arithmetic per GPU, well inside kube-scheduler's httpTimeout
// (default 30 s; deploy/kubernetes/scheduler-extender.yaml sets 5 s).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/http_front.h"
#include "server/options.h"

namespace gpuest::kubernetes {
class KubeExtender;
}  // namespace gpuest::kubernetes

namespace gpuest::server {

// Binds listen_address (host:port, port 0 picks one); extender and dispatcher must
// outlive the front. A call's work stops timeout after its headers arrived. tls: HTTPS
// with its certificate and key when given, and with client_ca_file kube-scheduler must
// present a certificate that CA signed (its extender tlsConfig's certFile and keyFile).
absl::StatusOr<std::unique_ptr<HttpFront>> StartExtenderHttp(
    kubernetes::KubeExtender& extender, const std::string& listen_address,
    const TlsOptions& tls, size_t max_body_bytes, absl::Duration timeout,
    CallDispatcher& dispatcher);

}  // namespace gpuest::server
