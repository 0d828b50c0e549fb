#include "client/cli/render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/model_family.h"
#include "common/units.h"
#include "google/protobuf/util/json_util.h"

namespace gpuest::cli {
namespace {

// Enum value names without their type prefix, lower-cased: "cnn", "classifier".
std::string ShortName(const std::string& full, absl::string_view prefix) {
  std::string name(absl::StripPrefix(full, prefix));
  return absl::AsciiStrToLower(name);
}

std::string KindName(v1::EstimatorKind kind) {
  return ShortName(v1::EstimatorKind_Name(kind), "ESTIMATOR_KIND_");
}

// Upper-case as the enum spells it, without the prefix: "OUT_OF_DISTRIBUTION".
std::string WarningName(v1::WarningCode code) {
  return std::string(absl::StripPrefix(v1::WarningCode_Name(code), "WARNING_CODE_"));
}

// "\nwarnings:\n  CODE [estimator]: message\n..."; empty for none.
std::string WarningLines(
    const google::protobuf::RepeatedPtrField<v1::Warning>& warnings) {
  if (warnings.empty()) return "";
  std::string out = "\nwarnings:\n";
  for (const v1::Warning& w : warnings) {
    absl::StrAppend(
        &out, "  ", WarningName(w.code()),
        w.estimator_id().empty() ? "" : absl::StrCat(" [", w.estimator_id(), "]"), ": ",
        w.message(), "\n");
  }
  return out;
}

std::string MetricName(v1::UtilizationMetric metric) {
  return ShortName(v1::UtilizationMetric_Name(metric), "UTILIZATION_METRIC_");
}

// Left-aligned columns, two spaces apart.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string BinText(const v1::MemoryBin& bin) {
  if (bin.upper_bytes() == 0) return absl::StrCat("> ", FormatBytes(bin.lower_bytes()));
  return absl::StrCat(FormatBytes(bin.lower_bytes()), " - ",
                      FormatBytes(bin.upper_bytes()));
}

std::string UtilizationText(const v1::UtilizationEstimate& u) {
  const int k = u.predicted_class();
  std::string range = "?";
  if (k >= 0 && k + 1 < u.bin_edges_size()) {
    range = absl::StrFormat("[%.2g, %.2g)", u.bin_edges(k), u.bin_edges(k + 1));
  }
  const double p = k >= 0 && k < u.probabilities_size() ? u.probabilities(k) : 0;
  return absl::StrFormat("%s %s p=%.2f", MetricName(u.metric()), range, p);
}

// Where one result's upper bound goes, largest part first, with shares.
std::string BreakdownText(const v1::EstimatorResult& r) {
  const v1::MemoryBreakdown& b = r.memory().breakdown();
  std::vector<std::pair<uint64_t, std::string>> parts = {
      {b.weights_bytes(), "weights"},
      {b.gradients_bytes(), "gradients"},
      {b.optimizer_state_bytes(), "optimizer state"},
      {b.inputs_bytes(), "inputs"},
      {b.activations_bytes(), "activations"},
      {b.temporaries_bytes(), "temporaries"},
      {b.workspaces_bytes(), "cuDNN workspaces"},
      {b.fragmentation_bytes(), "fragmentation"},
      {b.context_bytes(), "context"},
      {b.calibration_bytes(), "calibration"}};
  uint64_t total = 0;
  for (const auto& [bytes, name] : parts) total += bytes;
  if (total == 0) return "";
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<std::string>> rows;
  for (const auto& [bytes, name] : parts) {
    rows.push_back({absl::StrCat("  ", name), FormatBytes(bytes),
                    absl::StrFormat("%5.1f %%", 100.0 * bytes / total)});
  }
  const char* constants = "";
  if (r.memory().gpu_constants() == v1::GPU_CONSTANTS_CALIBRATED) {
    constants = ", calibrated GPU constants";
  } else if (r.memory().gpu_constants() == v1::GPU_CONSTANTS_ASSUMED) {
    constants = ", assumed GPU constants";
  }
  std::string peaks;
  if (r.memory().reserved_peak_bytes() > 0) {
    peaks = absl::StrCat("simulated step (", r.estimator_id(), "): max_memory_allocated ",
                         FormatBytes(r.memory().allocated_peak_bytes()),
                         ", max_memory_reserved ",
                         FormatBytes(r.memory().reserved_peak_bytes()),
                         " (PyTorch's figures: no context, no calibration)\n");
  }
  return absl::StrCat("\nbreakdown (", r.estimator_id(), ", ", FormatBytes(total),
                      constants, "):\n", Table(rows), peaks);
}

// The recommended estimator's transient, if it has one: how far the job reaches
// uncapped, beside the requirement.
std::string TransientLine(const v1::EstimateResponse& response,
                          const v1::Recommendation& rec) {
  for (const v1::EstimatorResult& r : response.results()) {
    if (r.estimator_id() != rec.estimator_id() || !r.memory().has_transient()) continue;
    const v1::MemoryTransient& t = r.memory().transient();
    return absl::StrCat(
        "transient (cuDNN benchmark search): uncapped, ", t.when(), " can reach ",
        FormatBytes(t.reach_bytes()), " (the card's free memory)",
        t.declared() ? ""
                     : "; assumed: the description does not say whether the job "
                       "sets cudnn.benchmark",
        "\n");
  }
  return "";
}

std::string CapLine(const v1::MemoryCap& cap) {
  std::string fraction =
      cap.per_process_memory_fraction() > 0
          ? absl::StrFormat("torch.cuda.set_per_process_memory_fraction(%.3f)",
                            cap.per_process_memory_fraction())
          : std::string("torch.cuda.set_per_process_memory_fraction (name a --gpu)");
  return absl::StrCat(
      "cap: ", cap.needed() ? "NEEDED on a shared GPU" : "not needed (no transient)",
      ": HAMi nvidia.com/gpumem: ", cap.hami_gpumem_mib(), ", or ", fraction,
      ", or torch.backends.cudnn.benchmark = False\n");
}

// What the allocator's cache release and retry does on the fit's GPU, as the fit
// line's ending; empty when the recommended estimator does not say.
std::string AllocatorRetryText(v1::AllocatorRetry retry) {
  switch (retry) {
    case v1::ALLOCATOR_RETRY_NOT_NEEDED:
      return "; allocator retry: not needed";
    case v1::ALLOCATOR_RETRY_SAVES_IT:
      return "; allocator retry: SAVES IT (the step completes in simulation only after "
             "the allocator empties its cache and retries: slower steps, no margin)";
    case v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT:
      return "; allocator retry: does not save it (out of memory even after the "
             "allocator empties its cache)";
    default:
      return "";
  }
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= common::kGiB)
    return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / common::kGiB);
  if (bytes >= common::kMiB)
    return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / common::kMiB);
  if (bytes >= common::kKiB)
    return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / common::kKiB);
  return absl::StrCat(bytes, " B");
}

namespace {

// A headroom: "-1.50 GiB" when short.
std::string FormatSignedBytes(int64_t bytes) {
  if (bytes >= 0) return FormatBytes(static_cast<uint64_t>(bytes));
  return absl::StrCat("-", FormatBytes(static_cast<uint64_t>(-(bytes + 1)) + 1));
}

// One row per estimator: its memory (the predicted bin's range for a classifier), its
// upper bound, confidence, latency and basis.
std::string ResultsTable(const v1::EstimateResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"ESTIMATOR", "KIND", "MEMORY", "UPPER", "CONF", "TIME", "BASIS"}};
  for (const v1::EstimatorResult& r : response.results()) {
    const v1::MemoryEstimate& m = r.memory();
    std::string memory = m.point_bytes() ? FormatBytes(m.point_bytes()) : "-";
    std::string upper = m.upper_bytes() ? FormatBytes(m.upper_bytes()) : "-";
    if (m.bins_size() > 0 && m.predicted_bin() >= 0 &&
        m.predicted_bin() < m.bins_size()) {
      memory = BinText(m.bins(m.predicted_bin()));
    }
    rows.push_back({r.estimator_id(), KindName(r.kind()), memory, upper,
                    absl::StrFormat("%.2f", r.confidence()),
                    absl::StrCat(r.latency_us(), " us"), r.basis()});
  }
  return Table(rows);
}

// "utilization (estimator): ..." for each estimator that predicts it.
std::string UtilizationLines(const v1::EstimateResponse& response) {
  std::string out;
  for (const v1::EstimatorResult& r : response.results()) {
    if (r.utilization().empty()) continue;
    std::vector<std::string> parts;
    for (const auto& u : r.utilization()) parts.push_back(UtilizationText(u));
    absl::StrAppend(&out, "utilization (", r.estimator_id(),
                    "): ", absl::StrJoin(parts, "; "), "\n");
  }
  return out;
}

// Each estimator's breakdown and how often its upper bound held.
std::string BreakdownsAndBounds(const v1::EstimateResponse& response) {
  std::string out;
  for (const v1::EstimatorResult& r : response.results()) {
    if (r.memory().has_breakdown()) absl::StrAppend(&out, BreakdownText(r));
    for (const v1::BoundValidation& v : r.memory().upper_validation()) {
      absl::StrAppendFormat(&out,
                            "upper bound (%s) held on %.1f %% of %d %s (%.1f %% also "
                            "within 1.2x; fitted for %.0f %%)\n",
                            r.estimator_id(), 100 * v.safe_share(), v.runs(),
                            v.population(), 100 * v.safe_and_tight_share(),
                            100 * v.target_safe_share());
    }
  }
  return out;
}

// What to reserve, the transient, the cap and the fit; empty without a recommendation.
std::string RecommendationLines(const v1::EstimateResponse& response) {
  if (!response.has_recommendation()) return "";
  const v1::Recommendation& rec = response.recommendation();
  std::string out = absl::StrCat("\nrecommended: ", FormatBytes(rec.memory_bytes()),
                                 " to reserve: the requirement (", rec.basis(), ")\n");
  absl::StrAppend(&out, TransientLine(response, rec));
  if (rec.has_cap()) absl::StrAppend(&out, CapLine(rec.cap()));
  if (rec.has_fit()) {
    const v1::GpuFit& fit = rec.fit();
    const uint64_t headroom = static_cast<uint64_t>(std::abs(fit.headroom_bytes()));
    absl::StrAppend(&out, "fits ", fit.gpu(), " (", FormatBytes(fit.capacity_bytes()),
                    "): ", fit.fits() ? "yes" : "NO", ", ",
                    fit.fits() ? "headroom " : "short by ", FormatBytes(headroom),
                    AllocatorRetryText(fit.allocator_retry()), "\n");
  }
  return out;
}

}  // namespace

std::string RenderEstimate(const v1::EstimateResponse& response,
                           const std::string& model_name, int64_t batch_size) {
  std::string out = absl::StrCat("model ", model_name.empty() ? "(unnamed)" : model_name,
                                 " (", common::FamilyName(response.family()));
  if (batch_size > 0) absl::StrAppend(&out, ", batch ", batch_size);
  absl::StrAppend(&out, ")  models ", response.models_version(), "\n\n");
  absl::StrAppend(&out, ResultsTable(response), UtilizationLines(response),
                  BreakdownsAndBounds(response), RecommendationLines(response),
                  WarningLines(response.warnings()));
  absl::StrAppend(&out, "\nserver latency: ", response.server_latency_us(), " us\n");
  return out;
}

std::string RenderEstimators(const v1::ListEstimatorsResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "KIND", "FAMILY", "VERSION", "DEVICE", "TARGETS", "HELD-OUT METRICS"}};
  for (const v1::EstimatorInfo& e : response.estimators()) {
    std::vector<std::string> targets;
    if (e.estimates_memory()) targets.push_back("memory");
    for (int m : e.utilization_metrics()) {
      targets.push_back(MetricName(static_cast<v1::UtilizationMetric>(m)));
    }
    std::vector<std::pair<std::string, double>> metrics(e.training_metrics().begin(),
                                                        e.training_metrics().end());
    std::sort(metrics.begin(), metrics.end());
    std::string metric_text =
        absl::StrJoin(metrics, " ", [](std::string* o, const auto& kv) {
          absl::StrAppendFormat(o, "%s=%.3g", kv.first, kv.second);
        });
    // A server from before the device field says none.
    rows.push_back({e.id(), KindName(e.kind()), common::FamilyName(e.family()),
                    e.version(), e.device().empty() ? "-" : e.device(),
                    absl::StrJoin(targets, ","),
                    metric_text.empty() ? "-" : metric_text});
  }
  return absl::StrCat(Table(rows), "\nmodels ", response.models_version(), "\n");
}

std::string RenderPlacement(const v1::CheckPlacementResponse& response) {
  std::string out = absl::StrFormat(
      "GPU %s: capacity %s, used %s, candidate %s: %s, headroom %s\n", response.gpu(),
      FormatBytes(response.capacity_bytes()), FormatBytes(response.used_bytes()),
      FormatBytes(response.candidate_bytes()), response.fits() ? "FITS" : "DOES NOT FIT",
      FormatSignedBytes(response.headroom_bytes()));
  absl::StrAppendFormat(
      &out,
      "contention: %s (worst predicted speed %.2f; BAD at P(below 0.85) >= %.3f; model "
      "%s)\n\n",
      ShortName(v1::ContentionVerdict_Name(response.verdict()), "CONTENTION_VERDICT_"),
      response.worst_predicted_speed(), response.bad_probability_threshold(),
      response.contention_model_version());
  std::vector<std::vector<std::string>> rows = {
      {"job", "memory", "gpu util (range)", "source", "speed (interval)", "P(below 0.85)",
       "verdict", "confidence"}};
  for (const v1::JobOutcome& j : response.jobs()) {
    rows.push_back(
        {absl::StrCat(j.name(), j.candidate() ? " (candidate)" : ""),
         FormatBytes(j.memory_bytes()),
         absl::StrFormat("%.0f %% (%.0f-%.0f)", j.gpu_util() * 100,
                         j.gpu_util_low() * 100, j.gpu_util_high() * 100),
         ShortName(v1::UtilizationSource_Name(j.utilization_source()),
                   "UTILIZATION_SOURCE_"),
         absl::StrFormat("%.2f (%.2f-%.2f)%s", j.predicted_speed(), j.speed_low(),
                         j.speed_high(), j.extrapolated() ? " extrapolated" : ""),
         j.verdict() == v1::CONTENTION_VERDICT_ALONE
             ? std::string("-")
             : absl::StrFormat("%.2f", j.bad_probability()),
         ShortName(v1::ContentionVerdict_Name(j.verdict()), "CONTENTION_VERDICT_"),
         absl::StrFormat("%.2f", j.confidence())});
  }
  absl::StrAppend(&out, Table(rows));
  if (!response.reasons().empty()) absl::StrAppend(&out, "\nreasons:\n");
  for (const std::string& r : response.reasons()) absl::StrAppend(&out, "  - ", r, "\n");
  absl::StrAppend(&out, WarningLines(response.warnings()));
  return out;
}

std::string RenderRanking(const v1::RankGpusResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"gpu", "name", "capacity", "peak", "fits", "headroom", "estimator"}};
  for (const v1::GpuRanking& g : response.gpus()) {
    rows.push_back({g.gpu(), g.name(), FormatBytes(g.capacity_bytes()),
                    FormatBytes(g.peak_bytes()), g.fits() ? "yes" : "NO",
                    FormatSignedBytes(g.headroom_bytes()),
                    g.estimator_id().empty() ? "-" : g.estimator_id()});
  }
  std::string out;
  if (response.gpus_needed() > 1) {
    absl::StrAppend(&out, "per GPU, one rank each: the job needs ",
                    response.gpus_needed(), " such GPUs\n");
  }
  return out + Table(rows) + WarningLines(response.warnings());
}

std::string RenderJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string out;
  // Printing a message that parsed cannot fail: it has no Any fields to resolve.
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

}  // namespace gpuest::cli
