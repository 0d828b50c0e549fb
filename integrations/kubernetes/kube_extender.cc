#include "integrations/kubernetes/kube_extender.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json_guard.h"
#include "common/sha256.h"
#include "common/units.h"
#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/pod_description.h"
#include "placement/placement_job.h"
#include "placement/placement_reasons.h"
#include "placement/placement_verdict.h"
#include "spdlog/spdlog.h"

namespace gpuest::kubernetes {

// The pod on one GPU model: whether the description may be placed on it (it names no
// other GPU), and the candidate's figures there. Each GPU of that model is then judged
// with arithmetic on these and its state (placement_verdict.h).
struct KubeExtender::OnGpuModel {
  absl::Status named;
  absl::StatusOr<placement::ResolvedJob> candidate;
};

// Nodes passed unjudged for want of their Node object (fail open), said in one log line
// per request when it ends: a names-only filter of 100,000 unknown names must not
// write 100,000 lines.
class UnjudgedNodes {
 public:
  ~UnjudgedNodes() {
    if (count_ == 0) return;
    spdlog::warn("extender: pod {}: {} node(s) passed unjudged, the first {}: {}", pod_,
                 count_, first_, why_);
  }
  void Add(const std::string& pod, const std::string& node, const absl::Status& why) {
    if (count_++ > 0) return;
    pod_ = pod;
    first_ = node;
    why_ = std::string(why.message());
  }

 private:
  size_t count_ = 0;
  std::string pod_, first_, why_;
};

struct KubeExtender::Request {
  std::string body;  // As it arrived (padded for the parser); args.nodes point into it.
  ExtenderArgs args;
  std::optional<v1::EstimateRequest> job;  // nullopt: no annotation, fail open.
  std::string job_key;             // The description text's SHA-256, for the cache.
  absl::Status description_error;  // The annotation is there but malformed.
  std::vector<std::string> names;  // Every candidate node, in request order.
  // Each node's keys: from the body, or for node names only, from the node cache.
  std::vector<std::shared_ptr<const NodeCache::Node>> cached_nodes;
  std::vector<const NodeKeys*> nodes;
  std::vector<absl::Status> node_errors;  // Per node: why its object is unknown.
  UnjudgedNodes unjudged;
  // Per catalog GPU id, once per request (PodOnGpuModel).
  std::map<std::string, OnGpuModel> estimates;
  // The set every node of the request is judged with, taken when the call starts: a
  // reload may replace the current one meanwhile.
  std::shared_ptr<const placement::ModelSet> models;
};

struct KubeExtender::NodeVerdict {
  bool passes = true;
  bool unresolvable = false;
  std::string reason;
  int score = 0;
  absl::Status fatal;  // The description itself is wrong: the whole call's Error.
};

// What a node's GPUs said of the pod, one by one.
struct KubeExtender::GpuTally {
  uint32_t fitting = 0;             // GPUs that take it beside what they hold.
  uint32_t fitting_empty = 0;       // GPUs that would take it empty.
  int score = 0;                    // The best fitting GPU's.
  std::vector<std::string> misses;  // Why each other GPU does not take it.
};

namespace {

// The nvidia-smi-scale utilization class the job's estimate gives, if any.
std::optional<v1::UtilizationEstimate> GractEstimate(const v1::EstimateResponse& r) {
  for (const v1::EstimatorResult& result : r.results()) {
    for (const v1::UtilizationEstimate& u : result.utilization()) {
      if (u.metric() == v1::UTILIZATION_METRIC_GRACT) return u;
    }
  }
  return std::nullopt;
}

int ScoreOf(const placement::GpuJudgement& j) {
  if (!j.fit.fits) return 0;
  if (j.contention.verdict == v1::CONTENTION_VERDICT_BAD) {
    const double speed = std::clamp(j.contention.worst_speed / 0.85, 0.0, 1.0);
    return 1 + static_cast<int>(std::lround(3 * speed));
  }
  const double full =
      j.fit.capacity_bytes == 0
          ? 1.0
          : std::clamp(1.0 - static_cast<double>(j.fit.headroom_bytes) /
                                 static_cast<double>(j.fit.capacity_bytes),
                       0.0, 1.0);
  return 5 + static_cast<int>(std::lround(5 * full));
}

// Why a node whose GPUs fit fewer than the needed ranks does not take the pod.
std::string NoRoomReason(uint32_t needed, uint32_t fitting, size_t gpus,
                         const std::vector<std::string>& misses) {
  return needed == 1
             ? absl::StrCat("gpuest: no GPU of the node takes the pod; ",
                            absl::StrJoin(misses, "; "))
             : absl::StrCat(
                   "gpuest: the pod asks for ", needed, " GPUs (", kGpuResource,
                   "), each to take one rank; ", fitting, " of the node's ", gpus, " do",
                   misses.empty() ? "" : absl::StrCat("; ", absl::StrJoin(misses, "; ")));
}

}  // namespace

std::string ReplyText(const nlohmann::json& reply) {
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<KubeExtender::Request> KubeExtender::ParseArgs(std::string body) {
  Request request;
  request.models = models_.Current();
  request.body = std::move(body);
  absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(request.body);
  if (!args.ok()) return args.status();
  request.args = *std::move(args);
  if (request.args.names_only) {
    request.names = request.args.names;
    request.cached_nodes.reserve(request.names.size());
    // The cache's nodes as they are now, for the whole request (one stat, one lock).
    const absl::StatusOr<std::shared_ptr<const NodeCache::Nodes>> cache =
        node_cache_.Current();
    for (const std::string& name : request.names) {
      absl::StatusOr<std::shared_ptr<const NodeCache::Node>> node =
          cache.ok() ? node_cache_.Find(**cache, name) : cache.status();
      request.cached_nodes.push_back(node.ok() ? *node : nullptr);
      request.nodes.push_back(node.ok() ? &(*node)->keys : nullptr);
      request.node_errors.push_back(node.status());
    }
  } else {
    for (const ExtenderNode& node : request.args.nodes) {
      request.names.push_back(node.keys.name);
      request.nodes.push_back(&node.keys);
      request.node_errors.push_back(absl::OkStatus());
    }
  }

  if (!request.args.description) return request;
  absl::StatusOr<PodJob> job =
      ReadPodJob(*request.args.description, options_.descriptions_dir,
                 DescriptionWhere(absl::StrCat("pod ", request.args.pod)));
  if (job.ok()) {
    request.job = std::move(job->request);
    // Collision-resistant: a pod's annotation must never be answered with another's.
    request.job_key = common::Sha256Hex(job->text);
  } else {
    request.description_error = job.status();
  }
  return request;
}

absl::StatusOr<v1::EstimatedJob> KubeExtender::CandidateFigures(
    const std::shared_ptr<const placement::ModelSet>& models,
    const v1::EstimateRequest& job, const std::string& job_key, const std::string& gpu,
    const common::WorkDeadline& deadline) {
  const std::string key = absl::StrCat(gpu, "|", job_key);
  {
    absl::MutexLock lock(&cache_mu_);
    // Figures made with other models than these (before a reload) are not reused.
    if (auto it = cache_.find(key);
        it != cache_.end() && it->second.models.lock() == models) {
      return it->second.figures;
    }
  }
  v1::EstimateRequest request = job;
  request.set_gpu(gpu);
  absl::StatusOr<v1::EstimateResponse> estimate =
      models->engine().Estimate(request, deadline);
  if (!estimate.ok()) return estimate.status();
  v1::EstimatedJob figures;
  // The requirement: the recommendation's memory_bytes, an EstimatedJob's peak_bytes.
  figures.set_peak_bytes(estimate->recommendation().memory_bytes());
  if (auto util = GractEstimate(*estimate)) *figures.mutable_utilization() = *util;
  absl::MutexLock lock(&cache_mu_);
  if (cache_.size() >= kEstimateCacheEntries) cache_.clear();
  cache_[key] = {models, figures};
  return figures;
}

const KubeExtender::OnGpuModel& KubeExtender::PodOnGpuModel(
    Request& request, const core::GpuProfile& profile,
    const common::WorkDeadline& deadline) {
  if (auto cached = request.estimates.find(profile.id);
      cached != request.estimates.end()) {
    return cached->second;
  }
  // A description naming another GPU is refused for this one (the same rule as
  // gpuest.v1.Placement's), never silently replaced.
  OnGpuModel on{placement::CheckDescriptionGpu(
                    *request.job, absl::StrCat("annotation ", kDescriptionAnnotation),
                    profile, request.models->registry().gpus()),
                absl::UnknownError("not estimated")};
  if (on.named.ok()) {
    absl::StatusOr<v1::EstimatedJob> figures = CandidateFigures(
        request.models, *request.job, request.job_key, profile.id, deadline);
    if (figures.ok()) {
      v1::PlacementJob job;
      job.set_name(request.args.pod);
      *job.mutable_estimate() = *std::move(figures);
      on.candidate =
          placement::ResolveJob(job, "candidate", profile, request.models->engine(),
                                request.models->contention(), deadline);
    } else {
      on.candidate = figures.status();
    }
  }
  return request.estimates.emplace(profile.id, std::move(on)).first->second;
}

KubeExtender::NodeVerdict KubeExtender::JudgeNode(Request& request, size_t i,
                                                  const common::WorkDeadline& deadline) {
  NodeVerdict verdict;
  // Once the call's deadline has passed, this node and those after it go unjudged.
  if (absl::Status s = deadline.Check(); !s.ok()) {
    verdict.fatal = absl::Status(
        s.code(), absl::StrCat("gpuest: stopped at the extender's deadline "
                               "(--extender_timeout) after judging ",
                               i, " of ", request.names.size(), " nodes: ", s.message()));
    return verdict;
  }
  const std::string& name = request.names[i];
  if (!request.node_errors[i].ok()) {
    // Fail open: with no Node object there is nothing to judge; the log says so, once
    // per request.
    request.unjudged.Add(request.args.pod, name, request.node_errors[i]);
    return verdict;
  }
  // A cached node's GPUs were read when the cache file was.
  const absl::StatusOr<std::vector<NodeGpu>> gpus = request.args.names_only
                                                        ? request.cached_nodes[i]->gpus
                                                        : NodeGpus(*request.nodes[i]);
  if (!gpus.ok()) {
    verdict.passes = false;
    verdict.unresolvable = true;
    verdict.reason = absl::StrCat("gpuest: ", gpus.status().message());
    return verdict;
  }
  if (gpus->empty()) return verdict;  // No GPU data: gpuest has no opinion.

  GpuTally tally;
  verdict.fatal = TallyGpus(request, *gpus, deadline, tally);
  verdict.score = tally.score;
  if (!verdict.fatal.ok()) return verdict;
  // Each of the pod's GPUs takes one rank of its job, with its requirement there.
  const uint32_t needed = std::max<uint32_t>(1, request.args.gpus_requested);
  if (tally.fitting >= needed) return verdict;
  verdict.passes = false;
  verdict.unresolvable = tally.fitting_empty < needed;
  verdict.reason = NoRoomReason(needed, tally.fitting, gpus->size(), tally.misses);
  return verdict;
}

absl::Status KubeExtender::TallyGpus(Request& request, const std::vector<NodeGpu>& gpus,
                                     const common::WorkDeadline& deadline,
                                     GpuTally& tally) {
  const core::GpuProfiles& catalog = request.models->registry().gpus();
  // A node's GPUs are nearly always of one model: looked up in the catalog once.
  const std::string* last_model = nullptr;
  const core::GpuProfile* last_profile = nullptr;
  for (const NodeGpu& gpu : gpus) {
    const core::GpuProfile* profile = last_model != nullptr && *last_model == gpu.model
                                          ? last_profile
                                          : catalog.Find(gpu.model);
    last_model = &gpu.model;
    last_profile = profile;
    if (profile == nullptr) {
      tally.misses.push_back(absl::StrCat("GPU ", gpu.index, ": unknown model '",
                                          gpu.model, "' (known: ", catalog.KnownIds(),
                                          ")"));
      continue;
    }
    if (absl::Status s = TallyGpu(request, gpu, *profile, deadline, tally); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status KubeExtender::TallyGpu(Request& request, const NodeGpu& gpu,
                                    const core::GpuProfile& profile,
                                    const common::WorkDeadline& deadline,
                                    GpuTally& tally) {
  const OnGpuModel& on = PodOnGpuModel(request, profile, deadline);
  if (!on.named.ok()) {
    tally.misses.push_back(absl::StrCat("GPU ", gpu.index, ": ", on.named.message()));
    return absl::OkStatus();
  }
  if (!on.candidate.ok()) {
    return absl::Status(
        on.candidate.status().code(),
        absl::StrCat("pod ", request.args.pod, ": ", on.candidate.status().message()));
  }
  const uint64_t total = gpu.total_bytes > 0 ? gpu.total_bytes : profile.memory_bytes;
  const uint64_t free = gpu.free_reported ? gpu.free_bytes : total;
  if (free > total) {  // Only where the catalog's total stands in for the node's.
    tally.misses.push_back(absl::StrCat("GPU ", gpu.index, ": freeMiB above ", profile.id,
                                        "'s total memory"));
    return absl::OkStatus();
  }
  const placement::GpuJudgement judged = placement::JudgeReportedGpu(
      request.models->contention(), on.candidate->requirement_bytes, on.candidate->util,
      total, free,
      gpu.util_percent ? placement::MeasuredByNvidiaSmi(*gpu.util_percent)
                       : placement::UnknownUtilization());
  if (judged.fit.candidate_bytes <= total) ++tally.fitting_empty;
  if (judged.fit.fits) {
    ++tally.fitting;
    tally.score = std::max(tally.score, ScoreOf(judged));
  } else {
    tally.misses.push_back(
        placement::GpuShortWords(gpu.index, profile.id, gpu.free_reported, judged.fit));
  }
  return absl::OkStatus();
}

common::HttpReply KubeExtender::Filter(std::string body,
                                       const common::WorkDeadline& deadline) {
  absl::StatusOr<Request> request = ParseArgs(std::move(body));
  nlohmann::json result = {{"Nodes", nullptr},
                           {"NodeNames", nullptr},
                           {"FailedNodes", nlohmann::json::object()},
                           {"FailedAndUnresolvableNodes", nlohmann::json::object()},
                           {"Error", ""}};
  if (!request.ok()) {
    result["Error"] = std::string(request.status().message());
    return {400, ReplyText(result), request.status().code()};
  }
  if (!request->description_error.ok()) {
    result["Error"] = std::string(request->description_error.message());
    return {200, ReplyText(result), request->description_error.code()};
  }
  std::vector<bool> passes(request->names.size(), true);
  if (request->job) {
    for (size_t i = 0; i < request->names.size(); ++i) {
      NodeVerdict verdict = JudgeNode(*request, i, deadline);
      if (!verdict.fatal.ok()) {
        result["Error"] = std::string(verdict.fatal.message());
        return {200, ReplyText(result), verdict.fatal.code()};
      }
      passes[i] = verdict.passes;
      if (!verdict.passes) {
        result[verdict.unresolvable ? "FailedAndUnresolvableNodes" : "FailedNodes"]
              [request->names[i]] = verdict.reason;
      }
    }
  }
  if (request->args.names_only) {
    nlohmann::json names = nlohmann::json::array();
    for (size_t i = 0; i < passes.size(); ++i)
      if (passes[i]) names.push_back(request->names[i]);
    result["NodeNames"] = std::move(names);
    return {200, ReplyText(result)};
  }
  // The passing Node objects go back as their text in the body (valid UTF-8 JSON, as
  // the parser checked), not rebuilt: a cluster's nodes are tens of MB.
  std::vector<std::string_view> passing;
  for (size_t i = 0; i < passes.size(); ++i)
    if (passes[i]) passing.push_back(request->args.nodes[i].json);
  return {200, FilterReplyText(result, request->args.node_list_json,
                               request->args.items_json, passing)};
}

std::string FilterReplyText(const nlohmann::json& result, std::string_view node_list,
                            std::string_view items,
                            const std::vector<std::string_view>& nodes) {
  nlohmann::json rest = result;
  rest.erase("Nodes");
  const std::string text = ReplyText(rest);  // {"Error":...,...}: a non-empty object.
  // Where items lies in node_list; a view from elsewhere (none given) makes a bare list.
  const bool inside = !node_list.empty() && items.data() >= node_list.data() &&
                      items.data() + items.size() <= node_list.data() + node_list.size();
  const std::string_view before =
      inside ? node_list.substr(0, items.data() - node_list.data())
             : std::string_view(R"({"apiVersion":"v1","kind":"NodeList","items":)");
  const std::string_view after =
      inside ? node_list.substr(items.data() + items.size() - node_list.data())
             : std::string_view("}");
  size_t size = text.size() + before.size() + after.size() + 16;
  for (std::string_view node : nodes) size += node.size() + 1;
  std::string out;
  out.reserve(size);
  out += R"({"Nodes":)";
  out += before;
  out += '[';
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += ',';
    out += nodes[i];
  }
  out += ']';
  out += after;
  out += ',';
  out.append(text, 1, std::string::npos);  // The rest, without its opening brace.
  return out;
}

common::HttpReply KubeExtender::Prioritize(std::string body,
                                           const common::WorkDeadline& deadline) {
  absl::StatusOr<Request> request = ParseArgs(std::move(body));
  // HostPriorityList has no error field: kube-scheduler logs a non-200 and ignores this
  // extender's scores for the pod (fail open).
  auto refuse = [](const absl::Status& status) -> common::HttpReply {
    return {400, ReplyText(nlohmann::json{{"Error", std::string(status.message())}}),
            status.code()};
  };
  if (!request.ok()) return refuse(request.status());
  if (!request->description_error.ok()) return refuse(request->description_error);
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < request->names.size(); ++i) {
    int score = 0;
    if (request->job) {
      NodeVerdict verdict = JudgeNode(*request, i, deadline);
      if (!verdict.fatal.ok()) return refuse(verdict.fatal);
      score = std::clamp(verdict.score, 0, kMaxExtenderPriority);
    }
    list.push_back({{"Host", request->names[i]}, {"Score", score}});
  }
  return {200, ReplyText(list)};
}

}  // namespace gpuest::kubernetes
