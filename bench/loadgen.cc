// gpuest-loadgen: closed-loop load against a gpuest-server. Each of --concurrency
// slots keeps one Estimate call outstanding for --duration (or, with
// --rpc=check_placement, one blocking CheckPlacement per thread); prints throughput,
// latency percentiles and errors. With --in_process_models it first measures the same
// request on an in-process Engine (what the server's work costs without gRPC) in the same
// run and prints the ratio of the two. It also prints its own CPU time per gRPC call: on
// a machine it shares with the server, that much of the cores is not the server's.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/quantile.h"
#include "estimators/core/engine.h"
#include "estimators/core/torch_device.h"
#include "estimators/default_factories.h"
#include "google/protobuf/util/json_util.h"
#include "gpuest/client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "server address(es), comma-separated");
ABSL_FLAG(int, concurrency, 1, "calls kept outstanding at once");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "how long to measure");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1), "unmeasured load before measuring");
ABSL_FLAG(absl::Duration, deadline, absl::Seconds(1), "deadline of each call");
ABSL_FLAG(std::string, request, "examples/cnn.json",
          "ModelDescription JSON to send with every call (--rpc=check_placement: a "
          "CheckPlacementRequest in JSON)");
ABSL_FLAG(std::string, rpc, "estimate",
          "estimate (asynchronous calls) or check_placement (blocking calls, one thread "
          "per slot); bench/go_client_vs_cpp.py compares both with the Go client");
ABSL_FLAG(std::string, estimators, "", "comma-separated estimator ids; empty runs all");
ABSL_FLAG(std::string, gpu, "", "target GPU model of each request");
ABSL_FLAG(std::string, in_process_models, "",
          "a model repository: also measure the request on an in-process Engine "
          "(min(concurrency, cores) threads, as many as the server's workers) and print "
          "the gRPC / in-process ratio");

namespace {

struct Recorder {
  absl::Mutex mu;
  std::vector<double> latencies_us ABSL_GUARDED_BY(mu);
  int64_t errors ABSL_GUARDED_BY(mu) = 0;
  std::string first_error ABSL_GUARDED_BY(mu);
};

class ClosedLoop {
 public:
  ClosedLoop(const gpuest::Client& client, const gpuest::v1::EstimateRequest& request,
             absl::Duration deadline)
      : client_(client), request_(request), deadline_(deadline) {}

  // Runs `slots` loops until `until`; records results issued after `measure_from`.
  void Run(int slots, absl::Time measure_from, absl::Time until) {
    measure_from_ = measure_from;
    until_ = until;
    active_ = slots;
    for (int i = 0; i < slots; ++i) Issue();
    done_.WaitForNotification();
  }

  Recorder& recorder() { return recorder_; }

 private:
  void Issue() {
    const absl::Time start = absl::Now();
    client_.EstimateAsync(
        request_,
        [this, start](absl::StatusOr<gpuest::v1::EstimateResponse> response) {
          const absl::Time end = absl::Now();
          if (start >= measure_from_ && end <= until_) {
            absl::MutexLock lock(&recorder_.mu);
            if (response.ok()) {
              recorder_.latencies_us.push_back(absl::ToDoubleMicroseconds(end - start));
            } else {
              if (recorder_.errors++ == 0)
                recorder_.first_error = response.status().ToString();
            }
          }
          if (end < until_) {
            Issue();
          } else if (active_.fetch_sub(1) == 1) {
            done_.Notify();
          }
        },
        deadline_);
  }

  const gpuest::Client& client_;
  const gpuest::v1::EstimateRequest& request_;
  const absl::Duration deadline_;
  absl::Time measure_from_, until_;
  std::atomic<int> active_{0};
  absl::Notification done_;
  Recorder recorder_;
};

// This process's CPU time (user and system, every thread) so far.
absl::Duration ProcessCpuTime() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return absl::DurationFromTimeval(usage.ru_utime) +
         absl::DurationFromTimeval(usage.ru_stime);
}

// Latencies (sorted, us), errors and the measured span of one run.
struct Summary {
  std::vector<double> latencies_us;
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;

  double throughput() const { return latencies_us.size() / seconds; }
  double p(double q) const { return gpuest::common::QuantileOfSorted(latencies_us, q); }
  void Print(const std::string& what) const {
    std::printf(
        "%s: calls=%zu throughput=%.0f/s p50=%.0fus p99=%.0fus p999=%.0fus errors=%lld\n",
        what.c_str(), latencies_us.size(), throughput(), p(0.50), p(0.99), p(0.999),
        static_cast<long long>(errors));
    if (errors > 0) std::printf("first error: %s\n", first_error.c_str());
  }
};

Summary Summarize(Recorder& rec, absl::Duration duration) {
  absl::MutexLock lock(&rec.mu);
  Summary s;
  s.latencies_us = std::move(rec.latencies_us);
  std::sort(s.latencies_us.begin(), s.latencies_us.end());
  s.errors = rec.errors;
  s.first_error = rec.first_error;
  s.seconds = absl::ToDoubleSeconds(duration);
  return s;
}

// A closed loop of `threads` callers, each making one blocking call at a time.
Summary MeasureThreads(const std::function<absl::Status()>& call, int threads,
                       absl::Duration warmup, absl::Duration duration) {
  Recorder rec;
  const absl::Time measure_from = absl::Now() + warmup;
  const absl::Time until = measure_from + duration;
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&] {
      std::vector<double> mine;
      int64_t errors = 0;
      std::string first_error;
      while (true) {
        const absl::Time start = absl::Now();
        if (start >= until) break;
        const absl::Status status = call();
        const absl::Time end = absl::Now();
        if (start < measure_from || end > until) continue;
        if (status.ok()) {
          mine.push_back(absl::ToDoubleMicroseconds(end - start));
        } else if (errors++ == 0) {
          first_error = status.ToString();
        }
      }
      absl::MutexLock lock(&rec.mu);
      rec.latencies_us.insert(rec.latencies_us.end(), mine.begin(), mine.end());
      if (rec.errors == 0 && errors > 0) rec.first_error = first_error;
      rec.errors += errors;
    });
  }
  for (std::thread& t : callers) t.join();
  return Summarize(rec, duration);
}

// A client of --target with --deadline; nullptr after saying why on stderr.
std::unique_ptr<gpuest::Client> Connect() {
  gpuest::ClientOptions options;
  options.targets = absl::StrSplit(absl::GetFlag(FLAGS_target), ',', absl::SkipEmpty());
  options.default_deadline = absl::GetFlag(FLAGS_deadline);
  auto client = gpuest::Client::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*client);
}

// This process's CPU time over [measure_from, measure_from + duration), into `cpu`, on
// a thread beside the load: the client's own share of the cores.
std::thread SampleCpu(absl::Time measure_from, absl::Duration duration,
                      absl::Duration& cpu) {
  return std::thread([measure_from, duration, &cpu] {
    absl::SleepFor(measure_from - absl::Now());
    const absl::Duration start = ProcessCpuTime();
    absl::SleepFor(measure_from + duration - absl::Now());
    cpu = ProcessCpuTime() - start;
  });
}

void PrintClientCpu(const Summary& grpc, absl::Duration client_cpu) {
  if (grpc.latencies_us.empty()) return;
  std::printf(
      "client CPU per gRPC call: %.0fus (this load generator's own share of "
      "the cores)\n",
      absl::ToDoubleMicroseconds(client_cpu) / grpc.latencies_us.size());
}

// --rpc=check_placement: the CheckPlacementRequest of --request, blocking calls from
// --concurrency threads; the same output lines as the Estimate loop.
int RunCheckPlacement(const std::string& text) {
  gpuest::v1::CheckPlacementRequest request;
  if (auto s = google::protobuf::util::JsonStringToMessage(text, &request); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::GetFlag(FLAGS_request).c_str(),
                 std::string(s.message()).c_str());
    return 2;
  }
  const std::unique_ptr<gpuest::Client> client = Connect();
  if (client == nullptr) return 2;
  if (auto r = client->CheckPlacement(request); !r.ok()) {
    std::fprintf(stderr, "first call failed: %s\n", r.status().ToString().c_str());
    return 3;
  }
  const absl::Duration warmup = absl::GetFlag(FLAGS_warmup);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  absl::Duration client_cpu;
  std::thread cpu_sampler = SampleCpu(absl::Now() + warmup, duration, client_cpu);
  const Summary grpc =
      MeasureThreads([&] { return client->CheckPlacement(request).status(); },
                     absl::GetFlag(FLAGS_concurrency), warmup, duration);
  cpu_sampler.join();
  std::printf("target=%s concurrency=%d duration=%.1fs rpc=check_placement request=%s\n",
              client->channel_target().c_str(), absl::GetFlag(FLAGS_concurrency),
              absl::ToDoubleSeconds(duration), absl::GetFlag(FLAGS_request).c_str());
  grpc.Print("grpc");
  PrintClientCpu(grpc, client_cpu);
  return grpc.errors > 0 ? 1 : 0;
}

// The EstimateRequest of --request's description, --estimators and --gpu; nullopt
// after saying why on stderr.
std::optional<gpuest::v1::EstimateRequest> EstimateRequestOf(const std::string& text) {
  gpuest::v1::EstimateRequest request;
  if (auto s = google::protobuf::util::JsonStringToMessage(text, request.mutable_model());
      !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::GetFlag(FLAGS_request).c_str(),
                 std::string(s.message()).c_str());
    return std::nullopt;
  }
  for (absl::string_view id :
       absl::StrSplit(absl::GetFlag(FLAGS_estimators), ',', absl::SkipEmpty())) {
    request.add_estimators(std::string(id));
  }
  request.set_gpu(absl::GetFlag(FLAGS_gpu));
  return request;
}

// With --in_process_models, the request on an in-process Engine into `summary`, from
// min(concurrency, cores) threads as the server's workers; false after saying why.
bool MeasureInProcess(const gpuest::v1::EstimateRequest& request, int concurrency,
                      std::optional<Summary>& summary) {
  const std::string models = absl::GetFlag(FLAGS_in_process_models);
  if (models.empty()) return true;
  gpuest::core::UseOneIntraOpThread();  // As the server does.
  auto registry = gpuest::core::EstimatorRegistry::Load(
      gpuest::estimators::WithDefaultFactories({models, "cpu"}));
  if (!registry.ok()) {
    std::fprintf(stderr, "%s\n", registry.status().ToString().c_str());
    return false;
  }
  const gpuest::core::Engine engine(std::move(*registry),
                                    gpuest::core::ValidationLimits{});
  const int threads =
      std::min<int>(concurrency, std::max(1u, std::thread::hardware_concurrency()));
  summary = MeasureThreads([&] { return engine.Estimate(request).status(); }, threads,
                           absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_duration));
  return true;
}

void PrintEstimateSummaries(const gpuest::Client& client, int concurrency,
                            const std::optional<Summary>& in_process,
                            const Summary& grpc) {
  std::printf("target=%s concurrency=%d duration=%.1fs request=%s estimators=%s\n",
              client.channel_target().c_str(), concurrency,
              absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration)),
              absl::GetFlag(FLAGS_request).c_str(),
              absl::GetFlag(FLAGS_estimators).empty()
                  ? "all"
                  : absl::GetFlag(FLAGS_estimators).c_str());
  if (in_process) {
    in_process->Print("in-process");
    grpc.Print("grpc");
    std::printf("ratio grpc/in-process: p50 x%.2f p99 x%.2f throughput x%.2f\n",
                grpc.p(0.50) / in_process->p(0.50), grpc.p(0.99) / in_process->p(0.99),
                grpc.throughput() / in_process->throughput());
  } else {
    grpc.Print("grpc");
  }
}

// --rpc=estimate: --concurrency asynchronous Estimate calls kept outstanding, after
// the same request in process where --in_process_models asks for it.
int RunEstimate(const std::string& text) {
  const std::optional<gpuest::v1::EstimateRequest> request = EstimateRequestOf(text);
  if (!request) return 2;
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  std::optional<Summary> in_process;
  if (!MeasureInProcess(*request, concurrency, in_process)) return 2;
  const std::unique_ptr<gpuest::Client> client = Connect();
  if (client == nullptr) return 2;
  if (auto r = client->Estimate(*request); !r.ok()) {
    std::fprintf(stderr, "first call failed: %s\n", r.status().ToString().c_str());
    return 3;
  }

  ClosedLoop loop(*client, *request, absl::GetFlag(FLAGS_deadline));
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Time measure_from = absl::Now() + absl::GetFlag(FLAGS_warmup);
  absl::Duration client_cpu;
  std::thread cpu_sampler = SampleCpu(measure_from, duration, client_cpu);
  loop.Run(concurrency, measure_from, measure_from + duration);
  cpu_sampler.join();
  const Summary grpc = Summarize(loop.recorder(), duration);

  PrintEstimateSummaries(*client, concurrency, in_process, grpc);
  PrintClientCpu(grpc, client_cpu);
  return grpc.errors > 0 || (in_process && in_process->errors > 0) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-loadgen [flags]",
       "Closed-loop load generator for gpuest-server's Estimate (or "
       "CheckPlacement) RPC.",
       "Prints: calls, throughput (calls/s), p50/p99/p999 latency in us, "
       "errors. Exit 1 when any call failed.",
       __FILE__});
  std::ifstream in(absl::GetFlag(FLAGS_request));
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", absl::GetFlag(FLAGS_request).c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (absl::GetFlag(FLAGS_concurrency) < 1) {
    std::fprintf(stderr, "--concurrency must be at least 1\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_rpc) == "check_placement") return RunCheckPlacement(text.str());
  if (absl::GetFlag(FLAGS_rpc) != "estimate") {
    std::fprintf(stderr, "--rpc: '%s' is not estimate or check_placement\n",
                 absl::GetFlag(FLAGS_rpc).c_str());
    return 2;
  }
  return RunEstimate(text.str());
}
