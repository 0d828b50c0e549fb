#include "estimators/allocsim/simulation_manifest.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace gpuest::allocsim {
namespace {

using Json = nlohmann::ordered_json;
using Fields = core::manifest::Fields<Json>;

constexpr char kRequest[] = "request";
constexpr char kLayers[] = "layers";
constexpr char kHeldOut[] = "held_out";
constexpr char kUnseenArchitectures[] = "unseen_architecture";
constexpr char kWithoutConvolutions[] = "-without-convolutions";
constexpr char kSynthetic[] = "-synthetic";
// What manifests written before the population was chosen by the description called
// the same terms (GPUMemNet's CNNs, then chosen by their optimizer).
constexpr char kSyntheticBefore[] = "-with-two-moment-optimizer";

// A family's scores on one population: "<prefix>_rows", "_mape", "_safe",
// "_safe_and_tight", all there or all absent.
absl::Status ScoresFromJson(Fields& f, const std::string& prefix,
                            std::optional<HeldOutScores>& scores) {
  const std::string rows = prefix + "_rows";
  if (!f.Has(rows)) return absl::OkStatus();
  HeldOutScores& h = scores.emplace();
  GPUEST_RETURN_IF_ERROR(f.Get(rows, h.rows));
  GPUEST_RETURN_IF_ERROR(f.Get(prefix + "_mape", h.mape));
  GPUEST_RETURN_IF_ERROR(f.Get(prefix + "_safe", h.safe));
  GPUEST_RETURN_IF_ERROR(f.Get(prefix + "_safe_and_tight", h.safe_and_tight));
  if (h.rows < 1) return f.Error(rows, "must be at least 1");
  for (const auto& [key, share] :
       {std::pair{"_safe", h.safe}, {"_safe_and_tight", h.safe_and_tight}}) {
    if (!(share >= 0 && share <= 1)) return f.Error(prefix + key, "must be in [0, 1]");
  }
  return absl::OkStatus();
}

void ScoresToJson(const std::optional<HeldOutScores>& scores, const std::string& prefix,
                  Json& j) {
  if (!scores) return;
  j[prefix + "_rows"] = scores->rows;
  j[prefix + "_mape"] = scores->mape;
  j[prefix + "_safe"] = scores->safe;
  j[prefix + "_safe_and_tight"] = scores->safe_and_tight;
}

absl::StatusOr<FamilyTerms> FamilyFromJson(Fields& f, const std::string& name) {
  FamilyTerms t;
  absl::string_view family = name;
  t.synthetic = absl::ConsumeSuffix(&family, kSynthetic) ||
                absl::ConsumeSuffix(&family, kSyntheticBefore);
  t.without_convolutions =
      !t.synthetic && absl::ConsumeSuffix(&family, kWithoutConvolutions);
  t.family = std::string(family);
  FamilyCalibration& c = t.calibration;
  GPUEST_RETURN_IF_ERROR(f.Get("intercept_mib", c.intercept_mib));
  GPUEST_RETURN_IF_ERROR(f.Get("safe_factor", c.safe_factor));
  GPUEST_RETURN_IF_ERROR(f.Get("point_intercept_mib", c.point_intercept_mib));
  GPUEST_RETURN_IF_ERROR(f.Get("point_factor", c.point_factor));
  if (c.intercept_mib < 0) return f.Error("intercept_mib", "must be at least 0");
  if (c.safe_factor < 1) return f.Error("safe_factor", "must be at least 1");
  if (c.point_intercept_mib < 0)
    return f.Error("point_intercept_mib", "must be at least 0");
  if (c.point_factor <= 0) return f.Error("point_factor", "must be more than 0");
  // Optional: manifests written before the term had none (0).
  GPUEST_RETURN_IF_ERROR(f.GetOptional("conv_output_factor", c.conv_output_factor));
  if (c.conv_output_factor < 0) {
    return f.Error("conv_output_factor", "must be at least 0");
  }
  GPUEST_RETURN_IF_ERROR(ScoresFromJson(f, kHeldOut, t.held_out));
  GPUEST_RETURN_IF_ERROR(ScoresFromJson(f, kUnseenArchitectures, t.unseen_architectures));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> datasets, f.Objects("datasets"));
  for (Fields& d : datasets) {
    GPUEST_ASSIGN_OR_RETURN(core::manifest::DatasetDigest digest,
                            core::manifest::DatasetDigest::FromJson(d));
    t.datasets.push_back(std::move(digest));
  }
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return t;
}

// "families": {name: terms, ...}, at least one.
absl::StatusOr<std::vector<FamilyTerms>> FamiliesFromJson(Fields& parent) {
  GPUEST_ASSIGN_OR_RETURN(Fields families, parent.Object("families"));
  std::vector<FamilyTerms> out;
  for (const std::string& name : families.Keys()) {
    GPUEST_ASSIGN_OR_RETURN(Fields terms, families.Object(name));
    GPUEST_ASSIGN_OR_RETURN(FamilyTerms t, FamilyFromJson(terms, name));
    out.push_back(std::move(t));
  }
  if (out.empty()) return parent.Error("families", "is empty");
  return out;
}

Json FamiliesToJson(const std::vector<FamilyTerms>& families) {
  Json out = Json::object();
  for (const FamilyTerms& t : families) {
    Json& j = out[TermsKey(t.family, t.without_convolutions, t.synthetic)];
    j["intercept_mib"] = t.calibration.intercept_mib;
    j["safe_factor"] = t.calibration.safe_factor;
    j["point_intercept_mib"] = t.calibration.point_intercept_mib;
    j["point_factor"] = t.calibration.point_factor;
    j["conv_output_factor"] = t.calibration.conv_output_factor;
    ScoresToJson(t.held_out, kHeldOut, j);
    ScoresToJson(t.unseen_architectures, kUnseenArchitectures, j);
    j["datasets"] = Json::array();
    for (const core::manifest::DatasetDigest& d : t.datasets) {
      j["datasets"].push_back(d.ToJson<Json>());
    }
  }
  return out;
}

}  // namespace

std::string TermsKey(const std::string& family, bool without_convolutions,
                     bool synthetic) {
  if (synthetic) return absl::StrCat(family, kSynthetic);
  return without_convolutions ? absl::StrCat(family, kWithoutConvolutions) : family;
}

std::string TermsName(const FamilyTerms& terms) {
  if (terms.synthetic) {
    return absl::StrCat(terms.family, " (GPUMemNet's generated networks)");
  }
  return terms.without_convolutions
             ? absl::StrCat(terms.family, " (without convolutions)")
             : terms.family;
}

Json SimulationManifest::ToJson() const {
  Json m;
  m["estimator_type"] = kEstimatorType;
  m["id"] = id;
  m["version"] = version;
  m["trace_source"] = trace_source == TraceSource::kRequest ? kRequest : kLayers;
  m["description"] = description;
  m["made_by"] = made_by;
  Json& c = m["calibration"];
  c["gpu"] = gpu;
  c["context_mib"] = context_mib;
  c["steps"] = steps;
  c["safe_quantile"] = safe_quantile;
  c["families"] = FamiliesToJson(families);
  if (!by_gpu.empty()) {
    Json& gpus = c["by_gpu"] = Json::object();
    for (const GpuTerms& g : by_gpu) {
      Json& j = gpus[g.gpu];
      j["context_mib"] = g.context_mib;
      j["made_by"] = g.made_by;
      j["families"] = FamiliesToJson(g.families);
    }
  }
  return m;
}

absl::StatusOr<SimulationManifest> SimulationManifest::FromJson(const Json& json,
                                                                const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  SimulationManifest m;
  std::string type, source;
  GPUEST_RETURN_IF_ERROR(f.Get("estimator_type", type));
  if (type != kEstimatorType) {
    return f.Error("estimator_type", absl::StrCat("must be \"", kEstimatorType, "\""));
  }
  GPUEST_RETURN_IF_ERROR(f.Get("id", m.id));
  GPUEST_RETURN_IF_ERROR(f.Get("version", m.version));
  GPUEST_RETURN_IF_ERROR(f.Get("trace_source", source));
  if (source != kRequest && source != kLayers) {
    return f.Error(
        "trace_source",
        absl::StrCat("must be \"request\" or \"layers\", not \"", source, "\""));
  }
  m.trace_source = source == kRequest ? TraceSource::kRequest : TraceSource::kLayers;
  GPUEST_RETURN_IF_ERROR(f.Get("description", m.description));
  GPUEST_RETURN_IF_ERROR(f.Get("made_by", m.made_by));
  GPUEST_ASSIGN_OR_RETURN(Fields c, f.Object("calibration"));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  GPUEST_RETURN_IF_ERROR(c.Get("gpu", m.gpu));
  GPUEST_RETURN_IF_ERROR(c.Get("context_mib", m.context_mib));
  GPUEST_RETURN_IF_ERROR(c.Get("steps", m.steps));
  if (m.steps < 1) return c.Error("steps", "must be at least 1");
  GPUEST_RETURN_IF_ERROR(c.Get("safe_quantile", m.safe_quantile));
  GPUEST_ASSIGN_OR_RETURN(m.families, FamiliesFromJson(c));
  if (c.Has("by_gpu")) {
    GPUEST_ASSIGN_OR_RETURN(Fields gpus, c.Object("by_gpu"));
    for (const std::string& id : gpus.Keys()) {
      GPUEST_ASSIGN_OR_RETURN(Fields g, gpus.Object(id));
      GpuTerms& t = m.by_gpu.emplace_back();
      t.gpu = id;
      GPUEST_RETURN_IF_ERROR(g.Get("context_mib", t.context_mib));
      GPUEST_RETURN_IF_ERROR(g.Get("made_by", t.made_by));
      GPUEST_ASSIGN_OR_RETURN(t.families, FamiliesFromJson(g));
      GPUEST_RETURN_IF_ERROR(g.Finish());
    }
    GPUEST_RETURN_IF_ERROR(gpus.Finish());
  }
  GPUEST_RETURN_IF_ERROR(c.Finish());
  return m;
}

absl::StatusOr<SimulationManifest> SimulationManifest::Parse(const std::string& text,
                                                             const std::string& file) {
  return core::manifest::ParseManifest<SimulationManifest, Json>(text, file);
}

std::string SimulationManifest::Text() const { return ToJson().dump(1) + "\n"; }

}  // namespace gpuest::allocsim
