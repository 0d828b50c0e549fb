#include "lab/calibration/memory_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model_family.h"
#include "common/quantile.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "common/units.h"
#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/engine.h"
#include "estimators/core/features.h"
#include "estimators/core/gpu_profiles_manifest.h"
#include "estimators/core/layer_types.h"
#include "estimators/default_factories.h"
#include "estimators/horus/horus.h"
#include "lab/calibration/bound_goals.h"
#include "lab/calibration/calibration.h"
#include "lab/calibration/clean_runs.h"
#include "lab/calibration/fit_choice.h"
#include "lab/calibration/layer_agreement.h"
#include "lab/calibration/simulation_report.h"
#include "lab/calibration/simulations.h"
#include "lab/calibration/transient_evidence.h"
#include "lab/data/dataset.h"
#include "lab/data/measured_rows.h"
#include "lab/trainer/pipeline.h"

namespace gpuest::calibration {
namespace {

using allocsim::FamilyCalibration;
using allocsim::SimulationManifest;
using allocsim::TraceSource;
using data::MeasuredRow;
// Simulation id -> the estimator as served, from the manifests.
using ServedEstimators = std::map<std::string, std::unique_ptr<core::Estimator>>;

constexpr double kMiB = gpuest::common::kMiB;  // Fractional MiB in the reports.
constexpr char kCalibratedGpu[] = "a100-40gb";

struct Population {
  std::string name;
  v1::ModelFamily family;
  std::string csv, traced, exported;  // exported: the layer-only export (Transformer).
  // The generator's class for the family (ModelDescription.model_source): rows traced
  // before describe recorded it get it, so that the server takes them for what they
  // are, GPUMemNet's generated networks (estimators/allocsim/population.h).
  std::string source;
  // GPUMemNet's models of the family have no convolution while the real ones have:
  // two populations, calibrated apart. A step without a convolution runs no cuDNN
  // convolution, so none of its workspaces and no benchmark search, both of which the
  // real models' peaks hold (the timm runs set cudnn.benchmark). GPUMemNet's
  // Transformers are text classifiers over token sequences; the real transformer-family
  // rows are image models (ViTs and hybrids, a convolution at least in the patch
  // embedding). Their rows do not join the real models' out-of-group fit (they made it
  // less safe and tight out of group), and GPUMemNet's fit alone serves the family's
  // models without a convolution (FamilyTerms::without_convolutions): on GPUMemNet's
  // held-out transformers the real models' terms are rarely safe and tight (the
  // report's "(without convolutions)" rows). GPUMemNet's CNNs are image models like the
  // real ones.
  bool synthetic_without_convolutions = false;
};

std::vector<Population> Populations(const MemoryCalibrationOptions& o) {
  const std::string& data = o.data_dir;
  const std::string& sets = o.datasets_dir;
  return {{"mlp", v1::MODEL_FAMILY_MLP, data + "/mlp.csv", sets + "/mlp_traced.jsonl", "",
           "gpuest.synthetic.mlp:MLP"},
          {"cnn", v1::MODEL_FAMILY_CNN, data + "/cnn.csv", sets + "/cnn_traced.jsonl", "",
           "gpuest.synthetic.cnn:CNN"},
          {"transformer", v1::MODEL_FAMILY_TRANSFORMER, data + "/transformer_sample.csv",
           sets + "/transformer_sample_traced.jsonl", sets + "/transformer.jsonl",
           "gpuest.synthetic.transformer:TransformerModel",
           /*synthetic_without_convolutions=*/true}};
}

// A dataset row with what the simulation makes of it, per estimator.
struct Row {
  const MeasuredRow* measured;
  bool held_out;
  std::map<std::string, allocsim::ReplayResult> replay;  // By estimator id.
};

// A family's traced rows in GPUMemNet's split, each replayed once per simulation.
struct TracedPopulation {
  std::vector<data::DatasetFile> files;  // What GPUMemNet's split was made from.
  data::MeasuredFile traced;             // The rows point into it.
  std::vector<Row> rows;
};

absl::Status LoadTracedPopulation(const Population& f, const MemoryCalibrationOptions& o,
                                  const core::GpuProfile& gpu, TracedPopulation& out) {
  GPUEST_ASSIGN_OR_RETURN(const data::Dataset dataset,
                          f.exported.empty()
                              ? data::LoadCsvDataset(f.csv, f.family)
                              : data::LoadExportedDataset(f.exported, f.csv));
  out.files = dataset.files;
  const trainer::Split split = trainer::HeldOutSplit(dataset, o.test_fraction, o.seed);
  std::set<std::string> test, train;
  for (int i : split.test) test.insert(dataset.examples[i].measured.model.name());
  for (int i : split.train) train.insert(dataset.examples[i].measured.model.name());
  GPUEST_ASSIGN_OR_RETURN(out.traced, data::ReadExportedRows(f.traced));
  for (MeasuredRow& m : out.traced.rows) {
    if (m.model.model_source().empty()) m.model.set_model_source(f.source);
    const bool in_test = test.count(m.file_name) > 0;
    if (!m.model.has_trace() || (!in_test && !train.count(m.file_name))) continue;
    if (f.synthetic_without_convolutions && allocsim::HasConvolution(m.model)) {
      return absl::FailedPreconditionError(absl::StrCat(
          f.traced, ": ", m.file_name, " has a convolution, but GPUMemNet's ", f.name,
          " models are calibrated as models without one"));
    }
    Row row{&m, in_test, {}};
    GPUEST_ASSIGN_OR_RETURN(row.replay, ReplayEach(m.model, gpu, o.steps));
    out.rows.push_back(std::move(row));
  }
  std::fprintf(stderr, "%s: %zu traced rows, %zu held out by GPUMemNet's split\n",
               f.name.c_str(), out.rows.size(), test.size());
  return absl::OkStatus();
}

// A timm row (real architecture) with what each simulation makes of it.
struct RealRow {
  const MeasuredRow* measured;
  std::string group;   // Its architecture group, left out together.
  std::string family;  // gpuest's family of its layers ("cnn", "transformer", ...).
  std::map<std::string, allocsim::ReplayResult> replay;  // By estimator id.
  // A completed run whose peak holds a transient by the trace's evidence: predicted
  // and scored, never fitted on.
  std::optional<TransientCase> transient;
};

// An estimate of one real row by a fit that never saw its architecture group.
struct OutOfGroupEstimate {
  double point_mib = 0, upper_mib = 0;
};

struct RealRows {
  data::MeasuredFile file;  // The rows point into it.
  std::vector<RealRow> rows;
  // Estimator id -> row index -> its out-of-group estimate, for the rows of the
  // families fitted out of group.
  std::map<std::string, std::map<size_t, OutOfGroupEstimate>> out_of_group;
  // Estimator id -> the families whose served calibration is the out-of-group fit.
  std::map<std::string, std::set<std::string>> serves_fit;
  // Estimator id -> family -> the fit on GPUMemNet's training rows alone.
  std::map<std::string, std::map<std::string, FamilyCalibration>> gpumemnet_fit;
  // Completed runs whose peak holds cuDNN benchmark mode's search transient (status
  // SPIKE): kept out of every fit and score, reported apart against the requirement.
  std::vector<RealRow> spikes;
  int crashed = 0;  // Status CRASHED: died for another reason; says nothing, ignored.
};

// The runs of a family's real rows as estimator id's fits see them, in members' order.
std::vector<RealRun> RealRunsOf(const RealRows& real, const std::vector<size_t>& members,
                                const std::string& id) {
  std::vector<RealRun> runs;
  for (size_t i : members) {
    const RealRow& r = real.rows[i];
    runs.push_back({r.group,
                    {r.replay.at(id), r.measured->peak_mib,
                     allocsim::LargestConvOutputMib(r.measured->model)},
                    r.measured->oom,
                    r.transient.has_value()});
  }
  return runs;
}

// The calibration a model's family serves it from (TermsKey): its family's, or the
// terms of its family's models without a convolution where populations has them apart.
std::string TermsKeyOf(const v1::ModelDescription& model,
                       const std::vector<Population>& populations) {
  v1::EstimateRequest request;
  *request.mutable_model() = model;
  const std::string family = common::FamilyName(core::FeaturesOf(request).family());
  for (const Population& f : populations) {
    if (f.name == family && f.synthetic_without_convolutions &&
        allocsim::WithoutConvolutions(model)) {
      return allocsim::TermsKey(family, true);
    }
  }
  return family;
}

absl::Status LoadRealRows(const MemoryCalibrationOptions& o,
                          const std::vector<Population>& populations,
                          const core::GpuProfile& gpu, RealRows& out) {
  GPUEST_ASSIGN_OR_RETURN(out.file, data::ReadExportedRows(o.timm_rows));
  std::set<std::string> models, groups;
  for (MeasuredRow& m : out.file.rows) {
    // timm's models, as describe_timm.py built them (older exports do not say).
    if (m.model.model_source().empty()) {
      m.model.set_model_source(absl::StrCat("timm.models:", m.model.name()));
    }
    if (m.status == "CRASHED") {
      ++out.crashed;
      continue;
    }
    if (!m.model.has_trace() || (!m.oom && m.peak_mib <= 0)) continue;
    RealRow row{&m,
                ArchitectureGroupOf(m.model.name()),
                TermsKeyOf(m.model, populations),
                {},
                std::nullopt};
    GPUEST_ASSIGN_OR_RETURN(row.replay, ReplayEach(m.model, gpu, o.steps));
    if (m.status == "SPIKE") {
      out.spikes.push_back(std::move(row));
      continue;
    }
    models.insert(m.model.name());
    groups.insert(row.group);
    out.rows.push_back(std::move(row));
  }
  // The trace's evidence of transients, on the completed runs: the traced step is the
  // allocsim replay's, whichever estimator is scored.
  std::vector<PeakRun> runs;
  std::vector<size_t> completed;
  for (size_t i = 0; i < out.rows.size(); ++i) {
    const MeasuredRow& m = *out.rows[i].measured;
    if (m.oom) continue;
    runs.push_back({m.model.name(), static_cast<int>(m.model.batch_size()), m.peak_mib,
                    out.rows[i].replay.at("allocsim").peak_reserved_bytes / kMiB});
    completed.push_back(i);
  }
  const std::vector<std::optional<TransientCase>> cases = FindTransients(runs);
  size_t transients = 0;
  for (size_t k = 0; k < completed.size(); ++k) {
    out.rows[completed[k]].transient = cases[k];
    transients += cases[k].has_value();
  }
  std::fprintf(stderr,
               "%s: %zu traced rows of %zu models, %zu architecture groups; %zu SPIKE "
               "rows apart, %d CRASHED rows ignored; %zu OK rows hold a transient by "
               "the trace's evidence (kept out of the fits)\n",
               out.file.name.c_str(), out.rows.size(), models.size(), groups.size(),
               out.spikes.size(), out.crashed, transients);
  return absl::OkStatus();
}

absl::Status WriteTrainingRowsCsv(const std::string& path,
                                  const std::vector<Population>& populations,
                                  std::map<std::string, TracedPopulation>& traced) {
  std::string csv =
      "family,file,batch,measured_mib,allocsim_reserved_mib,analytic_reserved_mib,"
      "allocsim_allocated_mib,largest_conv_mib\n";
  for (const Population& f : populations) {
    for (const Row& r : traced[f.name].rows) {
      if (r.held_out || r.measured->oom) continue;
      absl::StrAppendFormat(&csv, "%s,%s,%d,%.0f,%.1f,%.1f,%.1f,%.1f\n", f.name,
                            r.measured->file_name, r.measured->model.batch_size(),
                            r.measured->peak_mib,
                            r.replay.at("allocsim").peak_reserved_bytes / kMiB,
                            r.replay.at("analytic").peak_reserved_bytes / kMiB,
                            r.replay.at("allocsim").peak_allocated_bytes / kMiB,
                            allocsim::LargestConvOutputMib(r.measured->model));
    }
  }
  return common::WriteTextFile(path, csv);
}

// The training rows an estimator is calibrated on: measured peaks of runs that fit.
std::vector<CalibrationRow> TrainingRows(const std::vector<Row>& rows,
                                         const std::string& id) {
  std::vector<CalibrationRow> fit;
  for (const Row& r : rows) {
    if (!r.held_out && !r.measured->oom && r.measured->peak_mib > 0) {
      fit.push_back({r.replay.at(id), r.measured->peak_mib,
                     allocsim::LargestConvOutputMib(r.measured->model)});
    }
  }
  return fit;
}

// Estimator id -> family -> its calibration.
using Calibrations = std::map<std::string, std::map<std::string, FamilyCalibration>>;

// A family's GPUMemNet training rows (one group; none for a family whose synthetic
// rows are another population, Population::synthetic_without_convolutions) and its real
// rows (one group per architecture group: runs, RealRunsOf members), fitted out of group;
// the real rows' out-of-group estimates go into real.
absl::StatusOr<FamilyCalibration> FitWithRealRows(
    const std::string& id, const Population& family,
    const std::vector<CalibrationRow>& synthetic, const std::vector<RealRun>& runs,
    RealRows& real, const std::vector<size_t>& members, const core::GpuProfile& gpu,
    const FitOptions& options) {
  const std::vector<GroupedRow> rows = OutOfGroupFitRows(
      family.name, synthetic, !family.synthetic_without_convolutions, runs);
  GPUEST_ASSIGN_OR_RETURN(const OutOfGroupFit fit, FitOutOfGroup(rows, gpu, options));
  for (size_t k = 0; k < members.size(); ++k) {
    const size_t at = rows.size() - members.size() + k;
    real.out_of_group[id][members[k]] = {fit.point_mib[at], fit.upper_mib[at]};
  }
  std::fprintf(stderr,
               "%s %s: upper = context + %.0f MiB + x%.3f (point - context) + %.2f x "
               "largest conv output, over %zu rows\n",
               id.c_str(), family.name.c_str(), fit.slack_mib, fit.margin,
               fit.conv_output_factor, rows.size());
  return fit.calibration;
}

// What every population's calibration is fitted with.
struct FitContext {
  const core::GpuProfile& gpu;
  const MemoryCalibrationOptions& options;
  FitOptions fit;  // For the fit on GPUMemNet's training rows.
  RealRows* real;  // The real models, or null.
};

// The real rows of population name, as indices into real's rows (none without them).
std::vector<size_t> RealMembersOf(const RealRows* real, const std::string& name) {
  std::vector<size_t> members;
  for (size_t i = 0; real != nullptr && i < real->rows.size(); ++i) {
    if (real->rows[i].family == name) members.push_back(i);
  }
  return members;
}

// The calibration served for population f where it has real rows (members): the fit
// on GPUMemNet's training rows (gpumemnet_fit) or the out-of-group fit with the real
// rows, as options.fit_real_models chooses; both recorded in the real rows.
absl::StatusOr<FamilyCalibration> ChooseWithRealRows(
    const FitContext& c, const SimulationModel& s, const Population& f,
    const std::vector<CalibrationRow>& fit, const FamilyCalibration& gpumemnet_fit,
    const std::vector<size_t>& members) {
  const MemoryCalibrationOptions& o = c.options;
  RealRows& real = *c.real;
  // The conv term stands for cuDNN's convolution workspaces: fitted for the
  // convolution family. On the transformer family (hybrids included) it left
  // fewer real rows safe and tight out of group, so it is fitted there as 0. The
  // margin's quantile is chosen for coverage of architecture groups left out
  // (calibration.h group_coverage).
  FitOptions real_options = c.fit;
  real_options.group_coverage = o.safe_quantile;
  if (f.family == v1::MODEL_FAMILY_CNN) {
    real_options.max_conv_factor = o.max_conv_output_factor;
  }
  // The family's real rows as this simulation's fits see them: fitted on, and
  // both fits judged on.
  const std::vector<RealRun> runs = RealRunsOf(real, members, s.id);
  GPUEST_ASSIGN_OR_RETURN(
      const FamilyCalibration with_real,
      FitWithRealRows(s.id, f, fit, runs, real, members, c.gpu, real_options));
  real.gpumemnet_fit[s.id][f.name] = gpumemnet_fit;
  // Both fits judged on the same runs, as the fits are made (without the runs
  // holding a transient); neither saw them (the out-of-group fit scored by fits
  // that never saw each run's architecture group).
  std::vector<double> alone_upper, out_of_group_upper;
  for (size_t k = 0; k < runs.size(); ++k) {
    alone_upper.push_back(allocsim::CalibratedEstimate(runs[k].row.replay, c.gpu,
                                                       gpumemnet_fit,
                                                       runs[k].row.conv_output_mib)
                              .upper_bytes() /
                          kMiB);
    out_of_group_upper.push_back(real.out_of_group[s.id].at(members[k]).upper_mib);
  }
  const double card_mib = c.gpu.memory_bytes / kMiB;
  const Shares alone = SharesOf(runs, alone_upper, card_mib);
  const Shares out_of_group = SharesOf(runs, out_of_group_upper, card_mib);
  const bool serve =
      o.fit_real_models == RealModelFit::kAlways ||
      (o.fit_real_models == RealModelFit::kWhereUnsafe && alone.safe < o.safe_quantile) ||
      (o.fit_real_models == RealModelFit::kWhereUnsafeOrTighter &&
       CandidateServes(alone, out_of_group, o.safe_quantile));
  std::fprintf(stderr,
               "%s %s: on the real rows GPUMemNet's fit keeps %.3f safe, %.3f "
               "safe and tight; the out-of-group fit %.3f, %.3f; serving the %s "
               "fit\n",
               s.id.c_str(), f.name.c_str(), alone.safe, alone.safe_and_tight,
               out_of_group.safe, out_of_group.safe_and_tight,
               serve ? "out-of-group" : "GPUMemNet");
  if (!serve) return gpumemnet_fit;
  real.serves_fit[s.id].insert(f.name);
  return with_real;
}

absl::StatusOr<Calibrations> CalibratePopulations(
    const std::vector<Population>& populations,
    std::map<std::string, TracedPopulation>& traced, RealRows* real,
    const core::GpuProfile& gpu, const MemoryCalibrationOptions& o) {
  FitContext c{gpu, o, FitOptions{}, real};
  c.fit.safe_quantile = o.safe_quantile;
  Calibrations calibration;
  for (const SimulationModel& s : Simulations()) {
    for (const Population& f : populations) {
      const std::vector<CalibrationRow> fit = TrainingRows(traced[f.name].rows, s.id);
      const std::vector<size_t> members = RealMembersOf(real, f.name);
      // The out-of-group fit is always made for the report; it is served where the
      // fit on GPUMemNet alone is not safe enough on the real rows (or as asked).
      const absl::StatusOr<FamilyCalibration> alone_fit =
          FitFamilyCalibration(fit, gpu, c.fit);
      absl::StatusOr<FamilyCalibration> fitted = alone_fit;
      if (fitted.ok() && !members.empty()) {
        GPUEST_ASSIGN_OR_RETURN(fitted,
                                ChooseWithRealRows(c, s, f, fit, *alone_fit, members));
      }
      if (!fitted.ok()) {
        return absl::Status(
            fitted.status().code(),
            absl::StrCat(s.id, " ", f.name, ": ", fitted.status().message()));
      }
      if (f.synthetic_without_convolutions) {
        // GPUMemNet's fit is the family's models' without a convolution, whichever
        // serves those with.
        calibration[s.id][allocsim::TermsKey(f.name, true)] = *alone_fit;
      }
      const FamilyCalibration& cal = calibration[s.id][f.name] = *fitted;
      std::fprintf(stderr,
                   "%s %s: %zu training rows; upper +%.0f MiB x%.3f, point +%.0f MiB "
                   "x%.3f\n",
                   s.id.c_str(), f.name.c_str(), fit.size(), cal.intercept_mib,
                   cal.safe_factor, cal.point_intercept_mib, cal.point_factor);
    }
  }
  return calibration;
}

// Everything a simulation manifest says but the calibration itself.
struct ManifestContext {
  std::string split;
  double context_mib = 0;
  const MemoryCalibrationOptions* options = nullptr;
  const std::vector<Population>* populations = nullptr;
  std::map<std::string, TracedPopulation>* traced = nullptr;
  const RealRows* real = nullptr;  // The real models, when they joined the fit.
  const CleanRunsCalibration* clean = nullptr;  // A GPU's own clean runs, if given.
};

// The manifest's fields beside its terms: what it is, who made it on what, its GPU.
SimulationManifest ManifestHead(const SimulationModel& s,
                                const ManifestContext& context) {
  SimulationManifest m;
  m.id = s.id;
  m.version = "1";
  m.trace_source = s.trace_source;
  m.description = s.description;
  m.made_by = absl::StrCat(
      "build/lab/calibration/gpuest-calibrate-memory --write-models (deploy/"
      "calibrate-memory.sh); calibrated on the training rows of ",
      context.split);
  m.gpu = kCalibratedGpu;
  m.context_mib = context.context_mib;
  m.steps = context.options->steps;
  m.safe_quantile = context.options->safe_quantile;
  return m;
}

// What a simulation's manifest records: its calibration by family (and TermsKey), and,
// by the same keys, the held-out scores of its upper bound: held_out on GPUMemNet's
// held-out split, unseen_architectures on the real models, each scored by fits that
// never saw its architecture group.
struct ManifestTerms {
  const std::map<std::string, FamilyCalibration>& calibration;
  const std::map<std::string, Scores>& held_out;
  const std::map<std::string, Scores>& unseen_architectures;
};

// As recorded: none for no rows.
std::optional<allocsim::HeldOutScores> RecordedScores(
    const std::map<std::string, Scores>& scores, const std::string& key) {
  const auto it = scores.find(key);
  if (it == scores.end() || it->second.n == 0) return std::nullopt;
  return AsRecorded(it->second);
}

void AddDatasets(const std::vector<data::DatasetFile>& files, allocsim::FamilyTerms& t) {
  for (const data::DatasetFile& file : files)
    t.datasets.push_back({file.name, file.sha256, ""});
}

// One set of terms for every GPU: the clean runs' (clean) where they calibrate f.
void AddCleanTerms(const Population& f, const CleanRunsFamily& clean,
                   const ManifestContext& context, const ManifestTerms& terms,
                   SimulationManifest& m) {
  allocsim::FamilyTerms& t = m.families.emplace_back();
  t.family = f.name;
  t.calibration = AsRecorded(clean.calibration);
  t.unseen_architectures = AsRecorded(clean.upper);
  t.datasets.push_back({context.clean->file, context.clean->sha256,
                        "clean runs, left out by architecture group"});
  if (f.synthetic_without_convolutions) {
    // GPUMemNet's text classifiers are scored with the clean terms they are served.
    t.held_out = RecordedScores(terms.held_out, f.name);
    return;
  }
  // GPUMemNet's generated CNNs keep the terms fitted with them, served to that
  // population only (FamilyTerms::synthetic): the clean runs of real models do not
  // show what their runs reserve beyond the simulated step.
  allocsim::FamilyTerms& generated = m.families.emplace_back();
  generated.family = f.name;
  generated.synthetic = true;
  generated.calibration = AsRecorded(terms.calibration.at(f.name));
  generated.held_out = RecordedScores(terms.held_out, f.name);
  AddDatasets((*context.traced)[f.name].files, generated);
}

// This run's terms for f, and those of its models without a convolution where they
// are calibrated apart.
void AddFittedTerms(const SimulationModel& s, const Population& f,
                    const ManifestContext& context, const ManifestTerms& terms,
                    SimulationManifest& m) {
  const std::vector<data::DatasetFile>& synthetic = (*context.traced)[f.name].files;
  allocsim::FamilyTerms& t = m.families.emplace_back();
  t.family = f.name;
  t.calibration = AsRecorded(terms.calibration.at(f.name));
  // GPUMemNet's held-out rows are scored by the terms the server gives them.
  if (!f.synthetic_without_convolutions)
    t.held_out = RecordedScores(terms.held_out, f.name);
  t.unseen_architectures = RecordedScores(terms.unseen_architectures, f.name);
  const bool serves_real_fit = context.real != nullptr &&
                               context.real->serves_fit.count(s.id) &&
                               context.real->serves_fit.at(s.id).count(f.name);
  // GPUMemNet's rows, unless the served fit is the real models' alone.
  if (!serves_real_fit || !f.synthetic_without_convolutions) AddDatasets(synthetic, t);
  if (serves_real_fit) {
    t.datasets.push_back({context.real->file.name, context.real->file.sha256,
                          "real models, left out by architecture group"});
  }
  if (!f.synthetic_without_convolutions) return;
  const std::string key = allocsim::TermsKey(f.name, true);
  allocsim::FamilyTerms& apart = m.families.emplace_back();
  apart.family = f.name;
  apart.without_convolutions = true;
  apart.calibration = AsRecorded(terms.calibration.at(key));
  apart.held_out = RecordedScores(terms.held_out, f.name);
  apart.unseen_architectures = RecordedScores(terms.unseen_architectures, key);
  AddDatasets(synthetic, apart);
}

// As served: factors to 4 decimals, held-out scores to the report's precision.
SimulationManifest ManifestOf(const SimulationModel& s, const ManifestContext& context,
                              const ManifestTerms& terms) {
  SimulationManifest m = ManifestHead(s, context);
  const bool clean_everywhere =
      context.clean != nullptr && context.options->clean_terms_for_every_gpu;
  for (const Population& f : *context.populations) {
    if (const CleanRunsFamily* clean =
            clean_everywhere ? CleanFamilyOf(*context.clean, s.id, f.name) : nullptr) {
      AddCleanTerms(f, *clean, context, terms, m);
    } else {
      AddFittedTerms(s, f, context, terms, m);
    }
  }
  if (context.clean != nullptr && !clean_everywhere) {
    std::optional<allocsim::GpuTerms> own = GpuTermsOf(
        *context.clean, s.id,
        absl::StrCat("build/lab/calibration/gpuest-calibrate-memory --gpu-runs ",
                     context.clean->gpu, "=", context.clean->file,
                     " (deploy/calibrate-memory.sh); out-of-group fit over the clean "
                     "runs' architecture groups"));
    if (own) m.by_gpu.push_back(*std::move(own));
  }
  if (context.real != nullptr && context.real->serves_fit.count(s.id)) {
    absl::StrAppend(&m.made_by, "; with the real models of ", context.real->file.name,
                    " (families they cover: the upper bound from the point's errors on "
                    "architecture groups left out of the fit, its margin's quantile "
                    "chosen for coverage of groups left out; fitted on the OK rows "
                    "but those whose peak holds a transient by the trace's evidence, "
                    "lab/calibration/transient_evidence.h; for Transformers on "
                    "the real models alone, whose population GPUMemNet's text "
                    "classifiers are not: those, without a convolution, calibrate "
                    "the transformers without one)");
  }
  return m;
}

// The held-out rows of a family: the served simulators' upper bounds and points, the
// served MLP-based GPUMemNet's upper bin edge and Horus, against what was measured.
absl::StatusOr<FamilyReport> ScoreHeldOut(const Population& f,
                                          const TracedPopulation& traced,
                                          const core::GpuProfile& gpu,
                                          const core::Engine& engine,
                                          const ServedEstimators& served) {
  const std::string gpumemnet = absl::StrCat("gpumemnet-", f.name, "-mlp");
  std::map<std::string, std::vector<Scored>> scored, point;
  std::map<std::string, int> oom_above;
  FamilyReport family;
  family.family = f.name;
  for (const Row& r : traced.rows) {
    if (!r.held_out) continue;
    const MeasuredRow& m = *r.measured;
    v1::EstimateRequest request;
    *request.mutable_model() = m.model;
    const v1::FeatureVector features = core::FeaturesOf(request);
    const core::EstimationInput input{request, features, gpu};
    std::map<std::string, double> estimate;
    for (const SimulationModel& s : Simulations()) {
      v1::EstimatorResult result;
      std::vector<v1::Warning> warnings;
      GPUEST_RETURN_IF_ERROR(served.at(s.id)->Estimate(input, result, warnings));
      estimate[s.id] = result.memory().upper_bytes() / kMiB;
      if (!m.oom && m.peak_mib > 0) {
        point[s.id].push_back({result.memory().point_bytes() / kMiB, m.peak_mib});
      }
    }
    v1::EstimateRequest classifier_request = request;
    classifier_request.mutable_model()->clear_trace();
    classifier_request.add_estimators(gpumemnet);
    GPUEST_ASSIGN_OR_RETURN(const v1::EstimateResponse response,
                            engine.Estimate(classifier_request));
    const v1::MemoryEstimate& classified = response.results(0).memory();
    estimate[gpumemnet] =
        std::max(classified.upper_bytes(), classified.point_bytes()) / kMiB;
    estimate["horus"] =
        horus::HorusBytes(features.total_activations(), features.total_parameters(),
                          features.batch_size()) /
        kMiB;
    for (const auto& [id, mib] : estimate) {
      if (m.oom) {
        oom_above[id] += mib > gpu.memory_bytes / kMiB;
      } else if (m.peak_mib > 0) {
        scored[id].push_back({mib, m.peak_mib});
      }
    }
    family.oom_rows += m.oom;
  }
  for (const std::string& id : {std::string("allocsim"), std::string("analytic"),
                                gpumemnet, std::string("horus")}) {
    EstimatorScores& e = family.estimators.emplace_back();
    e.id = id;
    e.upper = Score(scored[id]);
    if (!point[id].empty()) e.point = Score(point[id]);
    e.oom_above_card = oom_above[id];
  }
  return family;
}

// The real rows' estimates as ScoreRealRows gathers them, by family and estimator id.
struct RealScoring {
  RealScoring(const ServedEstimators& served, double card_mib)
      : served(served), card_mib(card_mib) {}

  const ServedEstimators& served;
  double card_mib = 0;
  std::set<std::string> models, groups;
  std::map<std::string, std::map<std::string, std::vector<Scored>>> upper, point;
  std::map<std::string, std::map<std::string, int>> oom_above;
  std::map<std::string, int> oom_rows;
  // Family -> served simulation id -> the OK rows without a transient's evidence.
  std::map<std::string, std::map<std::string, std::vector<Scored>>> other_ok,
      other_ok_point;
  std::vector<std::string> ids;  // In the order first scored: the table's.
  // The served simulations' upper bounds of the row being scored, by id.
  std::map<std::string, double> served_upper, served_point;

  void Add(const std::string& family, const std::string& id, double upper_mib,
           std::optional<double> point_mib, const MeasuredRow& m) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    if (served.count(id)) {
      served_upper[id] = upper_mib;
      if (point_mib) served_point[id] = *point_mib;
    }
    if (m.oom) {
      oom_above[family][id] += upper_mib > card_mib;
      return;
    }
    upper[family][id].push_back({upper_mib, m.peak_mib});
    if (point_mib) point[family][id].push_back({*point_mib, m.peak_mib});
  }
};

// Real row i by each simulation as served (the out-of-group fit scored by the fits
// that never saw the row's architecture group, or GPUMemNet's fit, which never saw any
// real row) and by the candidate not served.
absl::Status ScoreSimulations(const RealRows& real, size_t i,
                              const core::EstimationInput& input, RealScoring& scoring) {
  const RealRow& r = real.rows[i];
  const MeasuredRow& m = *r.measured;
  for (const SimulationModel& s : Simulations()) {
    const auto fitted = real.out_of_group.at(s.id).find(i);
    const bool has_fit = fitted != real.out_of_group.at(s.id).end();
    if (has_fit && real.serves_fit.count(s.id) &&
        real.serves_fit.at(s.id).count(r.family)) {
      // Served: scored by the fits that never saw the row's architecture group.
      scoring.Add(r.family, s.id, fitted->second.upper_mib, fitted->second.point_mib, m);
      const v1::MemoryEstimate alone = allocsim::CalibratedEstimate(
          r.replay.at(s.id), input.gpu, real.gpumemnet_fit.at(s.id).at(r.family),
          allocsim::LargestConvOutputMib(m.model));
      scoring.Add(r.family, s.id + " (GPUMemNet fit, not served)",
                  alone.upper_bytes() / kMiB, alone.point_bytes() / kMiB, m);
    } else {
      // Served: fitted on GPUMemNet alone, so every real row is unseen.
      v1::EstimatorResult result;
      std::vector<v1::Warning> warnings;
      GPUEST_RETURN_IF_ERROR(scoring.served.at(s.id)->Estimate(input, result, warnings));
      scoring.Add(r.family, s.id, result.memory().upper_bytes() / kMiB,
                  result.memory().point_bytes() / kMiB, m);
      if (has_fit) {
        scoring.Add(r.family, s.id + " (out-of-group fit, not served)",
                    fitted->second.upper_mib, fitted->second.point_mib, m);
      }
    }
  }
  return absl::OkStatus();
}

// An OK row holding a transient by the trace's evidence goes apart; the other OK rows'
// scores are kept, to show what they change.
void ScoreTransient(const RealRow& r, RealScoring& scoring, RealModelsReport& report) {
  const MeasuredRow& m = *r.measured;
  TransientRows& t = report.transients[r.family];
  t.rows += r.transient.has_value();
  for (const auto& [id, upper_mib] : scoring.served_upper) {
    if (!r.transient) {
      scoring.other_ok[r.family][id].push_back({upper_mib, m.peak_mib});
      scoring.other_ok_point[r.family][id].push_back(
          {scoring.served_point.at(id), m.peak_mib});
      continue;
    }
    t.safe[id] += Safe(upper_mib, m.peak_mib);
    if (id == "allocsim" && !Safe(upper_mib, m.peak_mib)) {
      t.allocsim_unsafe.push_back(
          {absl::StrCat(m.model.name(), "@", m.model.batch_size()), m.peak_mib, upper_mib,
           *r.transient});
    }
  }
}

// Each family's table rows, and the transients' comparison rows, from what was scored.
void AddScores(RealScoring& scoring, RealModelsReport& report) {
  for (const auto& [family, rows] : scoring.oom_rows) {
    RealModelsFamily& f = report.families.emplace_back();
    f.family = family;
    f.oom_rows = rows;
    for (const std::string& id : scoring.ids) {
      if (scoring.upper[family][id].empty() && scoring.oom_above[family].count(id) == 0)
        continue;
      EstimatorScores& e = f.estimators.emplace_back();
      e.id = id;
      e.upper = Score(scoring.upper[family][id]);
      if (!scoring.point[family][id].empty()) e.point = Score(scoring.point[family][id]);
      e.oom_above_card = scoring.oom_above[family][id];
    }
  }
  for (auto& [family, t] : report.transients) {
    for (const auto& [id, rows] : scoring.other_ok[family])
      t.other_rows[id] = Score(rows);
    for (const auto& [id, rows] : scoring.other_ok_point[family]) {
      t.other_rows_point[id] = Score(rows);
    }
  }
}

// The SPIKE rows against the requirement the served estimators give them.
absl::Status ScoreSpikes(const RealRows& real, const core::GpuProfile& gpu,
                         const ServedEstimators& served, RealModelsReport& report) {
  for (const RealRow& r : real.spikes) {
    const MeasuredRow& m = *r.measured;
    v1::EstimateRequest request;
    *request.mutable_model() = m.model;
    const v1::FeatureVector features = core::FeaturesOf(request);
    const core::EstimationInput input{request, features, gpu};
    v1::EstimatorResult result;
    std::vector<v1::Warning> warnings;
    GPUEST_RETURN_IF_ERROR(served.at("allocsim")->Estimate(input, result, warnings));
    SpikeRows& spikes = report.spikes[r.family];
    ++spikes.rows;
    const double ratio = m.peak_mib / (result.memory().upper_bytes() / kMiB);
    spikes.above_requirement += ratio > 1;
    spikes.ratios.push_back(ratio);
  }
  return absl::OkStatus();
}

// The real rows by family: each simulation as served (the out-of-group fit, each row
// scored by the fits that never saw its architecture group, or GPUMemNet's fit, which
// never saw them), the candidate not served, the dataset's FakeTensor column and Horus.
absl::StatusOr<RealModelsReport> ScoreRealRows(const RealRows& real,
                                               const core::GpuProfile& gpu,
                                               const ServedEstimators& served,
                                               const MemoryCalibrationOptions& o) {
  RealModelsReport report;
  report.source = absl::StrCat("`", real.file.name,
                               "` (timm models on the A100 40GB, "
                               "lab/data/describe_timm.py)");
  report.safe_quantile = o.safe_quantile;
  report.card_mib = gpu.memory_bytes / kMiB;
  report.scored_shipped = o.score_models;
  report.rows_csv =
      "family,architecture_group,run,status,measured_mib,allocsim_reserved_mib,"
      "analytic_reserved_mib,allocsim_upper_mib,analytic_upper_mib,transient\n";
  RealScoring scoring{served, report.card_mib};
  for (size_t i = 0; i < real.rows.size(); ++i) {
    const RealRow& r = real.rows[i];
    const MeasuredRow& m = *r.measured;
    scoring.models.insert(m.model.name());
    scoring.groups.insert(r.group);
    scoring.oom_rows[r.family] += m.oom;
    v1::EstimateRequest request;
    *request.mutable_model() = m.model;
    const v1::FeatureVector features = core::FeaturesOf(request);
    GPUEST_RETURN_IF_ERROR(ScoreSimulations(real, i, {request, features, gpu}, scoring));
    if (!m.oom) ScoreTransient(r, scoring, report);
    absl::StrAppendFormat(&report.rows_csv,
                          "%s,%s,%s@%d,%s,%.0f,%.1f,%.1f,%.1f,%.1f,%s\n", r.family,
                          r.group, m.model.name(), m.model.batch_size(), m.status,
                          m.peak_mib, r.replay.at("allocsim").peak_reserved_bytes / kMiB,
                          r.replay.at("analytic").peak_reserved_bytes / kMiB,
                          scoring.served_upper["allocsim"],
                          scoring.served_upper["analytic"], r.transient ? "yes" : "no");
    scoring.served_upper.clear();
    scoring.served_point.clear();
    if (auto it = m.columns.find("fakeTensorMib"); it != m.columns.end()) {
      scoring.Add(r.family, "FakeTensor", it->second, std::nullopt, m);
    }
    scoring.Add(r.family, "horus",
                horus::HorusBytes(features.total_activations(),
                                  features.total_parameters(), features.batch_size()) /
                    kMiB,
                std::nullopt, m);
  }
  AddScores(scoring, report);
  GPUEST_RETURN_IF_ERROR(ScoreSpikes(real, gpu, served, report));
  report.crashed_rows = real.crashed;
  report.models = static_cast<int>(scoring.models.size());
  report.architecture_groups = static_cast<int>(scoring.groups.size());
  return report;
}

// Spearman's rank correlation of two equally long series (ties broken by order).
double RankCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < v.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t k = 0; k < order.size(); ++k) r[order[k]] = static_cast<double>(k);
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double mean = (static_cast<double>(a.size()) - 1) / 2;
  double num = 0, da = 0, db = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (ra[i] - mean) * (rb[i] - mean);
    da += (ra[i] - mean) * (ra[i] - mean);
    db += (rb[i] - mean) * (rb[i] - mean);
  }
  return da > 0 && db > 0 ? num / std::sqrt(da * db) : 0;
}

// What the synthetic CNNs' own terms cover, by mechanism, measured on GPUMemNet's CNN
// training rows: what their runs hold beyond the context and the simulated step (the
// residual the terms are fitted to), beside the optimizer state their traces already
// hold (all trained with Adam) and their largest convolution output. A residual that
// followed the optimizer state would be Adam's, and belong to every Adam-trained job;
// one that does not is the generated networks' own.
std::string SyntheticMechanismSection(const std::vector<Row>& rows, double context_mib) {
  std::vector<double> residual, state, conv;
  for (const Row& r : rows) {
    if (r.held_out || r.measured->oom || r.measured->peak_mib <= 0) continue;
    const allocsim::ReplayResult& replay = r.replay.at("allocsim");
    residual.push_back(r.measured->peak_mib - context_mib -
                       replay.peak_reserved_bytes / kMiB);
    uint64_t bytes = 0;
    const v1::AllocationTrace& t = r.measured->model.trace();
    for (int i = 0; i < t.size_bytes_size() && i < t.category_size(); ++i) {
      if (t.category(i) == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE)
        bytes += t.size_bytes(i);
    }
    state.push_back(bytes / kMiB);
    conv.push_back(allocsim::LargestConvOutputMib(r.measured->model));
  }
  if (residual.size() < 10) return "";
  return absl::StrFormat(
      "\n### What GPUMemNet's CNNs hold beyond their simulated step, by mechanism\n\n"
      "Their own terms (`cnn-synthetic`) serve GPUMemNet's generated CNNs only "
      "(`estimators/allocsim/population.h`: the population as the description shows "
      "it, never the optimizer). On their %zu completed training runs, all trained with "
      "Adam: measured - context - simulated reserved peak P10 / P50 / P90 = %.0f / %.0f "
      "/ %.0f MiB, while the optimizer state their traces already hold is P50 / P90 = "
      "%.0f / %.0f MiB; rank correlation of that residual with the optimizer state "
      "%.2f, with the largest convolution output %.2f. The residual does not follow "
      "Adam's state, which the trace holds for any job: it is the generated networks' "
      "own, and stays with them.\n\n",
      residual.size(), common::Quantile(residual, 0.1), common::Quantile(residual, 0.5),
      common::Quantile(residual, 0.9), common::Quantile(state, 0.5),
      common::Quantile(state, 0.9), RankCorrelation(residual, state),
      RankCorrelation(residual, conv));
}

// --score-models: the terms of the manifests scored, as shipped, with what each was
// fitted on (a digest unlike this run's dataset's: fitted on other inputs).
// inputs: this run's datasets, file -> sha256.
std::string ShippedTermsSection(const std::vector<SimulationManifest>& shipped,
                                const std::string& models_dir,
                                const std::map<std::string, std::string>& inputs) {
  if (shipped.empty()) return "";
  std::string md = absl::StrCat(
      "\n### The terms served (`", models_dir,
      "/`, as shipped)\n\n"
      "Every estimate in this section's tables, above and below, is the server's from "
      "these manifests as they are (`gpuest-calibrate-memory --score-models`); this "
      "run's own fits appear only where named as such (the calibration table above, "
      "`(out-of-group fit, not served)`, the clean runs' `own fit` and the goal "
      "table's rows `each run by the fit without its architecture group`). A "
      "dataset's digest says which version of it the terms were fitted on; `*`: not "
      "the version this run read.\n\n"
      "| estimator | terms | upper: intercept b | upper: factor k_safe | upper: conv c | "
      "point: intercept | point: factor | fitted on (sha256, first 12) |\n"
      "|---|---|---|---|---|---|---|---|\n");
  auto add = [&md, &inputs](const std::string& id, const std::string& gpu,
                            const allocsim::FamilyTerms& t) {
    std::vector<std::string> files;
    for (const core::manifest::DatasetDigest& d : t.datasets) {
      const auto read = inputs.find(d.file);
      const bool other = read != inputs.end() && read->second != d.sha256;
      files.push_back(
          absl::StrCat("`", d.file, "` ", d.sha256.substr(0, 12), other ? " *" : ""));
    }
    const FamilyCalibration& c = t.calibration;
    absl::StrAppendFormat(
        &md, "| %s | %s%s | %.0f MiB | %.4f | %.2f | %.0f MiB | %.4f | %s |\n", id,
        allocsim::TermsName(t), gpu, c.intercept_mib, c.safe_factor, c.conv_output_factor,
        c.point_intercept_mib, c.point_factor, absl::StrJoin(files, ", "));
  };
  for (const SimulationManifest& m : shipped) {
    for (const allocsim::FamilyTerms& t : m.families) add(m.id, "", t);
    for (const allocsim::GpuTerms& g : m.by_gpu) {
      for (const allocsim::FamilyTerms& t : g.families) {
        add(m.id, absl::StrCat(" (", g.gpu, " only)"), t);
      }
    }
  }
  return md + "\n";
}

// The step built from the layers against the traced one, on the real rows (issue
// "layers": the layer rules should reproduce what the trace records).
std::string LayerAgreementSection(const RealRows& real) {
  std::vector<LayerAgreementRun> runs;
  for (const std::vector<RealRow>* rows : {&real.rows, &real.spikes}) {
    for (const RealRow& r : *rows) {
      const MeasuredRow& m = *r.measured;
      LayerAgreementRun& run = runs.emplace_back();
      run.family = r.family;
      run.model = m.model.name();
      run.traced_allocated_mib = r.replay.at("allocsim").peak_allocated_bytes / kMiB;
      run.layers_allocated_mib = r.replay.at("analytic").peak_allocated_bytes / kMiB;
      std::set<std::string> types;
      for (const v1::Layer& layer : m.model.layers()) {
        types.insert(core::CanonicalLayerType(layer.type()));
      }
      run.layer_types.assign(types.begin(), types.end());
    }
  }
  return absl::StrCat(
      "\n### The step built from the layers against the traced step\n\n"
      "Every traced run of `",
      real.file.name,
      "` (OK, SPIKE and out-of-memory runs alike: no measurement enters), its simulated "
      "allocated peak from the step built from its layers (`analytic`, "
      "estimators/allocsim/layer_trace.h) against the one from its traced step "
      "(`allocsim`), both replayed through the same allocator simulation.\n\n",
      RenderLayerAgreement(runs, 0.05, 8), "\n");
}

// "GPU=FILE" (--gpu-runs, --holdout-runs) as its two parts; InvalidArgument naming flag.
absl::StatusOr<HoldoutFile> GpuAndFile(const std::string& spec, const char* flag) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " takes GPU=FILE (e.g. h200=build/datasets/runs.jsonl), not '", spec, "'"));
  }
  return HoldoutFile{spec.substr(0, eq), spec.substr(eq + 1)};
}

// Rewrites the calibrated GPU's context in gpu_profiles.json; the GPUs whose constants
// are assumed take the same figure (same driver and CUDA stack, unmeasured). Another
// GPU calibrated on its own measurements (gpuest-collect calibrate) keeps its figure.
absl::Status WriteContext(const std::string& path, double context_mib,
                          const std::string& context_basis) {
  GPUEST_ASSIGN_OR_RETURN(core::GpuProfilesManifest profiles,
                          core::GpuProfilesManifest::Load(path));
  GPUEST_RETURN_IF_ERROR(profiles.SetMeasuredContext(kCalibratedGpu, "", context_mib,
                                                     context_basis,
                                                     /*assumed_too=*/true));
  // The stack GPUMemNet's runs were measured on (shared/data/README.md: PyTorch 2.4.1,
  // CUDA 12.2, and so lazy module loading, PyTorch's default since 1.13 on CUDA 11.7):
  // a job on another stack is answered with a warning (stack_context.h).
  for (core::GpuProfile& g : profiles.gpus) {
    if (g.id == kCalibratedGpu)
      g.context_stack = core::StackContext{12, "2.4", "LAZY", 0, "", ""};
  }
  return common::WriteTextFile(path, profiles.Text());
}

// How GPUMemNet's held-out rows were chosen, in words.
std::string SplitInWords(const MemoryCalibrationOptions& o) {
  return absl::StrFormat(
      "GPUMemNet's train/test split: test fraction %.2f, seed %d (gpuest-train's "
      "HeldOutSplit)",
      o.test_fraction, static_cast<int>(o.seed));
}

// The model repository's estimators: GPUMemNet's, to compare with. The simulation
// manifests are what this run rewrites: none is built from them.
absl::StatusOr<std::unique_ptr<core::EstimatorRegistry>> LoadComparedEstimators(
    const MemoryCalibrationOptions& o) {
  core::RegistryOptions registry_options =
      estimators::WithDefaultFactories({o.models_dir, "cpu"});
  registry_options.factories[SimulationManifest::kEstimatorType] =
      [](const core::ModelArtifact&, const core::RegistryOptions&) {
        return absl::StatusOr<std::unique_ptr<core::Estimator>>(nullptr);
      };
  return core::EstimatorRegistry::Load(registry_options);
}

absl::StatusOr<core::GpuProfile> CalibratedGpu(const core::GpuProfiles& gpus,
                                               const MemoryCalibrationOptions& o) {
  const core::GpuProfile* calibrated_gpu = gpus.Find(kCalibratedGpu);
  if (calibrated_gpu == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(kCalibratedGpu, " is not in ", o.models_dir, "/gpu_profiles.json"));
  }
  return *calibrated_gpu;
}

// Every population's traced rows and, with timm_rows, the real rows (null without);
// the training rows' CSV where asked.
absl::Status LoadRows(const MemoryCalibrationOptions& o,
                      const std::vector<Population>& populations,
                      const core::GpuProfile& gpu,
                      std::map<std::string, TracedPopulation>& traced,
                      std::unique_ptr<RealRows>& real) {
  for (const Population& f : populations) {
    GPUEST_RETURN_IF_ERROR(LoadTracedPopulation(f, o, gpu, traced[f.name]));
  }
  if (!o.timm_rows.empty()) {
    real = std::make_unique<RealRows>();
    GPUEST_RETURN_IF_ERROR(LoadRealRows(o, populations, gpu, *real));
  }
  if (!o.training_rows_csv.empty()) {
    GPUEST_RETURN_IF_ERROR(
        WriteTrainingRowsCsv(o.training_rows_csv, populations, traced));
  }
  return absl::OkStatus();
}

// --gpu-runs: that GPU's own terms from its clean runs; none without the flag.
absl::StatusOr<std::optional<CleanRunsCalibration>> CalibrateGpuRuns(
    const MemoryCalibrationOptions& o, const core::GpuProfiles& gpus,
    const Calibrations& calibration) {
  if (o.gpu_runs.empty()) return std::nullopt;
  GPUEST_ASSIGN_OR_RETURN(const HoldoutFile runs, GpuAndFile(o.gpu_runs, "--gpu-runs"));
  const std::string& id = runs.gpu;
  const core::GpuProfile* runs_gpu = gpus.Find(id);
  if (runs_gpu == nullptr) {
    return absl::NotFoundError(absl::StrCat("--gpu-runs: ", id, " is not in ",
                                            o.models_dir, "/gpu_profiles.json"));
  }
  if (!runs_gpu->constants_calibrated) {
    return absl::FailedPreconditionError(
        absl::StrCat("--gpu-runs: ", id,
                     "'s context is assumed, not measured: measure it first "
                     "(gpuest-collect calibrate), since the runs' peaks include it"));
  }
  FitOptions options;
  options.safe_quantile = o.safe_quantile;
  return CalibrateOnCleanRuns(runs.path, *runs_gpu, o.steps, options,
                              o.max_conv_output_factor, calibration);
}

// The simulation estimators as they will be served, built from the manifests this
// run's fits make (written below with --write-models).
absl::StatusOr<ServedEstimators> ServedFromFits(const ManifestContext& context,
                                                const Calibrations& calibration) {
  const std::map<std::string, Scores> none;
  ServedEstimators served;
  for (const SimulationModel& s : Simulations()) {
    GPUEST_ASSIGN_OR_RETURN(
        served[s.id],
        allocsim::CreateSimulationEstimator(
            {s.id,
             context.options->models_dir + "/" + s.id,
             ManifestOf(s, context, {calibration.at(s.id), none, none}).Text(),
             {}},
            {}));
  }
  return served;
}

// --score-models: the manifests in models/ as they are, served in place of this run's
// fits; returned as read.
absl::StatusOr<std::vector<SimulationManifest>> ServeShipped(
    const std::string& models_dir, ServedEstimators& served) {
  std::vector<SimulationManifest> shipped;
  for (const SimulationModel& s : Simulations()) {
    const std::string dir = models_dir + "/" + s.id;
    const std::string path = dir + "/manifest.json";
    GPUEST_ASSIGN_OR_RETURN(const std::string text,
                            common::ReadTextFile(path, common::kMaxDatasetFileBytes));
    GPUEST_ASSIGN_OR_RETURN(SimulationManifest m, SimulationManifest::Parse(text, path));
    GPUEST_ASSIGN_OR_RETURN(
        served[s.id], allocsim::CreateSimulationEstimator({s.id, dir, text, {}}, {}));
    shipped.push_back(std::move(m));
  }
  return shipped;
}

// The real models' section (and --real-rows-csv), none without them;
// unseen_architectures: the served upper bound's scores on them, by simulation id and
// family.
absl::StatusOr<std::string> RealModelsSectionOf(
    const ManifestContext& context, const core::GpuProfile& gpu,
    const ServedEstimators& served, const Calibrations& calibration,
    std::map<std::string, std::map<std::string, Scores>>& unseen_architectures) {
  if (context.real == nullptr) return "";
  const RealRows& real = *context.real;
  const MemoryCalibrationOptions& o = *context.options;
  GPUEST_ASSIGN_OR_RETURN(const RealModelsReport report,
                          ScoreRealRows(real, gpu, served, o));
  std::string section = RenderRealModelsSection(report);
  absl::StrAppend(&section, LayerAgreementSection(real));
  if (!o.real_rows_csv.empty()) {
    GPUEST_RETURN_IF_ERROR(common::WriteTextFile(o.real_rows_csv, report.rows_csv));
  }
  for (const RealModelsFamily& f : report.families) {
    for (const EstimatorScores& e : f.estimators) {
      if (calibration.count(e.id)) unseen_architectures[e.id][f.family] = e.upper;
    }
  }
  return section;
}

// GPUMemNet's held-out split, every estimator as served, with this run's calibration;
// held_out: the simulations' upper-bound scores, by id and family.
absl::StatusOr<SimulationReport> ScoreHeldOutSplit(
    const ManifestContext& context, const core::GpuProfile& gpu,
    const core::Engine& engine, const ServedEstimators& served,
    const Calibrations& calibration,
    std::map<std::string, std::map<std::string, Scores>>& held_out) {
  const MemoryCalibrationOptions& o = *context.options;
  SimulationReport section{context.split,   context.context_mib,     o.steps,
                           o.safe_quantile, gpu.memory_bytes / kMiB, {},
                           o.score_models};
  for (const Population& f : *context.populations) {
    GPUEST_ASSIGN_OR_RETURN(
        FamilyReport family,
        ScoreHeldOut(f, (*context.traced)[f.name], gpu, engine, served));
    for (const EstimatorScores& e : family.estimators) {
      if (calibration.count(e.id)) held_out[e.id][f.name] = e.upper;
    }
    for (const SimulationModel& s : Simulations()) {
      family.calibration.emplace_back(s.id, calibration.at(s.id).at(f.name));
      if (f.synthetic_without_convolutions) {
        family.calibration.emplace_back(
            absl::StrCat(s.id, " (without convolutions)"),
            calibration.at(s.id).at(allocsim::TermsKey(f.name, true)));
      }
    }
    section.families.push_back(std::move(family));
  }
  return section;
}

// --write-models: the calibrated GPU's context and the simulation manifests.
absl::Status WriteModels(
    const ManifestContext& context, const Calibrations& calibration,
    std::map<std::string, std::map<std::string, Scores>>& held_out,
    std::map<std::string, std::map<std::string, Scores>>& unseen_architectures) {
  const std::string& models_dir = context.options->models_dir;
  const std::string basis = absl::StrFormat(
      "median of measured - simulated peak over the MLP training rows of GPUMemNet's "
      "A100 40GB measurements (%s; gpuest-calibrate-memory)",
      context.split);
  GPUEST_RETURN_IF_ERROR(
      WriteContext(models_dir + "/gpu_profiles.json", context.context_mib, basis));
  for (const SimulationModel& s : Simulations()) {
    const std::string dir = models_dir + "/" + s.id;
    std::filesystem::create_directories(dir);
    const ManifestTerms terms{calibration.at(s.id), held_out[s.id],
                              unseen_architectures[s.id]};
    GPUEST_RETURN_IF_ERROR(common::WriteTextFile(dir + "/manifest.json",
                                                 ManifestOf(s, context, terms).Text()));
    std::fprintf(stderr, "wrote %s/manifest.json\n", dir.c_str());
  }
  return absl::OkStatus();
}

// The goal table's rows for the clean runs' own fits, each run by the fit without its
// architecture group.
std::vector<GoalRow> CleanSplitGoals(const CleanRunsCalibration& clean) {
  std::vector<GoalRow> rows;
  for (const auto& [id, clean_families] : clean.by_simulation) {
    for (const CleanRunsFamily& f : clean_families) {
      GoalRow row;
      row.population = absl::StrFormat(
          "%s's terms on %s's clean runs (`%s`), %s, each run by the fit without its "
          "architecture group",
          id, clean.gpu, clean.file, f.family);
      row.runs = f.runs;
      row.safe = f.upper.safe;
      row.within = f.upper.safe_and_tight;
      row.point_mape = f.point.mape;
      row.safe_goal = 0.95;
      row.within_goal = 0.90;
      row.mape_goal = 5;
      rows.push_back(row);
    }
  }
  return rows;
}

// The bound's goal table (bound_goals.h), on the served estimators.
absl::StatusOr<std::string> GoalSection(const ManifestContext& context,
                                        const ServedEstimators& served,
                                        const core::GpuProfiles& gpus,
                                        const core::GpuProfile& gpu) {
  GoalInputs goals;
  goals.served = &served;
  goals.gpus = &gpus;
  goals.calibrated_gpu = &gpu;
  goals.timm = context.real != nullptr ? &context.real->file : nullptr;
  for (const std::string& spec : context.options->holdout_runs) {
    GPUEST_ASSIGN_OR_RETURN(HoldoutFile holdout, GpuAndFile(spec, "--holdout-runs"));
    goals.holdout.push_back(std::move(holdout));
  }
  if (context.clean != nullptr) goals.clean_splits = CleanSplitGoals(*context.clean);
  return RenderBoundGoals(goals);
}

// The clean runs' section, none without them.
std::string CleanRunsSectionOf(const ManifestContext& context) {
  if (context.clean == nullptr) return "";
  const MemoryCalibrationOptions& o = *context.options;
  return RenderCleanRunsSection(*context.clean, kCalibratedGpu, o.safe_quantile,
                                o.score_models);
}

// This run's datasets: file -> sha256.
std::map<std::string, std::string> InputDigests(const ManifestContext& context) {
  std::map<std::string, std::string> inputs;
  for (auto& [name, population] : *context.traced) {
    for (const data::DatasetFile& file : population.files)
      inputs[file.name] = file.sha256;
  }
  if (context.real != nullptr)
    inputs[context.real->file.name] = context.real->file.sha256;
  if (context.clean != nullptr) inputs[context.clean->file] = context.clean->sha256;
  return inputs;
}

}  // namespace

absl::StatusOr<std::string> CalibrateMemory(const MemoryCalibrationOptions& o) {
  const std::vector<Population> populations = Populations(o);
  GPUEST_ASSIGN_OR_RETURN(std::unique_ptr<core::EstimatorRegistry> registry,
                          LoadComparedEstimators(o));
  const core::Engine engine(std::move(registry), core::ValidationLimits{});
  const core::GpuProfiles& gpus = engine.registry()->gpus();
  GPUEST_ASSIGN_OR_RETURN(core::GpuProfile gpu, CalibratedGpu(gpus, o));
  std::map<std::string, TracedPopulation> traced;
  std::unique_ptr<RealRows> real;
  GPUEST_RETURN_IF_ERROR(LoadRows(o, populations, gpu, traced, real));

  // Calibration, on training rows only: the context first (the MLP rows' allocations
  // are the best understood), then per family.
  GPUEST_ASSIGN_OR_RETURN(const double context_mib,
                          FitContextMib(TrainingRows(traced["mlp"].rows, "allocsim")));
  gpu.context_bytes = static_cast<uint64_t>(context_mib) << 20;
  GPUEST_ASSIGN_OR_RETURN(const Calibrations calibration,
                          CalibratePopulations(populations, traced, real.get(), gpu, o));
  GPUEST_ASSIGN_OR_RETURN(const std::optional<CleanRunsCalibration> clean,
                          CalibrateGpuRuns(o, gpus, calibration));

  const ManifestContext context{
      SplitInWords(o),          context_mib, &o, &populations, &traced, real.get(),
      clean ? &*clean : nullptr};
  GPUEST_ASSIGN_OR_RETURN(ServedEstimators served, ServedFromFits(context, calibration));
  // --score-models: each real row is then scored by the shipped terms, the
  // out-of-group fit as the candidate not served.
  std::vector<SimulationManifest> shipped;
  if (o.score_models) {
    GPUEST_ASSIGN_OR_RETURN(shipped, ServeShipped(o.models_dir, served));
    if (real != nullptr) real->serves_fit.clear();
  }

  // Id -> family -> the served upper bound's scores on the real models.
  std::map<std::string, std::map<std::string, Scores>> unseen_architectures;
  GPUEST_ASSIGN_OR_RETURN(
      const std::string real_section,
      RealModelsSectionOf(context, gpu, served, calibration, unseen_architectures));
  std::map<std::string, std::map<std::string, Scores>> held_out;  // Id -> family.
  GPUEST_ASSIGN_OR_RETURN(
      const SimulationReport section,
      ScoreHeldOutSplit(context, gpu, engine, served, calibration, held_out));
  if (o.write_models) {
    GPUEST_RETURN_IF_ERROR(
        WriteModels(context, calibration, held_out, unseen_architectures));
  }
  GPUEST_ASSIGN_OR_RETURN(const std::string goal_section,
                          GoalSection(context, served, gpus, gpu));
  return absl::StrCat(RenderSimulationSection(section),
                      ShippedTermsSection(shipped, o.models_dir, InputDigests(context)),
                      SyntheticMechanismSection(traced["cnn"].rows, context_mib),
                      real_section, CleanRunsSectionOf(context), goal_section);
}

}  // namespace gpuest::calibration
