// File: options.h
//
// Everything the server is configured with, parsed once from flags in main.cc and
// passed down; nothing deeper reads flags.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "estimators/core/request_validation.h"
#include "integrations/kubernetes/admission_webhook.h"
#include "integrations/kubernetes/extender_options.h"
#include "server/grpc_transport.h"

namespace gpuest::server {

// Transport security of the gRPC port (server/credentials.h). No certificate:
// plaintext, which only a loopback address gets unless plaintext_non_loopback says so.
struct TlsOptions {
  std::string cert_file;  // PEM certificate chain; with key_file, turns TLS on.
  std::string key_file;   // PEM private key of cert_file.
  std::string
      client_ca_file;  // PEM CA bundle; given, clients must present a cert it signed.
  bool plaintext_non_loopback = false;
};

struct GrpcOptions {
  std::string listen_address = "127.0.0.1:50051";
  int max_message_bytes = 16 << 20;
  TlsOptions tls;
  GrpcTransportOptions transport;
};

struct ModelOptions {
  std::string directory = "models";
  std::string device = "auto";  // auto|cpu|cuda
};

struct WorkOptions {
  int worker_threads = 0;  // 0: one per CPU core.
  // Calls waiting for a worker at most; beyond, RESOURCE_EXHAUSTED at once. With a
  // call taking about a millisecond, 128 queued is ~60 ms of waiting on 2 workers.
  size_t max_queued = 128;
  // Request bytes (in memory) that calls taken in may hold at once.
  int64_t max_bytes_in_flight = int64_t{256} << 20;
  // A request up to this size (in memory) is worked on by the gRPC thread that got it
  // while the workers have room (WorkerPool::RunHereIfRoom); 0: every call goes to a
  // worker. 64 KiB holds a
  // description of some 500 layers with no trace, a few milliseconds of work at most.
  int64_t inline_max_request_bytes = int64_t{64} << 10;
  core::ValidationLimits limits;
};

// The Kubernetes mutating admission webhook (admission_webhook.h), served over HTTPS.
struct AdmissionWebhookOptions {
  std::string listen_address;  // host:port; empty: not served.
  std::string tls_cert_file;   // PEM: the certificate whose SAN names the Service.
  std::string tls_key_file;
  kubernetes::AdmissionOptions sizing;  // descriptions_dir: the extender's.
  absl::Duration timeout = absl::Seconds(8);
  int64_t max_body_bytes = int64_t{6} << 20;
};

struct ServerOptions {
  GrpcOptions grpc;
  std::string metrics_listen_address = "127.0.0.1:9464";  // Empty: no /metrics.
  // gpuest.v1.Admin (model reload) on a server of its own; empty: not served.
  std::string admin_listen_address;
  ModelOptions models;
  WorkOptions work;
  absl::Duration grace_period = absl::Seconds(10);
  std::string ready_file;  // Written once serving: the bound ports, as JSON.
  kubernetes::ExtenderOptions
      extender;  // Kubernetes scheduler extender; off unless listen is set.
  // The extender's HTTPS (plain HTTP when no certificate), and the CA whose client
  // certificates it requires (kube-scheduler's extender tlsConfig).
  TlsOptions extender_tls;
  AdmissionWebhookOptions admission;  // Off unless its listen address is set.
};

}  // namespace gpuest::server
