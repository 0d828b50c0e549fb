// File: fuzz_properties.h
//
// What each fuzz target asserts of one input, in one place: the libFuzzer targets
// (*_fuzzer.cc, clang build) abort on a broken property, and the unit test
// fuzz_corpus_test.cc (normal build) replays every seed and every crash found
// (tests/fuzz/regressions/<target>/) through the same functions. OK, or Internal naming
// the property that broke; a crash is a crash in both.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest::fuzz {

// description_json: the text `gpuest estimate` reads (requests/request_files.h): JSON
// ModelDescription / EstimateRequest or a summary table, then the server's validation.
// A refusal must name the input.
absl::Status DescriptionTextProperties(absl::string_view data);

// summary_parser: the torchsummary / torchinfo parsers (requests/summary_parser.h),
// detected and forced. A refusal names the source; every parsed layer has a type.
absl::Status SummaryParserProperties(absl::string_view data);

// request_validation: a binary EstimateRequest (what the server receives) through
// ValidateRequest with the default and with small limits. A refusal is
// InvalidArgument, starts with a field path and is at most 1 KiB long, whatever the
// input's size.
absl::Status RequestValidationProperties(absl::string_view data);

// extender_args: a body as kube-scheduler POSTs it to the extender (ExtenderArgs: Pod,
// Nodes), through what the extender does before any estimate: the parse
// (integrations/kubernetes/extender_args.h: the depth check, then simdjson), each Node's
// GPUs (integrations/kubernetes/kube_nodes.h) and the filter's reply echoing the nodes.
// Never a throw or a crash, whatever the nesting or the bytes; a refusal is
// InvalidArgument; each node's text is an object inside the body, and the reply is JSON.
absl::Status ExtenderArgsProperties(absl::string_view data);

// node_gpus: the node readers on their own (integrations/kubernetes/kube_nodes.h), the
// input taken as the gpuest.io/gpus annotation (JSON inside a string) and as a whole Node
// object: never a throw or a crash, however deep or long; a refusal is InvalidArgument of
// at most 1 KiB naming the node; read GPUs are at most kMaxNodeGpus, each with free at
// most its total where the total is given.
absl::Status NodeGpusProperties(absl::string_view data);

// admission_review: a body as kube-apiserver POSTs it to the admission webhook
// (integrations/kubernetes/admission_review.h), through what the webhook does before
// any estimate: the parse, the response echoing the uid and messages built from the
// pod's text, and the pod patch for the pod's shape. Never a throw or a crash; a
// refusal is InvalidArgument of at most 1 KiB naming AdmissionReview; a parsed pod has
// a uid of at most 128 bytes and at most kMaxPodContainers containers; the response and
// the patch are JSON.
absl::Status AdmissionReviewProperties(absl::string_view data);

}  // namespace gpuest::fuzz
