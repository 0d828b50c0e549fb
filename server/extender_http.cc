#include "server/extender_http.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/kube_extender.h"
#include "server/service.h"
#include "spdlog/spdlog.h"

namespace gpuest {
namespace {

constexpr size_t kExtenderWorkers = 64;
// The extender's threads yield the CPU to the gRPC API's: reading, parsing and echoing
// tens of MB of Node objects is CPU work that must not slow the scheduler's other
// calls (nice 10: a tenth of the weight of a thread at 0 under Linux's CFS).
constexpr int kExtenderNice = 10;

// Once per thread; Linux applies a nice value to the calling thread alone.
void LowerThisThreadsPriority() {
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kExtenderNice) !=
      0) {
    spdlog::debug("extender: cannot lower a thread's priority: {}", std::strerror(errno));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExtenderHttpServer>> ExtenderHttpServer::Start(
    KubeExtender& extender, const std::string& listen_address, size_t max_body_bytes,
    absl::Duration timeout, CallDispatcher& dispatcher) {
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
  // Before the body is read (cpp-httplib routes pre-routing handlers first): a body
  // too large, chunked (httplib applies no length limit to chunks) or sent as a form
  // is refused with an ExtenderFilterResult-shaped Error that kube-scheduler logs.
  http.set_pre_routing_handler([max_body_bytes](const httplib::Request& req,
                                                httplib::Response& res) {
    // A refusal leaves the body unread, so the connection is closed after it: kept
    // alive, the sender would block writing a body nobody reads.
    auto refuse = [&res](int status, const std::string& why) {
      res.status = status;
      res.set_header("Connection", "close");
      res.set_content(ReplyText(nlohmann::json{{"Error", "gpuest extender: " + why}}),
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    };
    // The routes, before anything of the body is read: any other path or verb is
    // answered at once and its body never buffered.
    const bool verb = req.path == "/filter" || req.path == "/prioritize";
    if (req.method == "GET" && req.path == "/healthz") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (!verb)
      return refuse(404,
                    "no such path; the extender serves POST /filter, "
                    "POST /prioritize and GET /healthz");
    if (req.method != "POST") return refuse(405, absl::StrCat(req.path, " takes POST"));
    // The limits count the bytes the handler reads: an encoded body would inflate past
    // them (1 MB of gzip is 1 GiB), and kube-scheduler sends none.
    if (const std::string encoding = req.get_header_value("Content-Encoding");
        !encoding.empty() && absl::AsciiStrToLower(encoding) != "identity") {
      return refuse(415, absl::StrCat("Content-Encoding '", encoding.substr(0, 64),
                                      "' is not accepted; send the body as it is"));
    }
    if (absl::StrContains(
            absl::AsciiStrToLower(req.get_header_value("Transfer-Encoding")),
            "chunked")) {
      return refuse(411, "a chunked body is not accepted; send it with a Content-Length");
    }
    uint64_t length = 0;
    if (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) {
      return refuse(411, "the request has no Content-Length");
    }
    if (length > max_body_bytes) {
      return refuse(413,
                    absl::StrCat("a body of ", length, " bytes exceeds the limit of ",
                                 max_body_bytes, " bytes"));
    }
    // ExtenderArgs are JSON, as kube-scheduler sends them ("application/json",
    // parameters allowed); anything else, or no type, is refused unread.
    const std::string type = absl::AsciiStrToLower(req.get_header_value("Content-Type"));
    if (type != "application/json" && !absl::StartsWith(type, "application/json;")) {
      return refuse(415, absl::StrCat("the body is sent as '", type.substr(0, 64),
                                      "'; ExtenderArgs are JSON (application/json)"));
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // cpp-httplib serves each connection on a worker until it closes or goes idle past
  // its timeout: with its default 8 workers and 5 s, 200 idle connections stopped the
  // extender for about two minutes. Many workers and a short wait keep an idle crowd
  // from stopping it (a mitigation: an event-driven server would remove the bound).
  http.new_task_queue = [] { return new httplib::ThreadPool(kExtenderWorkers); };
  http.set_keep_alive_timeout(1);
  http.set_read_timeout(1, 0);
  http.set_write_timeout(5, 0);
  // One verb's call, through the dispatcher with its deadline from its arrival. Shed
  // (overloaded, or it could not start in time) it answers 503 with the reason.
  // The body is read here, by the handler, not by cpp-httplib before it: its bytes are
  // first held against the server's in-flight bound (shared with the gRPC API), so that
  // concurrent large bodies are refused before they take memory, and it is read
  // straight into a buffer with the parser's padding.
  auto serve = [&extender, &dispatcher, timeout](
                   RpcMethod method, const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& read) {
    const absl::Time arrived = absl::Now();
    LowerThisThreadsPriority();
    auto unavailable = [&res](const absl::Status& status) {
      res.status = 503;
      res.set_content(ReplyText(nlohmann::json{
                          {"Error", absl::StrCat("gpuest: ", status.message())}}),
                      "application/json");
    };
    uint64_t length = 0;  // The pre-routing handler checked it is there and in bounds.
    (void)absl::SimpleAtoi(req.get_header_value("Content-Length"), &length);
    absl::StatusOr<CallDispatcher::HeldBytes> held =
        dispatcher.HoldRequestBytes(method, static_cast<int64_t>(length));
    if (!held.ok()) {
      // Read and dropped, a few KB at a time, so that the client gets the answer
      // instead of a reset connection while it still sends.
      (void)read([](const char*, size_t) { return true; });
      return unavailable(held.status());
    }
    std::string body;
    body.reserve(length + kExtenderBodyPadding);
    if (!read([&body](const char* data, size_t size) {
          body.append(data, size);
          return true;
        })) {
      return;  // The client went away mid-body: nothing to answer.
    }
    ExtenderReply reply;
    const absl::Status status = dispatcher.RunBlocking(
        method, arrived + timeout, [&](const WorkDeadline& deadline) {
          reply = method == RpcMethod::kExtenderFilter
                      ? extender.Filter(std::move(body), deadline)
                      : extender.Prioritize(std::move(body), deadline);
          return absl::Status(reply.code, "");
        });
    if (!status.ok() && reply.body.empty()) return unavailable(status);
    res.status = reply.status;
    res.set_content(reply.body, "application/json");
  };
  http.Post("/filter", [serve](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader& read) {
    serve(RpcMethod::kExtenderFilter, req, res, read);
  });
  http.Post("/prioritize", [serve](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& read) {
    serve(RpcMethod::kExtenderPrioritize, req, res, read);
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
