// File: http_front.h
//
// The server's HTTP entry points (the scheduler extender, the admission webhook,
// /metrics) on one front built on libmicrohttpd. Why that library (issue 34,
// bench/slow_senders.py): cpp-httplib gave each connection a thread until it closed, with
// timeouts per read, so a crowd of slow senders (500 connections each sending one header
// line every 0.2 s) held every thread and /healthz did not answer at all; libmicrohttpd
// polls every connection with epoll on a few threads, so a half-sent request costs its
// socket and its bounded buffer, never a thread.
//
// The rules, the same for every route, enforced where the bytes enter:
// - a connection holds at most kMaxConnections sockets' worth of the front, each with
//   a buffer of kConnectionMemory bytes for its request line and headers;
// - one client address holds at most kMaxConnectionsPerPeer of them, so that one peer's
//   crowd leaves room for the others;
// - its headers must arrive within kHeaderTime, apart from the route's time;
// - time per request, not per read: a request may take request_time from its first
//   byte (or the end of the one before it on the connection) to its answer's last,
//   after which its socket is shut; an idle connection closes after kIdleSeconds;
// - a path or verb that is not served, a body without a Content-Length, chunked, with
//   a Content-Encoding, of another type than JSON, or larger than max_body_bytes is
//   refused from its headers, before any of its body is read;
// - a body's bytes are held against the server's in-flight bound before it is read,
//   and its work goes through the dispatcher (intake, the workers' share, the
//   deadline timeout after its headers arrived, the request metrics), on the front's
//   own threads (kWorkThreads, a bounded queue): a slow call never holds the polling
//   threads, so GET /healthz always answers from them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/http_reply.h"
#include "common/work_deadline.h"
#include "server/metrics.h"

namespace gpuest::server {

class CallDispatcher;

// POST path: its body (with padding_bytes of spare capacity, for a parser that reads
// past the end) is answered by handle, on a work thread, within the deadline.
struct HttpRoute {
  std::string path;
  RpcMethod method;
  std::function<common::HttpReply(std::string body, const common::WorkDeadline& deadline)>
      handle;
};

// GET path: answered at once on the polling threads (cheap, bounded work, such as
// /metrics' text), never queued behind the routes' work.
struct HttpPage {
  std::string path;
  std::string content_type;
  std::function<std::string()> answer;
};

struct HttpFrontOptions {
  std::string name;            // "extender", "admission webhook": in logs.
  std::string flag;            // The listen flag, named in errors ("--extender-listen").
  std::string listen_address;  // host:port; port 0 picks one.
  // PEM files of the certificate and its key: HTTPS when given (both or neither).
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA bundle (HTTPS only): a client must present a certificate it signed for any
  // route (GET /healthz stays open, for probes); 403 otherwise.
  std::string tls_client_ca_file;
  size_t max_body_bytes = 0;
  size_t body_padding = 0;
  absl::Duration timeout;  // A call's work stops this long after its headers arrived.
  // Lower the work threads' CPU priority (nice 10): the extender's tens of MB of Node
  // objects must not slow the gRPC API's calls.
  bool lower_priority = false;
  // A refusal's body in the protocol's shape (the extender's {"Error": why}).
  std::function<std::string(const std::string& why)> error_body;
  std::vector<HttpPage> pages;  // Besides GET /healthz.
  std::string error_content_type = "application/json";
};

class HttpFront {
 public:
  // Connections served at once; more wait in the listen backlog.
  static constexpr unsigned kMaxConnections = 2048;
  // Connections one client address may hold at once (kube-scheduler and kube-apiserver
  // keep a few alive); more are closed as they are accepted.
  static constexpr unsigned kMaxConnectionsPerPeer = 128;
  // A request's line and headers must have arrived this long after its first byte (or
  // the end of the request before it), whatever the route's timeout.
  static constexpr absl::Duration kHeaderTime = absl::Seconds(3);
  static constexpr size_t kConnectionMemory = 32 * 1024;
  static constexpr unsigned kIdleSeconds = 2;
  static constexpr int kWorkThreads = 16;
  static constexpr size_t kMaxQueuedCalls = 64;
  // The time a request may take beyond its work's timeout: its headers, body and answer
  // on the wire.
  static constexpr absl::Duration kTransferAllowance = absl::Seconds(5);

  // Binds and serves GET /healthz, the pages and the routes. dispatcher must outlive
  // the front; it may be null when there are no routes.
  // InvalidArgument naming the flag for an address or TLS file that cannot be used;
  // Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpFront>> Start(HttpFrontOptions options,
                                                          std::vector<HttpRoute> routes,
                                                          CallDispatcher* dispatcher);
  ~HttpFront();  // Stop().

  int port() const { return port_; }
  // Stops taking connections, lets calls at work finish and closes every connection.
  void Stop();

  class Impl;

 private:
  explicit HttpFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace gpuest::server
