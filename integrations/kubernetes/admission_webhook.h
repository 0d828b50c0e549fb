// File: admission_webhook.h
//
// A mutating admission webhook that sizes every GPU pod when it is created, before any
// scheduler sees it: kube-apiserver POSTs an AdmissionReview (admission_review.h) for
// each pod the MutatingWebhookConfiguration selects (deploy/kubernetes/
// admission-webhook.yaml), and gets back a JSON Patch that sets the configured
// scheduler's memory request and gpuest's annotations: the same patch `gpuest
// pod-patch` prints for the same pod (pod_patch.h).
//
// A resource.k8s.io/v1 ResourceClaim or ResourceClaimTemplate created with
// gpuest.io/description (a template's in spec.metadata, which its claims carry) has each
// request of a configured device class (an `exactly` of dra_classes) replaced by one
// alternative per GPU model the job fits, in RankGpus's order, with that model's
// requirement (dra_claim.h, the same patch `gpuest claim` applies); other requests, and
// requests already a firstAvailable list, are left as they are.
//
// The failure policy, as Kubernetes defines it:
// - a pod without gpuest.io/description, an operation other than CREATE, or an object
//   other than a Pod is allowed untouched, without estimating;
// - a description that is refused (it names the field), or a request of the user's
//   that is not a whole number, is allowed: false with the reason; unless the pod says
//   gpuest.io/on-error: allow, when it is admitted unsized, with a warning saying why
//   and the annotation gpuest.io/not-sized;
// - when the server cannot size it (its deadline passed, overloaded) the answer is an
//   HTTP error, and the configuration's failurePolicy decides (a pod saying
//   gpuest.io/on-error: allow is admitted unsized instead);
// - a body that is not an AdmissionReview is HTTP 400.
#pragma once

#include <string>

#include "common/http_reply.h"
#include "common/work_deadline.h"
#include "integrations/kubernetes/dra_claim.h"
#include "integrations/kubernetes/pod_patch.h"
#include "placement/model_set.h"

namespace gpuest::kubernetes {

struct AdmissionPod;  // admission_review.h

// The annotation an unsized pod carries: why it was not sized.
inline constexpr char kNotSizedAnnotation[] = "gpuest.io/not-sized";

struct AdmissionOptions {
  SharingScheduler scheduler = SharingScheduler::kHami;
  // The GPU a description is sized for when it names none (gpuest pod-patch --gpu);
  // empty: the catalog's default.
  std::string gpu;
  // Mounted ConfigMaps, for a description that names one (pod_description.h).
  std::string descriptions_dir;
  // The DRA device classes whose claims' requests are sized (dra_claim.h).
  DraClasses dra_classes = BuiltInDraClasses();
};

class AdmissionWebhook {
 public:
  // Each call sizes with the set models holds at its start; models must outlive this.
  AdmissionWebhook(const placement::ModelSetSource& models, AdmissionOptions options)
      : models_(models), options_(std::move(options)) {}

  // The body of one POST /mutate; thread-safe. The work stops at deadline.
  common::HttpReply Mutate(const std::string& body,
                           const common::WorkDeadline& deadline) const;

 private:
  // A ResourceClaim's or ResourceClaimTemplate's requests sized; object names it in
  // messages; a failure is answered by the failure policy, admitted unsized when the
  // object asked (admit_unsized).
  common::HttpReply MutateClaim(const AdmissionPod& claim, const std::string& object,
                                const std::string& description,
                                const common::WorkDeadline& deadline,
                                bool admit_unsized) const;
  // A pod sized: its memory request and gpuest's annotations (pod_patch.h); object and
  // admit_unsized as for a claim.
  common::HttpReply MutatePod(const AdmissionPod& pod, const std::string& object,
                              const std::string& description,
                              const common::WorkDeadline& deadline,
                              bool admit_unsized) const;

  const placement::ModelSetSource& models_;
  const AdmissionOptions options_;
};

}  // namespace gpuest::kubernetes
