#include "server/metrics.h"

#include <array>
#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"
#include "grpc/support/alloc.h"
#include "nlohmann/json.hpp"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace gpuest::server {
namespace {

constexpr std::array<const char*, kRpcMethodCount> kMethodNames = {
    "Estimate",        "ListEstimators",      "CheckPlacement",  "RankGpus",
    "extender/filter", "extender/prioritize", "admission/mutate"};
constexpr int kStatusCodes = 17;  // OK .. UNAUTHENTICATED, as in gRPC.

// Latency buckets from 25 us, with a boundary at the 1 ms objective.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3,
      5e-3,  10e-3, 25e-3,  0.1,    0.5,    2.5};
  return *buckets;
}

std::string CodeName(absl::StatusCode code) {
  // absl's names match gRPC's ("INVALID_ARGUMENT"), which dashboards expect.
  return absl::StatusCodeToString(code);
}

// gRPC's own count of the calls of this process's servers (channelz), read at each
// scrape. It holds what the service never sees: a call gRPC refused before handing it
// over (a request over the max message size) is started there but never finished
// (gRPC 1.51 drops such a call without recording an outcome), and is not in
// gpuest_requests_total.
class GrpcCallCounts final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    double started = 0, succeeded = 0, failed = 0;
    char* text = grpc_channelz_get_servers(0);
    if (text != nullptr) {
      const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
      gpr_free(text);
      // int64 fields come as strings in channelz's JSON, and are left out when 0.
      auto number = [](const nlohmann::json& data, const char* key) {
        const auto it = data.find(key);
        if (it == data.end()) return 0.0;
        return it->is_string() ? std::stod(it->get<std::string>()) : it->get<double>();
      };
      if (doc.is_object() && doc.contains("server")) {
        for (const nlohmann::json& server : doc["server"]) {
          const nlohmann::json& data = server.value("data", nlohmann::json::object());
          started += number(data, "callsStarted");
          succeeded += number(data, "callsSucceeded");
          failed += number(data, "callsFailed");
        }
      }
    }
    prometheus::MetricFamily started_family{
        "gpuest_grpc_calls_started_total",
        "Calls gRPC started on this server, every service included (channelz); "
        "started minus finished is the calls in flight plus those gRPC refused before "
        "the service saw them (a request over the max message size).",
        prometheus::MetricType::Counter,
        {}};
    started_family.metric.emplace_back().counter.value = started;
    prometheus::MetricFamily finished{
        "gpuest_grpc_calls_finished_total",
        "Calls gRPC finished on this server, by result (ok, failed), every service "
        "included (channelz).",
        prometheus::MetricType::Counter,
        {}};
    const std::pair<const char*, double> results[] = {{"ok", succeeded},
                                                      {"failed", failed}};
    for (const auto& [result, value] : results) {
      prometheus::ClientMetric& m = finished.metric.emplace_back();
      m.label.push_back({"result", result});
      m.counter.value = value;
    }
    return {std::move(started_family), std::move(finished)};
  }
};

}  // namespace

struct Metrics::State {
  std::shared_ptr<prometheus::Registry> registry =
      std::make_shared<prometheus::Registry>();
  std::shared_ptr<GrpcCallCounts> grpc_call_counts = std::make_shared<GrpcCallCounts>();

  // The metric table: each family declared once, here.
  prometheus::Family<prometheus::Histogram>& request_duration =
      prometheus::BuildHistogram()
          .Name("gpuest_request_duration_seconds")
          .Help("Server-side latency of gRPC requests, by method and status code.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& requests_total =
      prometheus::BuildCounter()
          .Name("gpuest_requests_total")
          .Help("gRPC requests answered, by method and status code.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& in_flight =
      prometheus::BuildGauge()
          .Name("gpuest_requests_in_flight")
          .Help("gRPC requests being handled now, by method.")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& estimator_duration =
      prometheus::BuildHistogram()
          .Name("gpuest_estimator_duration_seconds")
          .Help("Time one estimator took for one request, by estimator id.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& shed_total =
      prometheus::BuildCounter()
          .Name("gpuest_requests_shed_total")
          .Help(
              "gRPC requests refused without being worked on, by method and reason "
              "(queue_full, bytes_in_flight, deadline_unmeetable, deadline_in_queue, "
              "cancelled_in_queue); each is also in gpuest_requests_total.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& bytes_in_flight =
      prometheus::BuildGauge()
          .Name("gpuest_request_bytes_in_flight")
          .Help("Bytes of requests held by calls taken in, queued or running.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& queued =
      prometheus::BuildGauge()
          .Name("gpuest_requests_queued")
          .Help("Calls taken in and waiting for a worker.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& run_on_grpc_thread =
      prometheus::BuildCounter()
          .Name("gpuest_requests_run_on_grpc_thread_total")
          .Help(
              "Calls taken in and worked on by the gRPC thread that received them "
              "(requests "
              "up to --inline-max-request-bytes, while the workers had room), by "
              "method; the others ran on a worker.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& build_info =
      prometheus::BuildGauge()
          .Name("gpuest_build_info")
          .Help("Build of this server; always 1.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& models_info =
      prometheus::BuildGauge()
          .Name("gpuest_models_info")
          .Help("Loaded model repository version and estimator count; always 1.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& estimator_info =
      prometheus::BuildGauge()
          .Name("gpuest_estimator_info")
          .Help(
              "Each served estimator and the device it computes on (cpu, or cuda for an "
              "ML ensemble on a GPU); always 1.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& model_reloads_total =
      prometheus::BuildCounter()
          .Name("gpuest_model_reloads_total")
          .Help(
              "Model reloads (SIGHUP, Admin.ReloadModels) by outcome: success, or "
              "failure (the old models kept serving).")
          .Register(*registry);

  prometheus::Family<prometheus::Counter>& connections_cut_total =
      prometheus::BuildCounter()
          .Name("gpuest_grpc_connections_cut_total")
          .Help(
              "gRPC connections the server shut for resetting their streams faster than "
              "--grpc-max-resets-per-second (HTTP/2 rapid reset).")
          .Register(*registry);

  // Series cached on first use: prometheus-cpp's Add() is a slow, locked lookup.
  struct Series {
    std::atomic<prometheus::Histogram*> duration{nullptr};
    std::atomic<prometheus::Counter*> total{nullptr};
  };
  std::array<std::array<Series, kStatusCodes>, kRpcMethodCount> series;
  std::array<prometheus::Gauge*, kRpcMethodCount> in_flight_series{};
  std::array<prometheus::Counter*, kRpcMethodCount> run_on_grpc_thread_series{};
  std::array<std::array<prometheus::Counter*, kShedReasonCount>, kRpcMethodCount>
      shed_series{};
  prometheus::Gauge* bytes_in_flight_series = nullptr;
  prometheus::Gauge* queued_series = nullptr;
  absl::Mutex add_mu;
  // Grown by SetModels at start and at each reload; read by every call.
  absl::Mutex estimators_mu;
  absl::flat_hash_map<std::string, prometheus::Histogram*> estimator_series
      ABSL_GUARDED_BY(estimators_mu);
  prometheus::Gauge* models_info_series ABSL_GUARDED_BY(estimators_mu) = nullptr;
  std::vector<prometheus::Gauge*> estimator_info_series ABSL_GUARDED_BY(estimators_mu);
  prometheus::Counter* connections_cut = &connections_cut_total.Add({});
  prometheus::Counter* reload_success = nullptr;
  prometheus::Counter* reload_failure = nullptr;

  Series& SeriesFor(RpcMethod method, absl::StatusCode code) {
    const int c = static_cast<int>(code);
    Series& s = series[static_cast<int>(method)][c >= 0 && c < kStatusCodes ? c : 2];
    if (s.duration.load(std::memory_order_acquire) == nullptr) {
      absl::MutexLock lock(&add_mu);
      if (s.duration.load(std::memory_order_relaxed) == nullptr) {
        const std::map<std::string, std::string> labels = {
            {"method", kMethodNames[static_cast<int>(method)]}, {"code", CodeName(code)}};
        s.total.store(&requests_total.Add(labels), std::memory_order_release);
        s.duration.store(&request_duration.Add(labels, LatencyBuckets()),
                         std::memory_order_release);
      }
    }
    return s;
  }
};

Metrics::Metrics(std::unique_ptr<State> state) : state_(std::move(state)) {}
Metrics::~Metrics() = default;

std::unique_ptr<Metrics> Metrics::Create() {
  auto state = std::make_unique<State>();
  for (int m = 0; m < kRpcMethodCount; ++m) {
    state->in_flight_series[m] = &state->in_flight.Add({{"method", kMethodNames[m]}});
    state->run_on_grpc_thread_series[m] =
        &state->run_on_grpc_thread.Add({{"method", kMethodNames[m]}});
    for (int r = 0; r < kShedReasonCount; ++r) {
      state->shed_series[m][r] = &state->shed_total.Add(
          {{"method", kMethodNames[m]},
           {"reason", ShedReasonName(static_cast<ShedReason>(r))}});
    }
  }
  state->bytes_in_flight_series = &state->bytes_in_flight.Add({});
  state->queued_series = &state->queued.Add({});
  // Both outcomes from the start: an alert on failures sees 0 before the first one.
  state->reload_success = &state->model_reloads_total.Add({{"outcome", "success"}});
  state->reload_failure = &state->model_reloads_total.Add({{"outcome", "failure"}});
  return std::unique_ptr<Metrics>(new Metrics(std::move(state)));
}

std::string Metrics::Text() const {
  std::vector<prometheus::MetricFamily> families = state_->registry->Collect();
  for (prometheus::MetricFamily& family : state_->grpc_call_counts->Collect()) {
    families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

void Metrics::SetBuildInfo(const std::string& version, const std::string& grpc_version) {
  state_->build_info.Add({{"version", version}, {"grpc_version", grpc_version}}).Set(1);
}

void Metrics::SetModels(const std::string& models_version,
                        const std::vector<ServedEstimator>& estimators) {
  absl::MutexLock lock(&state_->estimators_mu);
  if (state_->models_info_series != nullptr) {
    state_->models_info.Remove(state_->models_info_series);
  }
  state_->models_info_series =
      &state_->models_info.Add({{"models_version", models_version},
                                {"estimators", std::to_string(estimators.size())}});
  state_->models_info_series->Set(1);
  for (prometheus::Gauge* series : state_->estimator_info_series) {
    state_->estimator_info.Remove(series);
  }
  state_->estimator_info_series.clear();
  for (const ServedEstimator& e : estimators) {
    prometheus::Gauge& series =
        state_->estimator_info.Add({{"estimator", e.id}, {"device", e.device}});
    series.Set(1);
    state_->estimator_info_series.push_back(&series);
  }
  for (const ServedEstimator& e : estimators) {
    const std::string& id = e.id;
    if (state_->estimator_series.contains(id)) continue;
    state_->estimator_series[id] =
        &state_->estimator_duration.Add({{"estimator", id}}, LatencyBuckets());
  }
}

void Metrics::ModelsReloaded(bool succeeded) {
  (succeeded ? state_->reload_success : state_->reload_failure)->Increment();
}

void Metrics::RequestStarted(RpcMethod method) {
  state_->in_flight_series[static_cast<int>(method)]->Increment();
}

void Metrics::RequestFinished(RpcMethod method, absl::StatusCode code, double seconds) {
  state_->in_flight_series[static_cast<int>(method)]->Decrement();
  State::Series& s = state_->SeriesFor(method, code);
  s.total.load(std::memory_order_acquire)->Increment();
  s.duration.load(std::memory_order_acquire)->Observe(seconds);
}

void Metrics::RequestShed(RpcMethod method, ShedReason reason) {
  state_->shed_series[static_cast<int>(method)][static_cast<int>(reason)]->Increment();
}

void Metrics::ConnectionCut() { state_->connections_cut->Increment(); }

void Metrics::RanOnGrpcThread(RpcMethod method) {
  state_->run_on_grpc_thread_series[static_cast<int>(method)]->Increment();
}

void Metrics::BytesInFlightChanged(int64_t delta) {
  state_->bytes_in_flight_series->Increment(static_cast<double>(delta));
}

void Metrics::QueuedChanged(int delta) { state_->queued_series->Increment(delta); }

void Metrics::EstimatorObserved(const std::string& estimator_id, double seconds) {
  absl::ReaderMutexLock lock(&state_->estimators_mu);
  auto it = state_->estimator_series.find(estimator_id);
  if (it != state_->estimator_series.end()) it->second->Observe(seconds);
}

}  // namespace gpuest::server
