#include "lab/calibration/clean_runs.h"

#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/core/features.h"
#include "lab/calibration/fit_choice.h"
#include "lab/calibration/simulations.h"
#include "lab/data/measured_rows.h"

namespace gpuest::calibration {
namespace {

constexpr double kMiB = gpuest::common::kMiB;

// The completed, traced runs of one model family, each with what every simulation
// makes of it, and their architecture groups.
struct FamilyRuns {
  std::vector<const data::MeasuredRow*> members;
  std::map<const data::MeasuredRow*, std::map<std::string, allocsim::ReplayResult>>
      replays;
  std::set<std::string> groups;
};

// Family -> its completed, traced runs.
absl::StatusOr<std::map<std::string, FamilyRuns>> RunsByFamily(
    const data::MeasuredFile& file, const core::GpuProfile& gpu, int steps) {
  std::map<std::string, FamilyRuns> runs;
  for (const data::MeasuredRow& m : file.rows) {
    if (m.oom || m.status != "OK" || m.peak_mib <= 0 || !m.model.has_trace()) continue;
    v1::EstimateRequest request;
    *request.mutable_model() = m.model;
    FamilyRuns& family = runs[common::FamilyName(core::FeaturesOf(request).family())];
    family.members.push_back(&m);
    family.groups.insert(ArchitectureGroupOf(m.model.name()));
    GPUEST_ASSIGN_OR_RETURN(family.replays[&m], ReplayEach(m.model, gpu, steps));
  }
  return runs;
}

// What every family's fits over one file of clean runs share.
struct CleanRunsContext {
  const std::string& runs_file;
  const core::GpuProfile& gpu;
  const FitOptions& options;
  double cnn_max_conv_factor;
  const CalibratedTerms& calibrated;
};

// The calibrated GPU's terms for simulation id and family, or nullptr.
const allocsim::FamilyCalibration* TermsOf(const CalibratedTerms& calibrated,
                                           const std::string& id,
                                           const std::string& family) {
  const auto terms = calibrated.find(id);
  if (terms == calibrated.end()) return nullptr;
  const auto t = terms->second.find(family);
  return t == terms->second.end() ? nullptr : &t->second;
}

// Simulation s's out-of-group fit over one family's runs, grouped by architecture
// group, scored beside the calibrated GPU's terms for the family on the same runs.
absl::Status FitFamily(const CleanRunsContext& c, const std::string& family,
                       const FamilyRuns& runs, const SimulationModel& s,
                       CleanRunsCalibration& out) {
  FitOptions family_options = c.options;
  family_options.max_conv_factor = family == "cnn" ? c.cnn_max_conv_factor : 0;
  // The margin's quantile chosen on architecture groups left out (calibration.h):
  // the served terms are for architecture groups these runs never saw.
  family_options.group_coverage = c.options.safe_quantile;
  std::vector<GroupedRow> rows;
  for (const data::MeasuredRow* m : runs.members) {
    rows.push_back({ArchitectureGroupOf(m->model.name()),
                    {runs.replays.at(m).at(s.id), m->peak_mib,
                     allocsim::LargestConvOutputMib(m->model)},
                    true,
                    out.gpu});
  }
  absl::StatusOr<OutOfGroupFit> fit = FitOutOfGroup(rows, c.gpu, family_options);
  if (!fit.ok()) {
    return absl::Status(fit.status().code(),
                        absl::StrCat(c.runs_file, ": ", family, " runs on ", c.gpu.id,
                                     ": ", fit.status().message()));
  }
  const allocsim::FamilyCalibration* theirs = TermsOf(c.calibrated, s.id, family);
  std::vector<Scored> upper, point, their_upper, their_point;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double measured = rows[i].row.measured_mib;
    upper.push_back({fit->upper_mib[i], measured});
    point.push_back({fit->point_mib[i], measured});
    if (theirs == nullptr) continue;
    const v1::MemoryEstimate e = allocsim::CalibratedEstimate(
        rows[i].row.replay, c.gpu, *theirs, rows[i].row.conv_output_mib);
    their_upper.push_back({e.upper_bytes() / kMiB, measured});
    their_point.push_back({e.point_bytes() / kMiB, measured});
  }
  CleanRunsFamily& f = out.by_simulation[s.id].emplace_back();
  f.family = family;
  f.runs = static_cast<int>(runs.members.size());
  f.architecture_groups = static_cast<int>(runs.groups.size());
  f.calibration = fit->calibration;
  f.margin_quantile = fit->margin_quantile;
  f.upper = Score(upper);
  f.point = Score(point);
  f.calibrated_upper = Score(their_upper);
  f.calibrated_point = Score(their_point);
  // Without terms of its own elsewhere the family would get the most conservative
  // family's: the own fit serves if it is safe enough.
  f.served =
      theirs == nullptr
          ? f.upper.safe >= c.options.safe_quantile
          : CandidateServes(
                {f.calibrated_upper.safe, f.calibrated_upper.safe_and_tight, 0},
                {f.upper.safe, f.upper.safe_and_tight, 0}, c.options.safe_quantile);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CleanRunsCalibration> CalibrateOnCleanRuns(
    const std::string& runs_file, const core::GpuProfile& gpu, int steps,
    FitOptions options, double cnn_max_conv_factor, const CalibratedTerms& calibrated) {
  GPUEST_ASSIGN_OR_RETURN(const data::MeasuredFile file,
                          data::ReadExportedRows(runs_file));
  CleanRunsCalibration out;
  out.gpu = gpu.id;
  out.context_mib = static_cast<double>(gpu.context_bytes) / kMiB;
  out.file = file.name;
  out.sha256 = file.sha256;
  GPUEST_ASSIGN_OR_RETURN(const auto runs, RunsByFamily(file, gpu, steps));
  const CleanRunsContext c{runs_file, gpu, options, cnn_max_conv_factor, calibrated};
  for (const auto& [family, family_runs] : runs) {
    if (family_runs.groups.size() < 2) {  // Nothing to leave out: it keeps its terms.
      std::fprintf(stderr,
                   "%s: the %s runs on %s are of one architecture group; it is not "
                   "calibrated on them\n",
                   runs_file.c_str(), family.c_str(), gpu.id.c_str());
      continue;
    }
    for (const SimulationModel& s : Simulations()) {
      GPUEST_RETURN_IF_ERROR(FitFamily(c, family, family_runs, s, out));
    }
  }
  if (out.by_simulation.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(runs_file,
                     ": no completed, traced runs of two or more architecture groups "
                     "of one model family to calibrate on"));
  }
  return out;
}

const CleanRunsFamily* CleanFamilyOf(const CleanRunsCalibration& c, const std::string& id,
                                     const std::string& family) {
  const auto it = c.by_simulation.find(id);
  if (it == c.by_simulation.end()) return nullptr;
  for (const CleanRunsFamily& f : it->second) {
    if (f.family == family) return &f;
  }
  return nullptr;
}

std::optional<allocsim::GpuTerms> GpuTermsOf(const CleanRunsCalibration& c,
                                             const std::string& id,
                                             const std::string& made_by) {
  allocsim::GpuTerms g;
  g.gpu = c.gpu;
  g.context_mib = c.context_mib;
  g.made_by = made_by;
  for (const CleanRunsFamily& f : c.by_simulation.at(id)) {
    if (!f.served) continue;
    allocsim::FamilyTerms& t = g.families.emplace_back();
    t.family = f.family;
    t.calibration = AsRecorded(f.calibration);
    t.unseen_architectures = AsRecorded(f.upper);
    t.datasets.push_back(
        {c.file, c.sha256, "clean runs, left out by architecture group"});
  }
  if (g.families.empty()) return std::nullopt;
  return g;
}

std::string RenderCleanRunsSection(const CleanRunsCalibration& c,
                                   const std::string& calibrated_gpu,
                                   double safe_quantile, bool scored_shipped) {
  std::string md = absl::StrFormat(
      "### %s: its own clean runs\n\n"
      "`%s`: runs on the %s with cuDNN benchmark mode off and no cap "
      "(`data/h200-benchmark-off/`), so each peak is the step's, with no search "
      "transient: what the requirement stands for. The peak is the allocator's "
      "reserved peak plus the %s's context (%.0f MiB). `own fit`: the out-of-group "
      "fit (above) over these runs, its margin's quantile the smallest that keeps "
      "%.0f %% of the runs safe over architecture groups left out one at a time "
      "(chosen again without each group scored, which never sees it: "
      "calibration.h, group_coverage); each run scored by the fit that never saw its "
      "architecture group; `%s's terms`: the terms above, which saw none of these "
      "runs. The own fit is served for the %s, in place of "
      "those, where it keeps %.0f %% of the runs safe and more of them safe and tight, "
      "or where those keep fewer than %.0f %% safe.%s\n\n"
      "| family | estimator | runs | architecture groups | MAPE | safe | safe and "
      "tight | point MAPE | margin quantile | served |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      c.gpu, c.file, c.gpu, c.gpu, c.context_mib, 100 * safe_quantile, calibrated_gpu,
      c.gpu, 100 * safe_quantile, 100 * safe_quantile,
      scored_shipped ? " Here both are this run's fits, and `served` what its rule "
                       "would choose: the terms served are the shipped ones (\"The "
                       "terms served\", above)."
                     : "");
  for (const auto& [id, families] : c.by_simulation) {
    for (const CleanRunsFamily& f : families) {
      for (const bool own : {true, false}) {
        if (!own && f.calibrated_upper.n == 0) continue;  // No terms elsewhere.
        const Scores& upper = own ? f.upper : f.calibrated_upper;
        const Scores& point = own ? f.point : f.calibrated_point;
        absl::StrAppendFormat(
            &md,
            "| %s | %s (%s) | %d | %d | %.1f %% | %.3f | %.3f | %.1f %% | %s | %s |\n",
            f.family, id, own ? "own fit" : absl::StrCat(calibrated_gpu, "'s terms"),
            f.runs, f.architecture_groups, upper.mape, upper.safe, upper.safe_and_tight,
            point.mape, own ? absl::StrFormat("%.3f", f.margin_quantile) : "-",
            own == f.served ? "yes" : "no");
      }
    }
  }
  return md;
}

}  // namespace gpuest::calibration
