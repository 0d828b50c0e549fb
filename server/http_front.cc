#include "server/http_front.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "server/reloading_certificate.h"
#include "server/service.h"
#include "server/worker_pool.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// The work threads of a low-priority front (nice 10: a tenth of the weight of a thread
// at 0 under Linux's CFS). Once per thread; Linux applies it to the calling thread.
void LowerThisThreadsPriority() {
  thread_local bool lowered = false;
  if (lowered) return;
  lowered = true;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10) != 0) {
    spdlog::debug("http: cannot lower a thread's priority: {}", std::strerror(errno));
  }
}

// One TCP connection, for the time bound: its socket and when its current request
// began (its first byte, or the end of the request before it).
struct Connection {
  int fd = -1;
  absl::Time request_began;
  bool headers_in = false;  // Its request's line and headers have all arrived.
  bool at_work = false;     // Its call waits for a worker: bounded by its deadline.
  bool unwritten = false;   // Its call went to work and its answer is not yet written.
  bool cut = false;         // Shut for taking too long; closing.
};

// One request, from its headers to its answer (MHD's per-request closure).
struct Call {
  const HttpRoute* route = nullptr;
  absl::Time arrived;
  uint64_t length = 0;
  std::optional<CallDispatcher::HeldBytes> held;
  std::string body;
  bool discard_body = false;  // Refused after its headers; its body is read and dropped.
  bool at_work = false;
  std::atomic<bool> answered{false};  // reply is final (written before the resume).
  bool queued = false;                // reply was handed to MHD.
  bool close = false;                 // Close the connection after the reply.
  int status = 200;
  std::string content_type = "application/json";
  std::string reply;  // What MHD sends: it points into this string until the call ends.
};

using ResolvedAddress = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

// host:port or [v6]:port, resolved for a listening socket (an empty host: every
// address); InvalidArgument naming flag.
absl::StatusOr<ResolvedAddress> ResolveListenAddress(const std::string& flag,
                                                     const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": not host:port: ", address));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                                &hints, &found);
      e != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot resolve '", host, "': ", gai_strerror(e)));
  }
  return ResolvedAddress(found, freeaddrinfo);
}

// A request header's value; empty when it has none.
std::string HeaderOf(MHD_Connection* connection, const char* name) {
  const char* value = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
  return std::string(value == nullptr ? "" : value);
}

std::string ServedPaths(const std::vector<HttpRoute>& routes,
                        const std::vector<HttpPage>& pages) {
  std::vector<std::string> served;
  for (const HttpRoute& route : routes) served.push_back("POST " + route.path);
  for (const HttpPage& page : pages) served.push_back("GET " + page.path);
  served.push_back("GET /healthz");
  return absl::StrJoin(served, ", ");
}

}  // namespace

class HttpFront::Impl {
 public:
  Impl(HttpFrontOptions options, std::vector<HttpRoute> routes,
       CallDispatcher* dispatcher)
      : options_(std::move(options)),
        routes_(std::move(routes)),
        dispatcher_(dispatcher),
        request_time_(options_.timeout + kTransferAllowance),
        served_(ServedPaths(routes_, options_.pages)),
        // A front of pages only (/metrics) needs no work threads.
        workers_(routes_.empty()
                     ? nullptr
                     : std::make_unique<WorkerPool>(kWorkThreads, kMaxQueuedCalls)) {}

  absl::StatusOr<int> Start();
  void Stop();

 private:
  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* version,
                           const char* upload_data, size_t* upload_data_size,
                           void** request_closure);
  static void Completed(void* cls, MHD_Connection* connection, void** request_closure,
                        MHD_RequestTerminationCode why);
  static void Notify(void* cls, MHD_Connection* connection, void** socket_context,
                     MHD_ConnectionNotificationCode what);
  static void Log(void* cls, const char* format, va_list args);

  // Start's steps: the certificate and the client CA, when given (HTTPS); the
  // daemon's options (bounds, callbacks, TLS) for address.
  absl::Status LoadTls(bool tls);
  std::vector<MHD_OptionItem> DaemonOptions(sockaddr* address, bool tls);

  // The request's headers: a refusal, /healthz, or a route's call readied for its body.
  void Begin(MHD_Connection* connection, const std::string& path,
             const std::string& method, Call& call);
  // Begin's steps. A GET page (/healthz or one of the options' pages) answered: true.
  bool AnswerPage(const std::string& path, Call& call);
  // Refused (true): a client without a verified certificate, a path not served, a
  // verb other than POST.
  bool RefuseUnserved(MHD_Connection* connection, const std::string& path,
                      const std::string& method, Call& call);
  // Refused (true): a body encoded, chunked, without a Content-Length, over
  // max_body_bytes, or not JSON.
  bool RefuseBodyHeaders(MHD_Connection* connection, Call& call);
  // The body's bytes held against the in-flight bound (refused 503 beyond it), and
  // room for it reserved.
  void HoldBody(Call& call);
  // The refusal's body; the connection closes after it unless the body is read.
  void Refuse(Call& call, int status, const std::string& why, bool close = true);
  // Hands the call to a work thread; the connection waits suspended until its answer.
  void StartWork(MHD_Connection* connection, Call& call);
  MHD_Result QueueReply(MHD_Connection* connection, Call& call);
  Connection* ConnectionOf(MHD_Connection* connection);
  // The client presented a certificate that verifies against the client CA.
  static bool ClientVerified(MHD_Connection* connection);
  void Reap();

  const HttpFrontOptions options_;
  const std::vector<HttpRoute> routes_;
  CallDispatcher* const dispatcher_;  // Null when there are no routes.
  const absl::Duration request_time_;
  // What it serves, in its log line and its 404s: "POST /mutate, GET /healthz".
  const std::string served_;
  const std::unique_ptr<WorkerPool> workers_;          // Null without routes.
  std::unique_ptr<ReloadingCertificate> certificate_;  // Null without TLS.
  std::string client_ca_pem_;  // Empty: no client certificate asked for.
  MHD_Daemon* daemon_ = nullptr;
  std::thread reaper_;
  absl::Mutex mu_;
  absl::flat_hash_set<Connection*> connections_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // No connection holds a call that went to work and whose answer is not yet written
  // (Completed: MHD sent the reply or closed the connection).
  bool EveryAnswerWritten() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Connection* c : connections_) {
      if (c->unwritten) return false;
    }
    return true;
  }
};

// How long Stop waits for answers already made to be written before it closes their
// connections: the writing of a reply, not the work, which has finished by then.
constexpr absl::Duration kStopWritesReplies = absl::Seconds(5);

HttpFront::HttpFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpFront::~HttpFront() { Stop(); }
void HttpFront::Stop() {
  if (impl_) impl_->Stop();
}

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(HttpFrontOptions options,
                                                            std::vector<HttpRoute> routes,
                                                            CallDispatcher* dispatcher) {
  if (!routes.empty() && dispatcher == nullptr) {
    return absl::InternalError("HttpFront: routes need a dispatcher");
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(routes), dispatcher);
  absl::StatusOr<int> port = impl->Start();
  if (!port.ok()) return port.status();
  std::unique_ptr<HttpFront> front(new HttpFront(std::move(impl)));
  front->port_ = *port;
  return front;
}

absl::StatusOr<int> HttpFront::Impl::Start() {
  GPUEST_ASSIGN_OR_RETURN(const ResolvedAddress resolved,
                          ResolveListenAddress(options_.flag, options_.listen_address));
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                   MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (resolved->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  const bool tls = !options_.tls_cert_file.empty() || !options_.tls_key_file.empty();
  GPUEST_RETURN_IF_ERROR(LoadTls(tls));
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = DaemonOptions(resolved->ai_addr, tls);
  daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::Access, this,
                             MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve the ", options_.name, " on ",
                                               options_.listen_address,
                                               tls ? " (HTTPS)" : ""));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  reaper_ = std::thread([this] { Reap(); });
  spdlog::info("{} on port {} ({}: {})", options_.name, info->port,
               tls ? "HTTPS" : "HTTP", served_);
  return static_cast<int>(info->port);
}

absl::Status HttpFront::Impl::LoadTls(bool tls) {
  if (tls) {
    if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.flag, ": HTTPS needs both a certificate and its key (PEM files)"));
    }
    GPUEST_ASSIGN_OR_RETURN(
        certificate_, ReloadingCertificate::Load(options_.tls_cert_file,
                                                 options_.tls_key_file, options_.flag));
    GPUEST_RETURN_IF_ERROR(certificate_->Install());
  }
  if (!options_.tls_client_ca_file.empty()) {
    if (!tls) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.flag, ": a client CA needs HTTPS (a certificate and its key)"));
    }
    GPUEST_ASSIGN_OR_RETURN(
        client_ca_pem_,
        common::ReadPemFile(options_.tls_client_ca_file, options_.flag + " client CA"));
  }
  return absl::OkStatus();
}

std::vector<MHD_OptionItem> HttpFront::Impl::DaemonOptions(sockaddr* address, bool tls) {
  // Integers in value, one pointer in ptr_value, a callback and its closure in both.
  auto callback = [](auto* function) { return reinterpret_cast<intptr_t>(function); };
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_EXTERNAL_LOGGER, callback(&Impl::Log), this},
      {MHD_OPTION_SOCK_ADDR, 0, address},
      {MHD_OPTION_THREAD_POOL_SIZE, 2, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, nullptr},
      // One address's connections beyond this are closed on accept: a crowd from one
      // peer cannot fill the front for the others (the scheduler, the probes).
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxConnectionsPerPeer, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(kConnectionMemory),
       nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, kIdleSeconds, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, callback(&Impl::Completed), this},
      {MHD_OPTION_NOTIFY_CONNECTION, callback(&Impl::Notify), this}};
  if (tls) {
    // Asked per handshake, so that a rotated certificate serves without a restart.
    items.push_back({MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                     reinterpret_cast<void*>(&ReloadingCertificate::Retrieve)});
    items.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0,
                     const_cast<char*>("NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2")});
    // With a trust list libmicrohttpd asks each client for its certificate; whether
    // one was given and verifies is checked per request (ClientVerified).
    if (!client_ca_pem_.empty()) {
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, client_ca_pem_.data()});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  return items;
}

void HttpFront::Impl::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (reaper_.joinable()) reaper_.join();
  // Calls at work finish and resume their connections; none starts after.
  if (workers_) workers_->Stop();
  // A resumed connection's answer is written by the daemon's thread: wait for it, or
  // MHD_stop_daemon closes the connection with the answer unsent.
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &Impl::EveryAnswerWritten),
                         kStopWritesReplies);
  }
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

MHD_Result HttpFront::Impl::Access(void* cls, MHD_Connection* connection, const char* url,
                                   const char* method, const char* /*version*/,
                                   const char* upload_data, size_t* upload_data_size,
                                   void** request_closure) {
  Impl& self = *static_cast<Impl*>(cls);
  auto* call = static_cast<Call*>(*request_closure);
  if (call == nullptr) {  // The headers are in; no byte of the body is read yet.
    if (Connection* c = self.ConnectionOf(connection)) {
      absl::MutexLock lock(&self.mu_);
      c->headers_in = true;
    }
    call = new Call();
    *request_closure = call;
    call->arrived = absl::Now();
    self.Begin(connection, url, method, *call);
    return call->answered && !call->discard_body ? self.QueueReply(connection, *call)
                                                 : MHD_YES;
  }
  if (*upload_data_size > 0) {
    const size_t size = *upload_data_size;
    *upload_data_size = 0;
    if (call->discard_body || call->queued) return MHD_YES;
    if (call->body.size() + size > call->length) return MHD_NO;  // Past its length.
    call->body.append(upload_data, size);
    return MHD_YES;
  }
  if (call->answered) return call->queued ? MHD_YES : self.QueueReply(connection, *call);
  if (!call->at_work) self.StartWork(connection, *call);
  return MHD_YES;
}

void HttpFront::Impl::Begin(MHD_Connection* connection, const std::string& path,
                            const std::string& method, Call& call) {
  if ((method == "GET" || method == "HEAD") && AnswerPage(path, call)) return;
  for (const HttpRoute& route : routes_) {
    if (route.path == path) call.route = &route;
  }
  // A refusal from the headers leaves the body unread: the connection closes after it.
  if (RefuseUnserved(connection, path, method, call)) return;
  if (RefuseBodyHeaders(connection, call)) return;
  HoldBody(call);
}

bool HttpFront::Impl::AnswerPage(const std::string& path, Call& call) {
  if (path == "/healthz") {
    call.content_type = "text/plain";
    call.reply = "ok\n";
    call.answered = true;
    return true;
  }
  for (const HttpPage& page : options_.pages) {
    if (page.path != path) continue;
    call.content_type = page.content_type;
    call.reply = page.answer();
    call.answered = true;
    return true;
  }
  return false;
}

bool HttpFront::Impl::RefuseUnserved(MHD_Connection* connection, const std::string& path,
                                     const std::string& method, Call& call) {
  if (!client_ca_pem_.empty() && call.route != nullptr && !ClientVerified(connection)) {
    Refuse(call, 403,
           absl::StrCat("a client certificate signed by the CA of ", options_.flag,
                        "'s client CA is required"));
    return true;
  }
  if (call.route == nullptr) {
    Refuse(call, 404,
           absl::StrCat("no such path; the ", options_.name, " serves ", served_));
    return true;
  }
  if (method != "POST") {
    Refuse(call, 405, absl::StrCat(path, " takes POST"));
    return true;
  }
  return false;
}

bool HttpFront::Impl::RefuseBodyHeaders(MHD_Connection* connection, Call& call) {
  // The limits count the bytes the handler reads: an encoded body would inflate past
  // them (1 MB of gzip is 1 GiB), and neither kube-scheduler nor the API server sends
  // one.
  if (const std::string encoding = HeaderOf(connection, MHD_HTTP_HEADER_CONTENT_ENCODING);
      !encoding.empty() && absl::AsciiStrToLower(encoding) != "identity") {
    Refuse(call, 415,
           absl::StrCat("Content-Encoding '", encoding.substr(0, 64),
                        "' is not accepted; send the body as it is"));
    return true;
  }
  if (absl::StrContains(
          absl::AsciiStrToLower(HeaderOf(connection, MHD_HTTP_HEADER_TRANSFER_ENCODING)),
          "chunked")) {
    Refuse(call, 411, "a chunked body is not accepted; send it with a Content-Length");
    return true;
  }
  if (!absl::SimpleAtoi(HeaderOf(connection, MHD_HTTP_HEADER_CONTENT_LENGTH),
                        &call.length)) {
    Refuse(call, 411, "the request has no Content-Length");
    return true;
  }
  if (call.length > options_.max_body_bytes) {
    Refuse(call, 413,
           absl::StrCat("a body of ", call.length, " bytes exceeds the limit of ",
                        options_.max_body_bytes, " bytes"));
    // A body up to twice the limit is read and dropped (never held), so that a client
    // that writes it all before reading, as most do, gets the answer rather than a
    // reset connection; a larger one is not worth the bytes.
    call.discard_body = call.length <= 2 * options_.max_body_bytes;
    return true;
  }
  // JSON, as kube-scheduler and the API server send it ("application/json",
  // parameters allowed); anything else, or no type, is refused unread.
  const std::string type =
      absl::AsciiStrToLower(HeaderOf(connection, MHD_HTTP_HEADER_CONTENT_TYPE));
  if (type != "application/json" && !absl::StartsWith(type, "application/json;")) {
    Refuse(call, 415,
           absl::StrCat("the body is sent as '", type.substr(0, 64), "'; the ",
                        options_.name, " takes JSON (application/json)"));
    return true;
  }
  return false;
}

void HttpFront::Impl::HoldBody(Call& call) {
  // Its bytes are held before they are read, so that concurrent large bodies are refused
  // before they take memory.
  absl::StatusOr<CallDispatcher::HeldBytes> held = dispatcher_->HoldRequestBytes(
      call.route->method, static_cast<int64_t>(call.length));
  if (!held.ok()) {
    // Read and dropped, so that the client gets the answer instead of a reset
    // connection while it still sends.
    Refuse(call, 503, absl::StrCat("gpuest: ", held.status().message()), /*close=*/false);
    call.discard_body = true;
    return;
  }
  call.held.emplace(*std::move(held));
  call.body.reserve(call.length + options_.body_padding);
}

void HttpFront::Impl::Refuse(Call& call, int status, const std::string& why, bool close) {
  call.status = status;
  call.content_type = options_.error_content_type;
  call.reply = options_.error_body(why);
  call.close = close;
  call.answered = true;
}

void HttpFront::Impl::StartWork(MHD_Connection* connection, Call& call) {
  call.at_work = true;
  if (Connection* c = ConnectionOf(connection)) {
    absl::MutexLock lock(&mu_);
    c->at_work = true;
    c->unwritten = true;
  }
  MHD_suspend_connection(connection);
  Call* work = &call;
  const bool taken = workers_->Submit([this, connection, work] {
    if (options_.lower_priority) LowerThisThreadsPriority();
    common::HttpReply reply;
    const absl::Status status = dispatcher_->RunBlocking(
        work->route->method, work->arrived + options_.timeout,
        [&](const common::WorkDeadline& deadline) {
          reply = work->route->handle(std::move(work->body), deadline);
          return absl::Status(reply.code, "");
        });
    work->held.reset();
    if (!status.ok() && reply.body.empty()) {
      Refuse(*work, 503, absl::StrCat("gpuest: ", status.message()), /*close=*/false);
    } else {
      work->status = reply.status;
      work->reply = std::move(reply.body);
      work->answered = true;
    }
    MHD_resume_connection(connection);
  });
  if (!taken) {
    work->held.reset();
    Refuse(call, 503,
           absl::StrCat("gpuest: the ", options_.name, "'s ", kMaxQueuedCalls,
                        " queued calls are waiting for a thread; try again"),
           /*close=*/false);
    MHD_resume_connection(connection);
  }
}

MHD_Result HttpFront::Impl::QueueReply(MHD_Connection* connection, Call& call) {
  call.queued = true;
  if (Connection* c = ConnectionOf(connection)) {
    absl::MutexLock lock(&mu_);
    c->at_work = false;
  }
  MHD_Response* response = MHD_create_response_from_buffer(
      call.reply.size(), call.reply.data(), MHD_RESPMEM_PERSISTENT);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                          call.content_type.c_str());
  if (call.close) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  const MHD_Result queued =
      MHD_queue_response(connection, static_cast<unsigned>(call.status), response);
  MHD_destroy_response(response);
  return queued;
}

void HttpFront::Impl::Completed(void* cls, MHD_Connection* connection,
                                void** request_closure, MHD_RequestTerminationCode) {
  Impl& self = *static_cast<Impl*>(cls);
  delete static_cast<Call*>(*request_closure);
  *request_closure = nullptr;
  if (Connection* c = self.ConnectionOf(connection)) {
    absl::MutexLock lock(&self.mu_);
    c->request_began = absl::Now();  // The next request's clock starts now.
    c->headers_in = false;
    c->at_work = false;
    c->unwritten = false;
  }
}

void HttpFront::Impl::Notify(void* cls, MHD_Connection* connection, void** socket_context,
                             MHD_ConnectionNotificationCode what) {
  Impl& self = *static_cast<Impl*>(cls);
  if (what == MHD_CONNECTION_NOTIFY_STARTED) {
    auto* c = new Connection();
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = info != nullptr ? info->connect_fd : -1;
    c->request_began = absl::Now();
    *socket_context = c;
    absl::MutexLock lock(&self.mu_);
    self.connections_.insert(c);
    return;
  }
  auto* c = static_cast<Connection*>(*socket_context);
  if (c == nullptr) return;
  {
    // MHD closes the socket after this returns: the reaper never shuts a reused one.
    absl::MutexLock lock(&self.mu_);
    self.connections_.erase(c);
  }
  delete c;
  *socket_context = nullptr;
}

bool HttpFront::Impl::ClientVerified(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned int status = 0;
  // Fails for no certificate at all; status holds why a given one does not verify
  // (another CA, expired, not yet valid).
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS &&
         status == 0;
}

Connection* HttpFront::Impl::ConnectionOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info == nullptr ? nullptr : static_cast<Connection*>(info->socket_context);
}

// Every 100 ms: a connection whose request (not at work: its work has its own
// deadline) has taken longer than request_time has its socket shut, whatever it sends
// meanwhile; MHD then sees the end of it and closes it.
void HttpFront::Impl::Reap() {
  for (int tick = 1;; ++tick) {
    // Once a second, outside the connections' lock: a rotated certificate is read.
    if (certificate_ && tick % 10 == 0) certificate_->ReloadIfChanged();
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100)))
      return;
    const absl::Time now = absl::Now();
    int cut = 0;
    for (Connection* c : connections_) {
      if (c->cut || c->at_work) continue;
      // Headers have a deadline of their own, far shorter than the route's: a peer that
      // trickles them holds its socket seconds, not the route's whole time.
      const absl::Duration allowed = c->headers_in ? request_time_ : kHeaderTime;
      if (now - c->request_began <= allowed) continue;
      if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
      c->cut = true;
      ++cut;
    }
    if (cut > 0) {
      spdlog::debug(
          "{}: shut {} connection(s) whose headers took over {} or request over {}",
          options_.name, cut, absl::FormatDuration(kHeaderTime),
          absl::FormatDuration(request_time_));
    }
  }
}

void HttpFront::Impl::Log(void* cls, const char* format, va_list args) {
  char text[512];
  std::vsnprintf(text, sizeof(text), format, args);
  std::string line(text);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  // At debug: a hostile peer must not be able to fill the log (one line per bad
  // handshake or header would be its choice of volume).
  spdlog::debug("{}: {}", static_cast<Impl*>(cls)->options_.name, line);
}

}  // namespace gpuest::server
