#include "server/admission_http.h"

#include <string>
#include <utility>
#include <vector>

#include "integrations/kubernetes/admission_review.h"
#include "integrations/kubernetes/admission_webhook.h"

namespace gpuest::server {

absl::StatusOr<std::unique_ptr<HttpFront>> StartAdmissionHttps(
    const kubernetes::AdmissionWebhook& webhook, const AdmissionWebhookOptions& options,
    CallDispatcher& dispatcher) {
  HttpFrontOptions front;
  front.name = "admission webhook";
  front.flag = "--admission-listen";
  front.listen_address = options.listen_address;
  front.tls_cert_file = options.tls_cert_file;
  front.tls_key_file = options.tls_key_file;
  front.max_body_bytes = static_cast<size_t>(options.max_body_bytes);
  front.body_padding = kubernetes::kAdmissionBodyPadding;
  front.timeout = options.timeout;
  // kube-apiserver logs the body of an HTTP error, and applies the failurePolicy.
  front.error_body = kubernetes::AdmissionErrorText;
  std::vector<HttpRoute> routes = {
      {"/mutate", RpcMethod::kAdmissionMutate,
       [&webhook](std::string body, const common::WorkDeadline& deadline) {
         return webhook.Mutate(body, deadline);
       }}};
  return HttpFront::Start(std::move(front), std::move(routes), &dispatcher);
}

}  // namespace gpuest::server
