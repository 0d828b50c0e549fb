#include "server/extender_http.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "server/kube_extender.h"
#include "spdlog/spdlog.h"

namespace gpuest {

absl::StatusOr<std::unique_ptr<ExtenderHttpServer>> ExtenderHttpServer::Start(
    KubeExtender& extender, const std::string& listen_address, size_t max_body_bytes) {
  const size_t colon = listen_address.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(listen_address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--extender_listen: not host:port: ", listen_address));
  }
  std::string host = listen_address.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<ExtenderHttpServer> s(new ExtenderHttpServer());
  s->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *s->http_;
  http.set_payload_max_length(max_body_bytes);
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  auto serve = [](httplib::Response& res, const ExtenderReply& reply) {
    res.status = reply.status;
    res.set_content(reply.body, "application/json");
  };
  http.Post("/filter",
            [&extender, serve](const httplib::Request& req, httplib::Response& res) {
              serve(res, extender.Filter(req.body));
            });
  http.Post("/prioritize",
            [&extender, serve](const httplib::Request& req, httplib::Response& res) {
              serve(res, extender.Prioritize(req.body));
            });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  if (port == 0) {
    s->port_ = http.bind_to_any_port(host);
  } else {
    s->port_ = http.bind_to_port(host, port) ? port : -1;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for the scheduler extender on ", listen_address));
  }
  s->thread_ = std::thread([&http] { http.listen_after_bind(); });
  spdlog::info("scheduler extender on port {} (POST /filter, /prioritize)", s->port_);
  return s;
}

ExtenderHttpServer::~ExtenderHttpServer() { Stop(); }

void ExtenderHttpServer::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gpuest
