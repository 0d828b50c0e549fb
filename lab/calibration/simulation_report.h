// File: simulation_report.h
//
// The allocator simulation's section of docs/accuracy.md, which gpuest-calibrate-memory
// writes: the held-out scores of the simulation estimators beside GPUMemNet and Horus,
// the held-out rows that crashed out of memory, and the calibration itself.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "estimators/allocsim/memory_model.h"
#include "lab/calibration/calibration.h"
#include "lab/calibration/transient_evidence.h"

namespace gpuest::calibration {

struct EstimatorScores {
  std::string id;
  Scores upper;                 // The figure a scheduler reserves.
  std::optional<Scores> point;  // The simulators' point estimate; none for the others.
  int oom_above_card = 0;       // Held-out OOM rows it put above the card's memory.
};

struct FamilyReport {
  std::string family;                       // "mlp"
  std::vector<EstimatorScores> estimators;  // In table order.
  int oom_rows = 0;                         // Held-out rows that crashed out of memory.
  // Simulation estimator id -> its calibration for this family, in table order.
  std::vector<std::pair<std::string, allocsim::FamilyCalibration>> calibration;
};

struct SimulationReport {
  std::string split;  // How the held-out rows were chosen, in words.
  double context_mib = 0;
  int steps = 0;
  double safe_quantile = 0;
  double card_mib = 0;  // The measured card's memory.
  std::vector<FamilyReport> families;
  // The manifests in models/ were scored as they are (--score-models), not this run's
  // fits (whose calibration table is then for comparison).
  bool scored_shipped = false;
};

// The real models' rows of one family, each scored by estimators that never saw its
// architecture group (or, for GPUMemNet's fit and the baselines, never fitted on any
// real row).
struct RealModelsFamily {
  std::string family;  // "cnn"
  std::vector<EstimatorScores> estimators;
  int oom_rows = 0;
};

// A family's SPIKE rows (completed runs holding cuDNN benchmark mode's search
// transient) against the served allocsim requirement (its upper bound).
struct SpikeRows {
  int rows = 0;
  int above_requirement = 0;   // Measured peak above the requirement's upper bound.
  std::vector<double> ratios;  // Measured peak / the requirement's upper bound.
};

// A family's OK rows whose peak holds a transient by the trace's evidence
// (transient_evidence.h): kept out of the fits, scored in the table all the same.
struct TransientRows {
  struct Unsafe {
    std::string run;  // "model@batch"
    double measured_mib = 0;
    double requirement_mib = 0;  // The served allocsim upper bound, as scored.
    TransientCase evidence;
  };
  int rows = 0;
  std::map<std::string, int> safe;  // Simulation id -> rows its served bound keeps safe.
  // Simulation id -> its scores on the family's other OK rows.
  std::map<std::string, Scores> other_rows;
  std::map<std::string, Scores> other_rows_point;  // Its point estimate's, the same.
  std::vector<Unsafe> allocsim_unsafe;
};

struct RealModelsReport {
  std::string source;                               // The dataset, in words.
  std::map<std::string, SpikeRows> spikes;          // By family.
  std::map<std::string, TransientRows> transients;  // By family.
  // Each scored row: family, architecture group, run, status, measured and simulated
  // peaks, the served upper bounds, the trace's evidence of a transient (CSV, for study).
  std::string rows_csv;
  int crashed_rows = 0;  // Ignored: say nothing about the job.
  int models = 0, architecture_groups = 0;
  double safe_quantile = 0;
  double card_mib = 0;
  std::vector<RealModelsFamily> families;
  bool scored_shipped = false;  // As SimulationReport::scored_shipped.
};

// Markdown, from the section's heading to its calibration table.
std::string RenderSimulationSection(const SimulationReport& report);

// Markdown: the leave-architecture-group-out table of the real models.
std::string RenderRealModelsSection(const RealModelsReport& report);

}  // namespace gpuest::calibration
