// File: extender_http.h
//
// Serves a KubeExtender over HTTP with cpp-httplib: POST /filter and /prioritize
// (kube-scheduler appends the verb to urlPrefix), GET /healthz. Each call goes through
// the server's CallDispatcher (admission, the workers' bounded queue, deadline,
// metrics), as a gRPC call does. Each call does bounded work: one estimate of the pod's
// job per GPU model met, then arithmetic per GPU, well inside kube-scheduler's
// httpTimeout (default 30 s; deploy/kubernetes/scheduler-extender.yaml sets 5 s).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace httplib {
class Server;
}

namespace gpuest {

class KubeExtender;
class CallDispatcher;

class ExtenderHttpServer {
 public:
  // Binds listen_address (host:port, port 0 picks one) and serves on a thread of its
  // own; extender and dispatcher must outlive the server. Each call goes through the
  // dispatcher (admission, the workers' bounded queue, metrics by verb) like a gRPC
  // call, and its work stops timeout after it arrived.
  // Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<ExtenderHttpServer>> Start(
      KubeExtender& extender, const std::string& listen_address, size_t max_body_bytes,
      absl::Duration timeout, CallDispatcher& dispatcher);
  ~ExtenderHttpServer();  // Stop().

  int port() const { return port_; }
  void Stop();

 private:
  ExtenderHttpServer() = default;

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gpuest
