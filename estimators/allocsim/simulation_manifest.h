// File: simulation_manifest.h
//
// The manifest of a simulation estimator (models/allocsim/, models/analytic/) as one
// type: gpuest-calibrate-memory writes it, the server's CreateSimulationEstimator reads
// it. Every key of the file is read and written here, nowhere else.
//
// Required: every key gpuest-calibrate-memory writes, except a family's scores on runs
// it was not fitted on: GPUMemNet's held-out split ("held_out_rows", "held_out_mape",
// "held_out_safe", "held_out_safe_and_tight") and real models of architecture groups
// left out of the fit ("unseen_architecture_rows", ... the same four), each all there
// or all absent (a calibration not yet scored). Values are checked too: trace_source,
// steps >= 1, intercepts >= 0, safe_factor >= 1, point_factor > 0, at least one family.
// "calibration.by_gpu" (GpuTerms) is optional; each of its GPUs has at least one family.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/core/manifest_json.h"
#include "nlohmann/json.hpp"

namespace gpuest::allocsim {

// Where the replayed step comes from: the request's trace (allocsim) or a step built
// from the layer sequence (analytic).
enum class TraceSource { kRequest, kLayers };

// How the family's upper bound fared on runs it was not fitted on.
struct HeldOutScores {
  int rows = 0;
  double mape = 0;  // Percent.
  double safe = 0;
  double safe_and_tight = 0;
};

struct FamilyTerms {
  std::string
      family;  // "mlp", "cnn", "transformer": names of estimators/core/layer_types.h.
  // Measured on the family's models without a convolution, apart from those with one:
  // such a step runs no cuDNN convolution, so neither its workspaces nor benchmark
  // mode's search (GPUMemNet's transformers are text classifiers; the real ones, image
  // models with a patch-embedding convolution, were measured in benchmark mode). The
  // server gives them to a model of the family without one (a layer list with no
  // convolution in it). Keyed in "families" as TermsKey says.
  bool without_convolutions = false;
  // Measured on GPUMemNet's generated models of the family (population.h), apart from
  // the real ones (the clean runs, timm's): those CNNs reserve far more than their
  // simulated steps (on an H100 the first step of the measured ones held 5-13 GB more
  // than the simulated first step, and later steps added a segment each:
  // h100-op-transients' step_reserved.jsonl), which the real models' runs do not show.
  // The server gives them to a job of that population only, whatever its optimizer: a
  // real CNN trained with Adam has Adam's state in its trace, not the generated
  // networks' quirks. At most one of the two is set. Keyed as TermsKey says (manifests
  // written before, keyed "-with-two-moment-optimizer" for the same rows, read as it).
  bool synthetic = false;
  FamilyCalibration calibration;
  std::optional<HeldOutScores> held_out;  // GPUMemNet's held-out split.
  // Real models (timm on the A100), each scored by a fit that never saw its
  // architecture group.
  std::optional<HeldOutScores> unseen_architectures;
  std::vector<core::manifest::DatasetDigest> datasets;  // What it was calibrated on.
};

// The key of a family's terms in "families": the family's name ("transformer"), with
// "-without-convolutions" for the terms of its models without one, or "-synthetic" for
// those of GPUMemNet's generated models.
std::string TermsKey(const std::string& family, bool without_convolutions,
                     bool synthetic = false);

// The terms' name for people: "transformer", "transformer (without convolutions)",
// "cnn (GPUMemNet's generated networks)".
std::string TermsName(const FamilyTerms& terms);

// A GPU's own terms, fitted on clean runs measured on it (cuDNN benchmark off,
// uncapped: the allocator's reserved peak is the step's, with no search transient in
// it). The server serves them for that GPU, family by family, instead of the
// calibrated GPU's; each family's unseen_architectures scores are on those runs.
struct GpuTerms {
  std::string gpu;         // Its profile id.
  double context_mib = 0;  // Its context as its profile gave it to the fit.
  std::string made_by;     // The command and the runs that made it.
  std::vector<FamilyTerms> families;
};

struct SimulationManifest {
  static constexpr char kEstimatorType[] = "allocsim";

  std::string id;
  std::string version;
  TraceSource trace_source = TraceSource::kRequest;
  std::string description;
  std::string made_by;     // The command and the split that made it.
  std::string gpu;         // The GPU the calibration was measured on (its profile id).
  double context_mib = 0;  // That GPU's context, as calibrated in the same run.
  int steps = 2;           // Training steps replayed.
  double safe_quantile = 0.95;
  std::vector<FamilyTerms> families;  // In file order.
  std::vector<GpuTerms> by_gpu;       // Optional ("calibration.by_gpu"), by GPU id.

  // Keys in the file's order (ordered_json keeps it).
  nlohmann::ordered_json ToJson() const;
  // InvalidArgument names the file and the key.
  static absl::StatusOr<SimulationManifest> FromJson(const nlohmann::ordered_json& json,
                                                     const std::string& file);
  static absl::StatusOr<SimulationManifest> Parse(const std::string& text,
                                                  const std::string& file);
  // The JSON as the file holds it (one-space indent, a final newline).
  std::string Text() const;
};

}  // namespace gpuest::allocsim
