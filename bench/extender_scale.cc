// The scheduler extender at cluster scale, against the real gpuest-server in one run
// (issues "frontdoor", "scale"): kube-scheduler posts whole Node objects, 5-10 KB each,
// or with nodeCacheCapable their names; each node's 8 GPUs have states of their own.
//  1. One Estimate of the description, over gRPC: the unit (median of --estimates).
//  2. One filter of --nodes real-sized Node objects, and the same by names only, over
//     HTTP: wall and the server's work as multiples of one Estimate; CheckPlacement
//     beside 10 and 256 jobs (time ratio, answer size).
//  3. The gRPC API's p99 alone, then beside --concurrent clients posting such filters
//     without pause (goal: at most doubled), with how the extender's calls ended.
//  4. With --rss_filters=N, the server's RSS after the first and the N-th of N
//     consecutive whole-object filters.
// Prints a table; exits 0 whatever the figures (a benchmark, not a test).
//
//   build/bench/gpuest-extender-bench [--nodes=5000] [--concurrent=50]
//   [--rss_filters=100]
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/quantile.h"
#include "gpuest/client.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "requests/request_files.h"
#include "tests/support/server_process.h"

ABSL_FLAG(int, nodes, 5000, "Node objects in each filter");
ABSL_FLAG(
    int, rss_filters, 0,
    "whole-object filters posted one after another in part 4, the server's RSS read "
    "after the first and the last (0: part 4 skipped)");
ABSL_FLAG(int, concurrent, 50, "clients posting filters at once in part 3");
ABSL_FLAG(int, estimates, 200, "Estimate calls per measurement");
ABSL_FLAG(int, filters, 5, "filters timed in part 2");
ABSL_FLAG(std::string, description, GPUEST_EXAMPLES_DIR "/cnn.json",
          "the pod's description");

namespace {

using gpuest::common::Quantile;
using nlohmann::json;

// Node i's 8 GPUs of one of three models, each with its own free memory and
// utilization, as the gpuest.io/gpus annotation holds them.
json Gpus(int i) {
  static const char* kModels[] = {"a100-80gb", "a100-40gb", "h100-80gb"};
  const std::string model = kModels[i % 3];
  const int total = model == "a100-40gb" ? 40960 : 81920;
  json gpus = json::array();
  for (int g = 0; g < 8; ++g) {
    const int used = static_cast<int>((static_cast<int64_t>(i * 8 + g) * 7919) % total);
    gpus.push_back({{"model", model},
                    {"totalMiB", total},
                    {"freeMiB", total - used},
                    {"utilPercent", (i * 8 + g) % 101}});
  }
  return gpus;
}

// GPU feature discovery's and node-feature-discovery's labels.
json Labels(const std::string& name, int i) {
  json labels = {{"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"topology.kubernetes.io/region", "eu-west-4"},
                 {"topology.kubernetes.io/zone",
                  absl::StrCat("eu-west-4", std::string(1, "abc"[i % 3]))},
                 {"node.kubernetes.io/instance-type", "p4d.24xlarge"},
                 {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                 {"nvidia.com/gpu.memory", "81920"},
                 {"nvidia.com/gpu.count", "8"},
                 {"nvidia.com/gpu.family", "ampere"},
                 {"nvidia.com/cuda.driver.major", "535"},
                 {"nvidia.com/cuda.runtime.major", "12"},
                 {"nvidia.com/mig.capable", "true"},
                 {"nvidia.com/gfd.timestamp", "1732600000"}};
  for (int f = 0; f < 24; ++f) {
    labels[absl::StrCat("feature.node.kubernetes.io/cpu-cpuid.AVX512", f)] = "true";
  }
  return labels;
}

json Metadata(const std::string& name, int i) {
  return {{"name", name},
          {"uid", absl::StrFormat("6f1c%04x-0000-4000-8000-%012x", i % 65536, i)},
          {"resourceVersion", std::to_string(900000 + i)},
          {"creationTimestamp", "2026-10-01T12:00:00Z"},
          {"labels", Labels(name, i)},
          {"annotations",
           {{"gpuest.io/gpus", Gpus(i).dump()},
            {"node.alpha.kubernetes.io/ttl", "0"},
            {"volumes.kubernetes.io/controller-managed-attach-detach", "true"},
            {"csi.volume.kubernetes.io/nodeid", json{{"ebs.csi.aws.com", name}}.dump()},
            {"nfd.node.kubernetes.io/feature-labels",
             "cpu-cpuid.AVX512F,cpu-cpuid.AVX512BW,cpu-cpuid.AVX512VL,kernel-version"}}}};
}

json Spec(const std::string& name, int i) {
  return {
      {"podCIDR", absl::StrFormat("10.%d.%d.0/24", i / 256 % 256, i % 256)},
      {"providerID", absl::StrCat("aws:///eu-west-4a/i-0", name)},
      {"taints",
       {{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}}}};
}

// Kubelet's conditions, as they were at the last heartbeat.
json Conditions() {
  json conditions = json::array();
  for (const char* type :
       {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable"}) {
    conditions.push_back({{"type", type},
                          {"status", std::string(type) == "Ready" ? "True" : "False"},
                          {"lastHeartbeatTime", "2026-11-26T04:00:00Z"},
                          {"lastTransitionTime", "2026-10-01T12:00:00Z"},
                          {"reason", absl::StrCat("Kubelet", type)},
                          {"message", absl::StrCat("kubelet reports ", type,
                                                   " as it was at the last heartbeat")}});
  }
  return conditions;
}

// The node's image list: most of a Node object's size.
json Images(int i) {
  json images = json::array();
  for (int m = 0; m < 24; ++m) {
    const std::string repo = absl::StrCat("registry.example.com/ml/train-image-", m);
    images.push_back(
        {{"names",
          {absl::StrCat(repo, "@sha256:", std::string(64, "0123456789abcdef"[m % 16])),
           absl::StrCat(repo, ":v", m, ".", i % 10)}},
         {"sizeBytes", 1000000000 + m * 12345678}});
  }
  return images;
}

json NodeStatus(const std::string& name, int i) {
  return {
      {"capacity",
       {{"cpu", "96"},
        {"memory", "1176345152Ki"},
        {"ephemeral-storage", "7812500000Ki"},
        {"hugepages-1Gi", "0"},
        {"hugepages-2Mi", "0"},
        {"nvidia.com/gpu", "8"},
        {"pods", "110"}}},
      {"allocatable",
       {{"cpu", "95690m"},
        {"memory", "1165625920Ki"},
        {"ephemeral-storage", "7199766732876"},
        {"nvidia.com/gpu", "8"},
        {"pods", "110"}}},
      {"conditions", Conditions()},
      {"addresses",
       {{{"type", "InternalIP"}, {"address", absl::StrCat("10.0.", i % 256, ".7")}},
        {{"type", "Hostname"}, {"address", name}},
        {{"type", "InternalDNS"}, {"address", name + ".eu-west-4.compute.internal"}}}},
      {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
      {"nodeInfo",
       {{"machineID", std::string(32, 'a')},
        {"systemUUID", "ec2a0000-0000-0000-0000-000000000000"},
        {"bootID", "2f6c0000-0000-4000-8000-000000000000"},
        {"kernelVersion", "6.1.0-27-amd64"},
        {"osImage", "Debian GNU/Linux 12 (bookworm)"},
        {"containerRuntimeVersion", "containerd://1.7.22"},
        {"kubeletVersion", "v1.31.2"},
        {"kubeProxyVersion", "v1.31.2"},
        {"operatingSystem", "linux"},
        {"architecture", "amd64"}}},
      {"images", Images(i)}};
}

// A Node object as a real cluster's API server returns it: GPU feature discovery and
// node-feature-discovery labels, kubelet's status with conditions and the node's image
// list (most of its size). GPUs: 8 of one of three models, each with its own free memory
// and utilization: as in a real cluster, nearly every GPU's state is its own (5,000
// nodes: about 40,000 distinct states).
json RealSizedNode(int i) {
  const std::string name = absl::StrFormat("gpu-node-%05d", i);
  return {{"metadata", Metadata(name, i)},
          {"spec", Spec(name, i)},
          {"status", NodeStatus(name, i)}};
}

json NodeList(int nodes) {
  json items = json::array();
  for (int i = 0; i < nodes; ++i) items.push_back(RealSizedNode(i));
  return {{"kind", "NodeList"}, {"apiVersion", "v1"}, {"items", items}};
}

json BenchPod(const std::string& description) {
  return {{"metadata",
           {{"name", "bench"},
            {"namespace", "ml"},
            {"annotations", {{"gpuest.io/description", description}}}}}};
}

// kube-scheduler's body: whole Node objects, or with nodeCacheCapable only their names
// (the extender reads the objects from --extender_nodes_file).
std::string FilterBody(const json& list, const std::string& description,
                       bool names_only) {
  if (!names_only) {
    return json{{"Pod", BenchPod(description)}, {"Nodes", list}, {"NodeNames", nullptr}}
        .dump();
  }
  json names = json::array();
  for (const json& node : list["items"]) names.push_back(node["metadata"]["name"]);
  return json{{"Pod", BenchPod(description)}, {"Nodes", nullptr}, {"NodeNames", names}}
      .dump();
}

// Latencies (ms) of n Estimate calls, one after another.
std::vector<double> EstimateLatencies(const gpuest::Client& client,
                                      const gpuest::v1::EstimateRequest& request, int n,
                                      int* failed) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const absl::Time start = absl::Now();
    auto r = client.Estimate(request);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!r.ok()) ++*failed;
  }
  return ms;
}

// Seconds the server spent in a method's work, and its calls: the sums of its request
// histogram's series on /metrics.
std::pair<double, double> ServerSeconds(int metrics_port, const std::string& method) {
  httplib::Client http("127.0.0.1", metrics_port);
  auto res = http.Get("/metrics");
  if (!res) return {0, 0};
  double seconds = 0, calls = 0;
  const std::string label = absl::StrCat("method=\"", method, "\"");
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(label) == std::string::npos) continue;
    const double value = std::atof(line.substr(line.rfind(' ') + 1).c_str());
    if (line.rfind("gpuest_request_duration_seconds_sum{", 0) == 0) seconds += value;
    if (line.rfind("gpuest_request_duration_seconds_count{", 0) == 0) calls += value;
  }
  return {seconds, calls};
}

// A line of /proc/<pid>/status in MiB: "VmHWM:" (the peak RSS) or "VmRSS:" (now).
long StatusMiB(int pid, const std::string& key) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size())) / 1024;
  }
  return -1;
}

// A CheckPlacement of a candidate beside `jobs` measured jobs with names of 64 bytes: its
// median latency over `calls` and the size of its answer.
std::pair<double, size_t> CheckPlacementAt(gpuest::Client& client, int jobs, int calls) {
  gpuest::v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("h100-80gb");
  for (int i = 0; i < jobs; ++i) {
    gpuest::v1::PlacementJob* job = request.add_existing();
    job->set_name(absl::StrFormat("%064d", i));
    gpuest::v1::MeasuredJob* m = job->mutable_measured();
    m->set_memory_in_use_bytes(64ull << 20);
    m->set_gpu_util(i % 100);
    m->set_source(gpuest::v1::UTILIZATION_SOURCE_NVIDIA_SMI);
  }
  request.mutable_candidate()->set_name("candidate");
  request.mutable_candidate()->mutable_estimate()->set_peak_bytes(1ull << 30);
  std::vector<double> ms;
  size_t bytes = 0;
  for (int i = 0; i < calls; ++i) {
    const absl::Time start = absl::Now();
    auto r = client.CheckPlacement(request);
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!r.ok()) {
      std::fprintf(stderr, "CheckPlacement failed: %s\n", r.status().ToString().c_str());
      return {0, 0};
    }
    bytes = r->ByteSizeLong();
  }
  return {Quantile(ms, 0.5), bytes};
}

// What the parts of the run share: the request, the filter bodies, the server.
struct Bench {
  int nodes = 0;
  gpuest::v1::EstimateRequest request;
  std::string nodes_file, body, names_body;
  std::unique_ptr<gpuest::testing::ServerProcess> server;
  std::unique_ptr<gpuest::Client> client;
};

// The description's request, the Node objects (written to --extender-nodes-file),
// the server and a client of it; 0, or the exit status after saying why.
int StartBench(Bench& b) {
  b.nodes = absl::GetFlag(FLAGS_nodes);
  std::ifstream in(absl::GetFlag(FLAGS_description));
  const std::string description((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  auto request = gpuest::requests::ParseRequestText(description, "description");
  if (!request.ok()) {
    std::fprintf(stderr, "%s\n", request.status().ToString().c_str());
    return 2;
  }
  b.request = std::move(*request);
  b.request.set_gpu("a100-80gb");

  const json list = NodeList(b.nodes);
  b.nodes_file = absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                              "/gpuest-extender-bench-nodes.json");
  std::ofstream(b.nodes_file) << list.dump();
  auto server = gpuest::testing::ServerProcess::Start(
      {"--extender-listen=127.0.0.1:0", "--extender-nodes-file=" + b.nodes_file});
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 2;
  }
  b.server = std::move(*server);
  gpuest::ClientOptions options;
  options.targets = {b.server->target()};
  options.default_deadline = absl::Seconds(10);
  options.max_attempts = 1;
  auto client = gpuest::Client::Create(options);
  if (!client.ok()) return 2;
  b.client = std::move(*client);

  b.body = FilterBody(list, description, /*names_only=*/false);
  b.names_body = FilterBody(list, description, /*names_only=*/true);
  return 0;
}

// Part 2's figures for one kind of filter.
struct FilterTimes {
  std::vector<double> ms;
  double median = 0;
  double work_ms = 0;  // The server's work per call (mean).
  int passed = -1;     // Nodes that passed the last filter (whole objects only).
};

// --filters whole-object filters; false when one failed (said on stderr).
bool TimeWholeFilters(const Bench& b, httplib::Client& http, FilterTimes& t) {
  const int metrics_port = b.server->metrics_port();
  const auto [work_before, calls_before] = ServerSeconds(metrics_port, "extender/filter");
  for (int i = 0; i < absl::GetFlag(FLAGS_filters); ++i) {
    const absl::Time start = absl::Now();
    auto res = http.Post("/filter", b.body, "application/json");
    t.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!res || res->status != 200) {
      std::fprintf(stderr, "filter failed: %s\n",
                   res ? res->body.substr(0, 300).c_str() : "no answer");
      return false;
    }
    t.passed = static_cast<int>(json::parse(res->body)["Nodes"]["items"].size());
  }
  t.median = Quantile(t.ms, 0.5);
  const auto [work_after, calls_after] = ServerSeconds(metrics_port, "extender/filter");
  t.work_ms =
      1e3 * (work_after - work_before) / std::max(1.0, calls_after - calls_before);
  return true;
}

// --filters names-only filters after one that loads the cache; false when one failed.
bool TimeNamesOnlyFilters(const Bench& b, httplib::Client& http, FilterTimes& t) {
  const int metrics_port = b.server->metrics_port();
  double work_before = 0, calls_before = 0;
  for (int i = 0; i < absl::GetFlag(FLAGS_filters) + 1;
       ++i) {  // The first loads the cache.
    if (i == 1) {
      std::tie(work_before, calls_before) =
          ServerSeconds(metrics_port, "extender/filter");
    }
    const absl::Time start = absl::Now();
    auto res = http.Post("/filter", b.names_body, "application/json");
    if (i > 0) t.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!res || res->status != 200) {
      std::fprintf(stderr, "names-only filter failed: %s\n",
                   res ? res->body.substr(0, 300).c_str() : "no answer");
      return false;
    }
  }
  t.median = Quantile(t.ms, 0.5);
  const auto [work_after, calls_after] = ServerSeconds(metrics_port, "extender/filter");
  t.work_ms =
      1e3 * (work_after - work_before) / std::max(1.0, calls_after - calls_before);
  return true;
}

// Part 2's table rows: the filters against one Estimate, and CheckPlacement's.
void PrintFilters(const Bench& b, size_t estimates, double estimate_ms,
                  const FilterTimes& whole, const FilterTimes& names) {
  std::printf("\n| measure | value |\n|---|---|\n");
  std::printf("| one Estimate (gRPC, median of %zu) | %.2f ms |\n", estimates,
              estimate_ms);
  std::printf("| one %d-node filter (HTTP, median of %zu; %d nodes pass) | %.1f ms |\n",
              b.nodes, whole.ms.size(), whole.passed, whole.median);
  std::printf("| of which the server's work (parse, judge, reply; mean) | %.1f ms |\n",
              whole.work_ms);
  std::printf("| filter / Estimate | %.1fx (goal <= 200x); the work alone %.1fx |\n",
              whole.median / estimate_ms, whole.work_ms / estimate_ms);
  std::printf(
      "| the same filter with nodeCacheCapable (names only, %.0f KB; objects from "
      "--extender-nodes-file) | %.1f ms: %.1fx one Estimate (goal <= 40x) |\n",
      b.names_body.size() / 1e3, names.median, names.median / estimate_ms);
  std::printf("| of which the server's work (mean) | %.1f ms: %.1fx (goal <= 20x) |\n",
              names.work_ms, names.work_ms / estimate_ms);
  const auto [ten_ms, ten_bytes] = CheckPlacementAt(*b.client, 10, 50);
  const auto [many_ms, many_bytes] = CheckPlacementAt(*b.client, 256, 50);
  std::printf(
      "| CheckPlacement beside 10 / 256 jobs (64-byte names; median of 50) | %.2f / %.2f "
      "ms: %.1fx (goal <= 10x); answers %.1f / %.1f KB (goal <= 100 KB) |\n",
      ten_ms, many_ms, many_ms / ten_ms, ten_bytes / 1e3, many_bytes / 1e3);
}

// Part 4: the server's RSS over n consecutive whole-object filters; false when one
// failed.
bool MeasureRss(const Bench& b, httplib::Client& http, int n) {
  long first = 0, last = 0;
  for (int i = 0; i < n; ++i) {
    auto res = http.Post("/filter", b.body, "application/json");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "filter %d failed\n", i);
      return false;
    }
    if (i == 0) first = StatusMiB(b.server->pid(), "VmRSS:");
    if (i % 20 == 19)
      std::fprintf(stderr, "%d filters, RSS %ld MiB\n", i + 1,
                   StatusMiB(b.server->pid(), "VmRSS:"));
  }
  last = StatusMiB(b.server->pid(), "VmRSS:");
  std::printf(
      "| server RSS after 1 / %d consecutive whole-object filters | %ld / %ld MiB: "
      "%.2fx (goal within 10 %%) |\n",
      n, first, last, static_cast<double>(last) / std::max(1L, first));
  return true;
}

// Part 3: the gRPC API's p99 beside --concurrent clients posting whole-object filters
// without pause, and how their calls ended.
void MeasureBesideFlood(const Bench& b, const std::vector<double>& alone) {
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::map<int, int> outcomes;  // HTTP status (0: no answer) -> count.
  std::vector<std::thread> flood;
  for (int t = 0; t < absl::GetFlag(FLAGS_concurrent); ++t) {
    flood.emplace_back([&] {
      // kube-scheduler runs on other machines than gpuest; here the flood's clients
      // share the server's cores, so they take the lowest priority, and the figure is
      // the server's and not this program's use of the CPU.
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
      httplib::Client c("127.0.0.1", b.server->extender_port());
      c.set_read_timeout(60, 0);
      c.set_write_timeout(60, 0);
      while (!stop.load()) {
        auto res = c.Post("/filter", b.body, "application/json");
        absl::MutexLock lock(&mu);
        ++outcomes[res ? res->status : 0];
      }
    });
  }
  absl::SleepFor(absl::Seconds(2));
  int failed_beside = 0;
  const std::vector<double> beside = EstimateLatencies(
      *b.client, b.request, absl::GetFlag(FLAGS_estimates), &failed_beside);
  stop = true;
  for (std::thread& t : flood) t.join();
  const double p99_alone = Quantile(alone, 0.99), p99_beside = Quantile(beside, 0.99);
  std::printf("| gRPC Estimate p99 alone | %.2f ms |\n", p99_alone);
  std::printf(
      "| gRPC Estimate p99 beside %d clients posting %d-node filters | %.2f ms "
      "(%.2fx; goal <= 2x; %d of %zu failed) |\n",
      absl::GetFlag(FLAGS_concurrent), b.nodes, p99_beside, p99_beside / p99_alone,
      failed_beside, beside.size());
  std::string ended;
  for (const auto& [status, count] : outcomes) {
    absl::StrAppend(&ended, ended.empty() ? "" : ", ", count, " x ",
                    status == 0 ? std::string("no answer") : std::to_string(status));
  }
  std::printf("| the flood's filter calls | %s |\n", ended.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::signal(SIGPIPE, SIG_IGN);  // A server that refuses mid-body closes the socket.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Bench b;
  if (const int status = StartBench(b); status != 0) return status;
  std::printf("extender at scale: %d Node objects, %.1f MB (%.1f KB each), %u CPUs\n",
              b.nodes, b.body.size() / 1e6, b.body.size() / 1e3 / b.nodes,
              std::thread::hardware_concurrency());

  // 1: one Estimate, the unit.
  int failed = 0;
  EstimateLatencies(*b.client, b.request, 20, &failed);  // Warm-up.
  const std::vector<double> alone =
      EstimateLatencies(*b.client, b.request, absl::GetFlag(FLAGS_estimates), &failed);

  // 2: one filter of whole objects, and of names only.
  httplib::Client http("127.0.0.1", b.server->extender_port());
  http.set_read_timeout(60, 0);
  http.set_write_timeout(60, 0);
  FilterTimes whole, names;
  if (!TimeWholeFilters(b, http, whole) || !TimeNamesOnlyFilters(b, http, names))
    return 1;
  PrintFilters(b, alone.size(), Quantile(alone, 0.5), whole, names);

  // 4: memory over consecutive whole-object filters.
  if (const int n = absl::GetFlag(FLAGS_rss_filters); n > 0 && !MeasureRss(b, http, n)) {
    return 1;
  }
  // 3: the gRPC API beside a flood of such filters.
  MeasureBesideFlood(b, alone);
  std::printf("| server peak RSS | %ld MiB |\n", StatusMiB(b.server->pid(), "VmHWM:"));
  std::remove(b.nodes_file.c_str());
  return 0;
}
