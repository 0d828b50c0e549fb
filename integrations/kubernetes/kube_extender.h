// File: kube_extender.h
//
// A Kubernetes scheduler extender (k8s.io/kube-scheduler/extender/v1): kube-scheduler
// POSTs ExtenderArgs {Pod, Nodes (a v1.NodeList) or NodeNames} to <urlPrefix>/filter
// and <urlPrefix>/prioritize, and reads back ExtenderFilterResult {Nodes or NodeNames,
// FailedNodes, FailedAndUnresolvableNodes, Error} and HostPriorityList [{Host, Score}]
// with scores 0..10. Field names are Go's, unchanged (the types have no json tags).
//
// The pod's job comes from its annotation gpuest.io/description, read as the admission
// webhook reads it (pod_description.h). Nothing here calls the API server. The node's
// GPUs: kube_nodes.h.
//
// It fails open: a pod without the annotation passes every node with equal scores; a
// malformed description is an Error (with ignorable: true, kube-scheduler then
// schedules as if there were no extender), never a crash.
//
// Filter: a node passes when one of its GPUs fits the job's requirement beside
// what is already there: the job is estimated once per GPU model, and each GPU judged
// with the placement's arithmetic (placement_verdict.h, what CheckPlacement answers for
// that GPU); a node whose GPUs are too
// small even when empty, or other than a GPU the description names, is
// FailedAndUnresolvable (preempting cannot help), with the reason per GPU.
// Prioritize, per node its best GPU: 5..10 for a fit with acceptable contention (the
// fuller the GPU after placing, the higher: packing), 1..4 for a fit with a bad
// contention verdict (by the worst predicted speed), 0 for no fit or no GPU data.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/http_reply.h"
#include "common/work_deadline.h"
#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/extender_options.h"
#include "integrations/kubernetes/kube_nodes.h"
#include "placement/model_set.h"

namespace gpuest::kubernetes {

inline constexpr int kMaxExtenderPriority = 10;  // extender/v1 MaxExtenderPriority.

// A reply's text. Node objects and reasons echo what the request carried: bytes that
// are not UTF-8 become U+FFFD rather than an exception (a bare HTTP 500).
std::string ReplyText(const nlohmann::json& reply);

// A filter's ExtenderFilterResult: result's fields (NodeNames, FailedNodes, ..., Error;
// its Nodes ignored) and Nodes: the request's NodeList text (node_list, whose items
// array is the view items inside it) with its items replaced by the given Node texts.
std::string FilterReplyText(const nlohmann::json& result, std::string_view node_list,
                            std::string_view items,
                            const std::vector<std::string_view>& nodes);

class KubeExtender {
 public:
  // Each call judges with the set models holds at its start; models must outlive this
  // object.
  KubeExtender(const placement::ModelSetSource& models, const ExtenderOptions& options)
      : models_(models), options_(options), node_cache_(options.nodes_file) {}

  // Bodies of the POSTs; thread-safe. A body that is not an ExtenderArgs is 400. The
  // work stops at deadline: the answer is then an Error naming it.
  // body is taken (parsing pads it; the reply echoes nodes from it): give a copy made
  // with PaddedCopy (extender_args.h) to spare the parser a second one.
  common::HttpReply Filter(std::string body, const common::WorkDeadline& deadline);
  common::HttpReply Prioritize(std::string body, const common::WorkDeadline& deadline);

 private:
  struct Request;
  struct OnGpuModel;
  struct NodeVerdict;
  struct GpuTally;

  absl::StatusOr<Request> ParseArgs(std::string body);
  // Node i of the request; request's estimate cache fills as GPU models are met. Once
  // deadline has passed, a fatal verdict that says so.
  NodeVerdict JudgeNode(Request& request, size_t i, const common::WorkDeadline& deadline);
  // A node's GPUs, each judged into tally. An error is the whole call's (the pod's job
  // could not be worked out).
  absl::Status TallyGpus(Request& request, const std::vector<NodeGpu>& gpus,
                         const common::WorkDeadline& deadline, GpuTally& tally);
  absl::Status TallyGpu(Request& request, const NodeGpu& gpu,
                        const core::GpuProfile& profile,
                        const common::WorkDeadline& deadline, GpuTally& tally);
  // The pod on one GPU model: whether its description may be placed there and its
  // figures estimated for it; worked out once per GPU model in a request (kept in
  // request), so that each GPU is then judged by arithmetic alone.
  const OnGpuModel& PodOnGpuModel(Request& request, const core::GpuProfile& profile,
                                  const common::WorkDeadline& deadline);
  // The job's requirement and utilization class on a catalog GPU, estimated with
  // models. kube-scheduler asks filter and then prioritize for the same pod: the
  // estimate is made once and kept, keyed by GPU and the description text's SHA-256,
  // and reused only while the same set serves (not after a reload).
  absl::StatusOr<v1::EstimatedJob> CandidateFigures(
      const std::shared_ptr<const placement::ModelSet>& models,
      const v1::EstimateRequest& job, const std::string& job_key, const std::string& gpu,
      const common::WorkDeadline& deadline);

  static constexpr size_t kEstimateCacheEntries = 1024;  // Then cleared, and refilled.
  struct CachedFigures {
    // The set they were made with; weak, so that the cache keeps no old set alive
    // after a reload.
    std::weak_ptr<const placement::ModelSet> models;
    v1::EstimatedJob figures;
  };

  const placement::ModelSetSource& models_;
  const ExtenderOptions options_;
  NodeCache node_cache_;
  absl::Mutex cache_mu_;
  std::map<std::string, CachedFigures> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace gpuest::kubernetes
