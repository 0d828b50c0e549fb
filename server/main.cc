// gpuest-server: answers Estimate RPCs with the estimators of a model repository.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "estimators/core/torch_device.h"
#include "integrations/kubernetes/pod_patch.h"
#include "server/logging.h"
#include "server/models_location.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address to listen on, host:port; port 0 picks a free port");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "address for Prometheus /metrics over HTTP; empty turns it off");
ABSL_FLAG(std::string, models, "",
          "model repository: gpu_profiles.json, one directory per estimator and "
          "contention/contention.json (the placement's contention model); "
          "default: the installed one (<binary>/../share/gpuest/models), else ./models");
ABSL_FLAG(std::string, device, "auto",
          "where ML estimators run: auto (CUDA if libtorch sees a GPU, else CPU), cpu, "
          "cuda");
ABSL_FLAG(int, workers, 0, "estimator worker threads; 0 means one per CPU core");
ABSL_FLAG(int, max_message_size, 16 << 20, "largest request or response, in bytes");
ABSL_FLAG(int, grpc_max_streams_per_connection, 32,
          "gRPC streams one connection may have open at once (advertised as HTTP/2 "
          "MAX_CONCURRENT_STREAMS); 0 leaves gRPC's default, no limit");
ABSL_FLAG(int64_t, grpc_transport_memory, int64_t{256} << 20,
          "bytes the gRPC transport may hold for all connections together (read "
          "buffers, calls: gRPC's ResourceQuota); 0 leaves it unbounded");
ABSL_FLAG(int, grpc_max_metadata_size, 16 << 10,
          "largest header block a gRPC request may send, in bytes");
ABSL_FLAG(absl::Duration, grpc_max_connection_idle, absl::Minutes(5),
          "a gRPC connection with no call for this long is closed with GOAWAY; 0 keeps "
          "idle connections");
ABSL_FLAG(int, grpc_max_resets_per_second, 200,
          "a gRPC connection whose client cancels (RST_STREAM) more calls than this in "
          "a second is cut (HTTP/2 rapid reset, CVE-2023-44487); 0 never cuts");
ABSL_FLAG(int, max_queued, 128,
          "calls that may wait for a worker; beyond, calls are refused at once "
          "(RESOURCE_EXHAUSTED), as are calls whose deadline the queue would outlast");
ABSL_FLAG(int64_t, max_bytes_in_flight, int64_t{256} << 20,
          "request bytes (in memory) that calls taken in may hold at once; beyond, "
          "calls are refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int64_t, inline_max_request_bytes, int64_t{64} << 10,
          "a request up to this size (in memory) is worked on by the gRPC thread that "
          "received it while the workers have room (nothing queued, fewer calls running "
          "than --workers), which saves a thread hand-off at low load; larger ones "
          "(traces, long descriptions) always go to a worker. 0 sends every call to a "
          "worker");
ABSL_FLAG(int, max_layers, 10000, "longest layer sequence a request may carry");
ABSL_FLAG(int, max_trace_events, 2000000,
          "most allocation-trace events a request may carry");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off");
ABSL_FLAG(std::string, log_format, "text", "text, or json for one JSON object a line");
ABSL_FLAG(absl::Duration, grace_period, absl::Seconds(10),
          "on SIGTERM/SIGINT, how long in-flight calls may take to finish");
ABSL_FLAG(std::string, admin_listen, "",
          "address for the gpuest.v1.Admin service (ReloadModels), on a gRPC server of "
          "its own; empty (the default) serves no Admin. It has no authentication: give "
          "a loopback address, 127.0.0.1:PORT");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the gRPC port; with --tls-key, serves TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: mutual TLS, a client must present a certificate it signed");
ABSL_FLAG(bool, plaintext_non_loopback, false,
          "allow plaintext gRPC on a non-loopback --listen address (refused otherwise)");
ABSL_FLAG(std::string, extender_listen, "",
          "address for the Kubernetes scheduler extender (HTTP POST /filter, "
          "/prioritize), host:port; empty (the default) turns it off");
ABSL_FLAG(
    std::string, extender_descriptions_dir, "",
    "extender and admission webhook: directory of mounted ConfigMaps, for pods whose "
    "gpuest.io/description annotation names one (NAME or NAME/KEY -> DIR/NAME/KEY)");
ABSL_FLAG(absl::Duration, extender_timeout, absl::Milliseconds(4500),
          "extender: a filter or prioritize call's work stops this long after it "
          "arrived and answers an Error (kube-scheduler then skips an ignorable "
          "extender for the pod); keep it under the scheduler's httpTimeout");
ABSL_FLAG(
    int64_t, extender_max_body_bytes, int64_t{128} << 20,
    "extender: the largest filter or prioritize body accepted (kube-scheduler "
    "posts whole Node objects, 5-10 KB each: the default holds 10,000 nodes or "
    "more); its bytes count in --max_bytes_in_flight while it is read and worked on");
ABSL_FLAG(std::string, extender_tls_cert, "",
          "PEM certificate chain: the extender speaks HTTPS (kube-scheduler's "
          "enableHTTPS); with --extender-tls-key");
ABSL_FLAG(std::string, extender_tls_key, "", "PEM private key of --extender-tls-cert");
ABSL_FLAG(std::string, extender_tls_client_ca, "",
          "PEM CA bundle: the extender's routes require a client certificate it signed "
          "(kube-scheduler's extender tlsConfig certFile/keyFile); /healthz stays open");
ABSL_FLAG(std::string, extender_nodes_file, "",
          "extender: a v1.NodeList JSON file (kubectl get nodes -o json), re-read when "
          "it changes, for kube-scheduler's nodeCacheCapable requests (node names only)");
ABSL_FLAG(std::string, admission_listen, "",
          "address for the Kubernetes mutating admission webhook (HTTPS POST /mutate, "
          "needs --admission-tls-cert and --admission-tls-key), host:port; empty (the "
          "default) turns it off");
ABSL_FLAG(std::string, admission_tls_cert, "",
          "admission webhook: PEM certificate whose subjectAltName names the webhook's "
          "Service (gpuest-webhook.gpuest.svc in deploy/kubernetes), as kube-apiserver "
          "verifies it; read again within a second when it or the key changes");
ABSL_FLAG(std::string, admission_tls_key, "",
          "admission webhook: PEM key of the certificate");
ABSL_FLAG(
    std::string, admission_scheduler, "hami",
    "admission webhook: whose memory request the patch sets: hami "
    "(nvidia.com/gpumem), volcano, kai or alibaba, as gpuest pod-patch --scheduler");
ABSL_FLAG(std::string, admission_dra_classes, "",
          "admission webhook: the table of DRA device classes whose ResourceClaims and "
          "ResourceClaimTemplates it sizes (the shape of "
          "integrations/kubernetes/dra_device_classes.json); empty: the built-in one "
          "(gpu.nvidia.com, mig.nvidia.com, gpu-shared.gpuest.io)");
ABSL_FLAG(std::string, admission_gpu, "",
          "admission webhook: the GPU a description that names none is sized for (a "
          "catalog id, as gpuest --gpu); empty: the catalog's default");
ABSL_FLAG(absl::Duration, admission_timeout, absl::Seconds(8),
          "admission webhook: a call's work stops this long after it arrived; keep it "
          "under the configuration's timeoutSeconds (deploy/kubernetes sets 10)");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write {\"grpc_port\",\"metrics_port\",\"admin_port\","
          "\"extender_port\",\"admission_port\",\"pid\"} as JSON here (a port not "
          "served is 0)");

namespace {

gpuest::server::ServerOptions OptionsFromFlags() {
  gpuest::server::ServerOptions o;
  o.grpc.listen_address = absl::GetFlag(FLAGS_listen);
  o.grpc.max_message_bytes = absl::GetFlag(FLAGS_max_message_size);
  o.grpc.transport.max_concurrent_streams =
      absl::GetFlag(FLAGS_grpc_max_streams_per_connection);
  o.grpc.transport.memory_bytes = absl::GetFlag(FLAGS_grpc_transport_memory);
  o.grpc.transport.max_metadata_bytes = absl::GetFlag(FLAGS_grpc_max_metadata_size);
  o.grpc.transport.max_resets_per_second =
      absl::GetFlag(FLAGS_grpc_max_resets_per_second);
  o.grpc.transport.max_connection_idle_ms = static_cast<int>(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_grpc_max_connection_idle)));
  o.extender_tls.cert_file = absl::GetFlag(FLAGS_extender_tls_cert);
  o.extender_tls.key_file = absl::GetFlag(FLAGS_extender_tls_key);
  o.extender_tls.client_ca_file = absl::GetFlag(FLAGS_extender_tls_client_ca);
  o.grpc.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.grpc.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  o.grpc.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  o.grpc.tls.plaintext_non_loopback = absl::GetFlag(FLAGS_plaintext_non_loopback);
  o.metrics_listen_address = absl::GetFlag(FLAGS_metrics_listen);
  o.admin_listen_address = absl::GetFlag(FLAGS_admin_listen);
  o.models.directory = absl::GetFlag(FLAGS_models).empty()
                           ? gpuest::server::DefaultModelsDirectory()
                           : absl::GetFlag(FLAGS_models);
  o.models.device = absl::GetFlag(FLAGS_device);
  o.work.worker_threads = absl::GetFlag(FLAGS_workers);
  o.work.max_queued = static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_max_queued)));
  o.work.max_bytes_in_flight = absl::GetFlag(FLAGS_max_bytes_in_flight);
  o.work.inline_max_request_bytes = absl::GetFlag(FLAGS_inline_max_request_bytes);
  o.work.limits.max_layers = absl::GetFlag(FLAGS_max_layers);
  o.work.limits.max_trace_events = absl::GetFlag(FLAGS_max_trace_events);
  o.grace_period = absl::GetFlag(FLAGS_grace_period);
  o.ready_file = absl::GetFlag(FLAGS_ready_file);
  o.extender.listen_address = absl::GetFlag(FLAGS_extender_listen);
  o.extender.descriptions_dir = absl::GetFlag(FLAGS_extender_descriptions_dir);
  o.extender.nodes_file = absl::GetFlag(FLAGS_extender_nodes_file);
  o.extender.timeout = absl::GetFlag(FLAGS_extender_timeout);
  o.extender.max_body_bytes = absl::GetFlag(FLAGS_extender_max_body_bytes);
  o.admission.listen_address = absl::GetFlag(FLAGS_admission_listen);
  o.admission.tls_cert_file = absl::GetFlag(FLAGS_admission_tls_cert);
  o.admission.tls_key_file = absl::GetFlag(FLAGS_admission_tls_key);
  o.admission.sizing.gpu = absl::GetFlag(FLAGS_admission_gpu);
  o.admission.sizing.descriptions_dir = o.extender.descriptions_dir;
  o.admission.timeout = absl::GetFlag(FLAGS_admission_timeout);
  return o;
}

// What the help's last line promises.
enum ExitCode { kCleanShutdown = 0, kCannotStart = 1, kBadFlags = 2 };

gpuest::common::ProgramUsage Usage() {
  return {
      "gpuest-server [flags]",
      "Serves gpuest.v1.Estimator and gpuest.v1.Placement over gRPC (with "
      "grpc.health.v1\n"
      "and server reflection), Prometheus metrics over HTTP and, when asked for, the\n"
      "Kubernetes scheduler extender (--extender-listen) and mutating admission "
      "webhook\n"
      "(--admission-listen, HTTPS). Loads every estimator of the model repository\n"
      "at start, verifying each model's files (sha256 against its manifest, finite\n"
      "outputs); a damaged file stops the start, named. SIGHUP (or Admin.ReloadModels,\n"
      "served only with --admin-listen) loads and verifies the whole repository again\n"
      "and swaps it in; on any failure the old models keep serving. SIGTERM or SIGINT\n"
      "drain in-flight calls and exit 0.",
      "Exit codes: 0 after a clean shutdown, 1 if the server cannot start, 2 on bad "
      "flags.",
      __FILE__};
}

// The error printed before exiting 2.
int BadFlags(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  return kBadFlags;
}

absl::Status CheckSizes(const gpuest::server::ServerOptions& options) {
  if (options.grpc.max_message_bytes <= 0 || options.work.worker_threads < 0 ||
      options.work.limits.max_layers <= 0 || options.work.limits.max_trace_events < 0 ||
      options.grace_period < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_max_queued) < 1 || options.work.max_bytes_in_flight <= 0 ||
      options.extender.max_body_bytes <= 0 ||
      options.grpc.transport.max_concurrent_streams < 0 ||
      options.grpc.transport.memory_bytes < 0 ||
      options.grpc.transport.max_metadata_bytes <= 0 ||
      options.grpc.transport.max_connection_idle_ms < 0 ||
      options.grpc.transport.max_resets_per_second < 0) {
    return absl::InvalidArgumentError(
        "sizes, counts and the grace period must be positive; see --help");
  }
  return absl::OkStatus();
}

// The admission webhook's sizing from its flags: which scheduler's request its patch
// sets, and the DRA device classes it sizes.
absl::Status ReadAdmissionSizing(gpuest::server::ServerOptions& options) {
  absl::StatusOr<gpuest::kubernetes::SharingScheduler> scheduler =
      gpuest::kubernetes::ParseSharingScheduler(absl::GetFlag(FLAGS_admission_scheduler));
  if (!scheduler.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admission-scheduler: '", absl::GetFlag(FLAGS_admission_scheduler),
                     "' is not one of hami, volcano, kai, alibaba; see --help"));
  }
  options.admission.sizing.scheduler = *scheduler;
  absl::StatusOr<gpuest::kubernetes::DraClasses> classes =
      gpuest::kubernetes::LoadDraClasses(absl::GetFlag(FLAGS_admission_dra_classes));
  if (!classes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--admission-dra-classes: ", classes.status().message()));
  }
  options.admission.sizing.dra_classes = *std::move(classes);
  return absl::OkStatus();
}

absl::Status CheckWebhookAndInlineWork(const gpuest::server::ServerOptions& options) {
  if (!options.admission.listen_address.empty() &&
      (options.admission.tls_cert_file.empty() ||
       options.admission.tls_key_file.empty())) {
    return absl::InvalidArgumentError(
        "--admission-listen needs --admission-tls-cert and --admission-tls-key: "
        "kube-apiserver calls webhooks over HTTPS only; see --help");
  }
  if (options.admission.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--admission-timeout must be positive; see --help");
  }
  if (options.work.inline_max_request_bytes < 0) {
    return absl::InvalidArgumentError(
        "--inline_max_request_bytes must be 0 or more; see --help");
  }
  return absl::OkStatus();
}

// The options the flags give, or why they cannot serve (the message to exit 2 with).
absl::StatusOr<gpuest::server::ServerOptions> ServerOptionsFromFlags() {
  gpuest::server::ServerOptions options = OptionsFromFlags();
  GPUEST_RETURN_IF_ERROR(CheckSizes(options));
  GPUEST_RETURN_IF_ERROR(ReadAdmissionSizing(options));
  GPUEST_RETURN_IF_ERROR(CheckWebhookAndInlineWork(options));
  return options;
}

// Blocks the signals in every thread (each one started later inherits the mask), for
// main to wait for them: no handler runs on an arbitrary thread, shutdown and reload
// happen in one known place, and a SIGHUP that comes while the models load waits for
// the server instead of killing it.
sigset_t BlockShutdownAndReloadSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void LogStart(const gpuest::server::ServerOptions& options) {
  spdlog::info(
      "gpuest-server {} starting: listen={} metrics-listen={} admin-listen={} models={} "
      "device={} workers={} max-queued={} max-bytes-in-flight={} "
      "inline-max-request-bytes={} max-message-size={} "
      "max-layers={} max-trace-events={} grace-period={} extender-listen={} "
      "extender-descriptions-dir={} extender-nodes-file={} admission-listen={}",
      GPUEST_VERSION, options.grpc.listen_address, options.metrics_listen_address,
      options.admin_listen_address, options.models.directory, options.models.device,
      options.work.worker_threads, options.work.max_queued,
      options.work.max_bytes_in_flight, options.work.inline_max_request_bytes,
      options.grpc.max_message_bytes, options.work.limits.max_layers,
      options.work.limits.max_trace_events, absl::FormatDuration(options.grace_period),
      options.extender.listen_address, options.extender.descriptions_dir,
      options.extender.nodes_file, options.admission.listen_address);
}

// Starts the server, reloads its models on each SIGHUP and shuts it down on SIGTERM or
// SIGINT: the exit code.
int Serve(const gpuest::server::ServerOptions& options, const sigset_t& signals) {
  // The worker pool is the parallelism: one libtorch thread per estimator call.
  gpuest::core::UseOneIntraOpThread();
  // Debian's Abseil checks every lock's order against a graph of all locks taken (a
  // debugging aid, 1 to 2 % of the server's CPU under load). The tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto server = gpuest::server::GpuestServer::Create(options);
  if (!server.ok()) {
    spdlog::error("cannot start: {}", server.status().ToString());
    return kCannotStart;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    // The outcome is logged and counted by the reload itself.
    spdlog::info("received SIGHUP: reloading the models");
    (*server)->ReloadModels();
  }
  spdlog::info("received {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  return kCleanShutdown;
}

// glibc gives each thread that allocates an arena of its own and keeps what it frees
// there: the extender's 64 workers and the estimator pool ratcheted the server's
// resident memory up with every burst of filters (5,000 nodes, 20 clients at once:
// peak RSS 587 MiB after 10 filters, 673 after 40; with two arenas 491 and 493:
// `MALLOC_ARENA_MAX=2 build/bench/gpuest-extender-bench --filters 40 --concurrent 20`).
// Two arenas, unless the operator set MALLOC_ARENA_MAX.
void BoundMallocArenas() {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
}

}  // namespace

int main(int argc, char** argv) {
  BoundMallocArenas();
  const std::vector<std::string> positional =
      gpuest::common::ParseFlags(argc, argv, Usage());
  if (!positional.empty()) {
    std::fprintf(stderr, "gpuest-server takes no arguments, got '%s'; see --help\n",
                 positional.front().c_str());
    return kBadFlags;
  }
  if (absl::Status s = gpuest::server::SetUpLogging(absl::GetFlag(FLAGS_log_level),
                                                    absl::GetFlag(FLAGS_log_format));
      !s.ok()) {
    return BadFlags(s);
  }
  absl::StatusOr<gpuest::server::ServerOptions> options = ServerOptionsFromFlags();
  if (!options.ok()) return BadFlags(options.status());
  const sigset_t signals = BlockShutdownAndReloadSignals();
  LogStart(*options);
  return Serve(*options, signals);
}
