#include "server/extender_http.h"

#include <utility>
#include <vector>

#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/kube_extender.h"
#include "nlohmann/json.hpp"

namespace gpuest::server {

absl::StatusOr<std::unique_ptr<HttpFront>> StartExtenderHttp(
    kubernetes::KubeExtender& extender, const std::string& listen_address,
    const TlsOptions& tls, size_t max_body_bytes, absl::Duration timeout,
    CallDispatcher& dispatcher) {
  HttpFrontOptions options;
  options.name = "scheduler extender";
  options.flag = "--extender-listen";
  options.listen_address = listen_address;
  options.tls_cert_file = tls.cert_file;
  options.tls_key_file = tls.key_file;
  options.tls_client_ca_file = tls.client_ca_file;
  options.max_body_bytes = max_body_bytes;
  options.body_padding = kubernetes::kExtenderBodyPadding;
  options.timeout = timeout;
  // Reading, parsing and echoing tens of MB of Node objects is CPU work that must not
  // slow the scheduler's other calls.
  options.lower_priority = true;
  // An ExtenderFilterResult-shaped Error, which kube-scheduler logs.
  options.error_body = [](const std::string& why) {
    return kubernetes::ReplyText(nlohmann::json{{"Error", "gpuest extender: " + why}});
  };
  std::vector<HttpRoute> routes = {
      {"/filter", RpcMethod::kExtenderFilter,
       [&extender](std::string body, const common::WorkDeadline& deadline) {
         return extender.Filter(std::move(body), deadline);
       }},
      {"/prioritize", RpcMethod::kExtenderPrioritize,
       [&extender](std::string body, const common::WorkDeadline& deadline) {
         return extender.Prioritize(std::move(body), deadline);
       }}};
  return HttpFront::Start(std::move(options), std::move(routes), &dispatcher);
}

}  // namespace gpuest::server
