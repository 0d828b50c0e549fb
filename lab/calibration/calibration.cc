#include "lab/calibration/calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "common/quantile.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace gpuest::calibration {
namespace {

constexpr double kMiB = gpuest::common::kMiB;  // Fractional MiB.

double SimulatedMib(const CalibrationRow& row) {
  return static_cast<double>(row.replay.peak_reserved_bytes) / kMiB;
}

// What the upper bound scales (allocsim::CalibratedEstimate): the simulated peak and
// what a layer-built step's uncertain layers may hold beyond it.
double UpperSimulatedMib(const CalibrationRow& row) {
  return SimulatedMib(row) + static_cast<double>(row.replay.uncertain_bytes) / kMiB;
}

}  // namespace

bool Safe(double estimate_mib, double measured_mib) {
  return estimate_mib >= measured_mib;
}

bool SafeAndTight(double estimate_mib, double measured_mib) {
  return Safe(estimate_mib, measured_mib) && estimate_mib <= kTightFactor * measured_mib;
}

Scores Score(const std::vector<Scored>& rows) {
  Scores s;
  s.n = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::vector<double> abs_error;
  for (const Scored& r : rows) {
    const double error = std::abs(r.estimate_mib - r.measured_mib);
    abs_error.push_back(error);
    s.mape += error / r.measured_mib;
    s.safe += Safe(r.estimate_mib, r.measured_mib);
    s.safe_and_tight += SafeAndTight(r.estimate_mib, r.measured_mib);
  }
  std::sort(abs_error.begin(), abs_error.end());
  s.mape = 100 * s.mape / s.n;
  s.safe /= s.n;
  s.safe_and_tight /= s.n;
  s.p50_abs_error_mib = common::QuantileOfSorted(abs_error, 0.5);
  s.p90_abs_error_mib = common::QuantileOfSorted(abs_error, 0.9);
  return s;
}

namespace {

// x to `decimals` places, as round(x * 10^decimals) / 10^decimals: the decimal a
// reader expects, printed without a trailing ...0000002.
double Round(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

}  // namespace

allocsim::FamilyCalibration AsRecorded(allocsim::FamilyCalibration c) {
  c.safe_factor = Round(c.safe_factor, 4);
  c.point_factor = Round(c.point_factor, 4);
  return c;
}

allocsim::HeldOutScores AsRecorded(const Scores& s) {
  return allocsim::HeldOutScores{s.n, Round(s.mape, 1), Round(s.safe, 3),
                                 Round(s.safe_and_tight, 3)};
}

absl::StatusOr<allocsim::FamilyCalibration> FitFamilyCalibration(
    const std::vector<CalibrationRow>& rows, const core::GpuProfile& gpu,
    const FitOptions& options) {
  if (rows.empty()) return absl::InvalidArgumentError("no training rows to calibrate on");
  const double context_mib = static_cast<double>(gpu.context_bytes) / kMiB;
  allocsim::FamilyCalibration best;
  int best_tight = -1;
  for (double intercept = 0; intercept <= options.max_intercept_mib;
       intercept += options.intercept_step_mib) {
    std::vector<double> needed, needed_upper;
    for (const CalibrationRow& r : rows) {
      needed.push_back((r.measured_mib - context_mib - intercept) /
                       std::max(1.0, SimulatedMib(r)));
      needed_upper.push_back((r.measured_mib - context_mib - intercept) /
                             std::max(1.0, UpperSimulatedMib(r)));
    }
    std::sort(needed.begin(), needed.end());
    std::sort(needed_upper.begin(), needed_upper.end());
    allocsim::FamilyCalibration c;
    c.intercept_mib = c.point_intercept_mib = intercept;
    c.safe_factor =
        std::max(1.0, common::QuantileOfSorted(needed_upper, options.safe_quantile));
    c.point_factor = std::max(0.05, common::QuantileOfSorted(needed, 0.5));
    int tight = 0;
    for (const CalibrationRow& r : rows) {
      const v1::MemoryEstimate m =
          allocsim::CalibratedEstimate(r.replay, gpu, c, r.conv_output_mib);
      tight += SafeAndTight(m.upper_bytes() / kMiB, r.measured_mib);
    }
    if (tight > best_tight) {
      best_tight = tight;
      best.intercept_mib = c.intercept_mib;
      best.safe_factor = c.safe_factor;
    }
  }
  GPUEST_ASSIGN_OR_RETURN(const PointTerms point,
                          FitPointTerms(rows, context_mib, options));
  best.point_intercept_mib = point.intercept_mib;
  best.point_factor = point.factor;
  return best;
}

absl::StatusOr<PointTerms> FitPointTerms(const std::vector<CalibrationRow>& rows,
                                         double context_mib, const FitOptions& options) {
  if (rows.empty()) return absl::InvalidArgumentError("no training rows to calibrate on");
  PointTerms best;
  double best_mape = std::numeric_limits<double>::infinity();
  std::vector<double> needed(rows.size());
  for (double intercept = 0; intercept <= options.max_intercept_mib;
       intercept += options.intercept_step_mib) {
    for (size_t i = 0; i < rows.size(); ++i) {
      needed[i] = (rows[i].measured_mib - context_mib - intercept) /
                  std::max(1.0, SimulatedMib(rows[i]));
    }
    const double factor = std::max(0.05, common::Quantile(needed, 0.5));
    double mape = 0;
    for (const CalibrationRow& r : rows) {
      const double point = context_mib + intercept + factor * SimulatedMib(r);
      mape += std::abs(point - r.measured_mib) / r.measured_mib;
    }
    if (mape < best_mape) {
      best_mape = mape;
      best = {intercept, factor};
    }
  }
  return best;
}

namespace {

// The upper bound's terms over out-of-group points: upper = context + slack + margin x
// (point - context) + conv x the row's largest convolution output. For each (slack,
// conv) of the grids, margin is the smallest keeping safe_quantile of each dataset's
// rows safe (every dataset on its own, so that a large one cannot buy a small one's
// safety away); the pair with the most safe-and-tight rows, as a share of each dataset
// summed, wins (the smallest slack, then conv, on a tie).
struct UpperTerms {
  double slack_mib = 0;
  double margin = 1;
  double conv_output_factor = 0;

  double Upper(double context_mib, double job_mib, double conv_output_mib) const {
    return context_mib + slack_mib + margin * job_mib +
           conv_output_factor * conv_output_mib;
  }
};

// The measured rows of `use`, by dataset.
std::map<std::string, std::vector<size_t>> MeasuredByDataset(
    const std::vector<GroupedRow>& rows, const std::vector<size_t>& use) {
  std::map<std::string, std::vector<size_t>> datasets;
  for (size_t i : use) {
    if (rows[i].measured) datasets[rows[i].dataset].push_back(i);
  }
  return datasets;
}

// The smallest margin (at least 1) keeping `quantile` of each dataset's rows safe, with
// the slack and conv terms given.
double MarginAt(const std::vector<GroupedRow>& rows, const std::vector<double>& job_mib,
                const std::map<std::string, std::vector<size_t>>& datasets,
                double context_mib, const UpperTerms& terms, double quantile) {
  double margin = 1;
  std::vector<double> needed;
  for (const auto& [name, members] : datasets) {
    needed.clear();
    for (size_t i : members) {
      const CalibrationRow& r = rows[i].row;
      needed.push_back((r.measured_mib - context_mib - terms.slack_mib -
                        terms.conv_output_factor * r.conv_output_mib) /
                       job_mib[i]);
    }
    margin = std::max(margin, common::Quantile(needed, quantile));
  }
  return margin;
}

UpperTerms FitUpperTerms(const std::vector<GroupedRow>& rows,
                         const std::vector<double>& job_mib,
                         const std::vector<size_t>& use, double context_mib,
                         const FitOptions& options) {
  const std::map<std::string, std::vector<size_t>> datasets =
      MeasuredByDataset(rows, use);
  UpperTerms best;
  double best_tight = -1;
  for (double slack = 0; slack <= options.max_intercept_mib;
       slack += options.intercept_step_mib) {
    for (double conv = 0; conv <= options.max_conv_factor;
         conv += options.conv_factor_step) {
      UpperTerms terms{slack, 1, conv};
      terms.margin =
          MarginAt(rows, job_mib, datasets, context_mib, terms, options.safe_quantile);
      double tight = 0;
      for (const auto& [name, members] : datasets) {
        int n = 0;
        for (size_t i : members) {
          const CalibrationRow& r = rows[i].row;
          n += SafeAndTight(terms.Upper(context_mib, job_mib[i], r.conv_output_mib),
                            r.measured_mib);
        }
        tight += static_cast<double>(n) / static_cast<double>(members.size());
      }
      if (tight > best_tight) {
        best_tight = tight;
        best = terms;
      }
      if (options.conv_factor_step <= 0) break;
    }
  }
  return best;
}

// FitOptions::group_coverage: the smallest of kCoverageQuantiles whose margin, fitted
// without each of `groups` in turn, keeps `target` of that group's measured rows safe
// over all of them; 1 (the largest) if none does.
double CoverageQuantile(const std::vector<GroupedRow>& rows,
                        const std::vector<double>& job_mib,
                        const std::map<std::string, std::vector<size_t>>& groups,
                        double context_mib, const UpperTerms& terms, double target) {
  // Per group, the other groups' measured rows by dataset: what its margin comes from.
  std::map<std::string, std::map<std::string, std::vector<size_t>>> others_of;
  for (const auto& [group, members] : groups) {
    std::vector<size_t> others;
    for (const auto& [other, its] : groups) {
      if (other != group) others.insert(others.end(), its.begin(), its.end());
    }
    others_of[group] = MeasuredByDataset(rows, others);
  }
  for (double quantile : kCoverageQuantiles) {
    int safe = 0, measured = 0;
    for (const auto& [group, members] : groups) {
      UpperTerms held_out = terms;
      held_out.margin =
          MarginAt(rows, job_mib, others_of.at(group), context_mib, terms, quantile);
      for (size_t i : members) {
        if (!rows[i].measured) continue;
        ++measured;
        safe += Safe(held_out.Upper(context_mib, job_mib[i], rows[i].row.conv_output_mib),
                     rows[i].row.measured_mib);
      }
    }
    if (measured > 0 && safe >= target * measured) return quantile;
  }
  return 1;
}

// An out-of-group fit's rows and what its steps share.
struct GroupedFit {
  const std::vector<GroupedRow>& rows;
  const std::map<std::string, std::vector<size_t>>& groups;  // Group -> its rows.
  double context_mib = 0;
  const FitOptions& options;
  // Per row, the job part its upper bound scales (UpperSimulatedMib's), fitted without
  // its group.
  std::vector<double> upper_job;
};

// Each row's point from the rows of the other groups, into fit.point_mib, and the job
// part its upper bound scales, into g.upper_job.
absl::Status FitOutOfGroupPoints(GroupedFit& g, OutOfGroupFit& fit) {
  fit.point_mib.assign(g.rows.size(), 0);
  g.upper_job.assign(g.rows.size(), 0);
  for (const auto& [group, members] : g.groups) {
    std::vector<CalibrationRow> others;
    for (const GroupedRow& r : g.rows) {
      if (r.group != group && r.measured) others.push_back(r.row);
    }
    GPUEST_ASSIGN_OR_RETURN(const PointTerms terms,
                            FitPointTerms(others, g.context_mib, g.options));
    for (size_t i : members) {
      const double job = terms.intercept_mib + terms.factor * SimulatedMib(g.rows[i].row);
      g.upper_job[i] =
          terms.intercept_mib + terms.factor * UpperSimulatedMib(g.rows[i].row);
      fit.point_mib[i] = g.context_mib + job;
    }
  }
  return absl::OkStatus();
}

// Each row's upper bound from the other groups' errors only, into fit.upper_mib.
void FitOutOfGroupUppers(const GroupedFit& g, OutOfGroupFit& fit) {
  const std::vector<GroupedRow>& rows = g.rows;
  fit.upper_mib.assign(rows.size(), 0);
  for (const auto& [group, members] : g.groups) {
    std::vector<size_t> others;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].group != group) others.push_back(i);
    }
    UpperTerms terms = FitUpperTerms(rows, g.upper_job, others, g.context_mib, g.options);
    if (g.options.group_coverage > 0) {
      std::map<std::string, std::vector<size_t>> other_groups = g.groups;
      other_groups.erase(group);
      const double quantile =
          CoverageQuantile(rows, g.upper_job, other_groups, g.context_mib, terms,
                           g.options.group_coverage);
      terms.margin = MarginAt(rows, g.upper_job, MeasuredByDataset(rows, others),
                              g.context_mib, terms, quantile);
    }
    for (size_t i : members) {
      fit.upper_mib[i] =
          terms.Upper(g.context_mib, g.upper_job[i], rows[i].row.conv_output_mib);
    }
  }
}

// The served upper bound's terms, from every row's out-of-group error; its margin's
// quantile into fit.margin_quantile.
UpperTerms FitServedUpperTerms(const GroupedFit& g, OutOfGroupFit& fit) {
  const std::vector<GroupedRow>& rows = g.rows;
  std::vector<size_t> every(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) every[i] = i;
  UpperTerms upper = FitUpperTerms(rows, g.upper_job, every, g.context_mib, g.options);
  fit.margin_quantile = g.options.safe_quantile;
  if (g.options.group_coverage > 0) {
    fit.margin_quantile = CoverageQuantile(rows, g.upper_job, g.groups, g.context_mib,
                                           upper, g.options.group_coverage);
    upper.margin = MarginAt(rows, g.upper_job, MeasuredByDataset(rows, every),
                            g.context_mib, upper, fit.margin_quantile);
  }
  return upper;
}

}  // namespace

absl::StatusOr<OutOfGroupFit> FitOutOfGroup(const std::vector<GroupedRow>& rows,
                                            const core::GpuProfile& gpu,
                                            const FitOptions& options) {
  const double context_mib = static_cast<double>(gpu.context_bytes) / kMiB;
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < rows.size(); ++i) groups[rows[i].group].push_back(i);
  if (groups.size() < 2) {
    return absl::InvalidArgumentError("out-of-group fitting needs two groups or more");
  }
  GroupedFit g{rows, groups, context_mib, options, {}};
  OutOfGroupFit fit;
  GPUEST_RETURN_IF_ERROR(FitOutOfGroupPoints(g, fit));
  FitOutOfGroupUppers(g, fit);
  const UpperTerms upper = FitServedUpperTerms(g, fit);
  fit.margin = upper.margin;
  fit.slack_mib = upper.slack_mib;
  fit.conv_output_factor = upper.conv_output_factor;
  std::vector<CalibrationRow> all;
  for (const GroupedRow& r : rows) {
    if (r.measured) all.push_back(r.row);
  }
  GPUEST_ASSIGN_OR_RETURN(const PointTerms point,
                          FitPointTerms(all, context_mib, options));
  fit.calibration.point_intercept_mib = point.intercept_mib;
  fit.calibration.point_factor = point.factor;
  fit.calibration.intercept_mib = upper.slack_mib + upper.margin * point.intercept_mib;
  // The served model needs a factor of at least 1; raising it only raises the bound.
  fit.calibration.safe_factor = std::max(1.0, upper.margin * point.factor);
  fit.calibration.conv_output_factor = upper.conv_output_factor;
  return fit;
}

std::string ArchitectureGroupOf(const std::string& model_name) {
  size_t end = 0;
  while (end < model_name.size() &&
         std::islower(static_cast<unsigned char>(model_name[end]))) {
    ++end;
  }
  return model_name.substr(0, end);
}

absl::StatusOr<double> FitContextMib(const std::vector<CalibrationRow>& rows) {
  if (rows.empty())
    return absl::InvalidArgumentError("no rows to calibrate a context on");
  std::vector<double> residual;
  for (const CalibrationRow& r : rows)
    residual.push_back(r.measured_mib - SimulatedMib(r));
  return std::round(common::Quantile(std::move(residual), 0.5));
}

}  // namespace gpuest::calibration
