#include "lab/calibration/simulation_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/quantile.h"

namespace gpuest::calibration {

namespace {

// The section's heading, how its rows were chosen and scored, and its table's head.
std::string SimulationIntro(const SimulationReport& report) {
  return absl::StrFormat(
      "## Memory from first principles: allocator simulation (accuracy)\n\n"
      "Written by `deploy/calibrate-memory.sh` (the traced export, then "
      "`build/lab/calibration/gpuest-calibrate-memory %s --report "
      "docs/accuracy.md`). Held-out rows: %s, so every estimator below is scored on "
      "rows none of them saw. The simulation estimators are calibrated on the training "
      "rows only: A100 context %.0f MiB (median of measured - simulated over the MLP "
      "rows), then per family an intercept b and a factor k; the figure scored is the "
      "served upper bound context + b + k_safe x simulated peak reserved (%d steps: "
      "the first, then the steady state), k_safe keeping %.0f %% of the training rows "
      "safe, + c x the largest convolution output at the batch (cuDNN's workspaces; "
      "fitted on real CNNs, below, 0 elsewhere). The transformers' terms are fitted "
      "apart for models without a convolution (GPUMemNet's, text classifiers: its fit "
      "alone, `(without convolutions)` below) and with one (the real image models): a "
      "step without a convolution runs no cuDNN convolution, so none of its workspaces "
      "and no benchmark search; the server picks by whether the job has one. allocsim "
      "replays the row's traced step "
      "(torch 1.13 FakeTensor on the CPU), "
      "analytic a step built from its layers; the server answers a traced request with "
      "allocsim and a layer-only one with analytic. GPUMemNet: the served MLP-based "
      "classifier's upper bin edge. Safe: estimate >= measured; tight: measured <= "
      "estimate <= %.1f x measured. Point MAPE: the simulators' median-fitted point "
      "estimate (context + its own intercept + k_point x simulated peak).\n\n"
      "| family | estimator | held-out rows | MAPE | P50 abs error | P90 abs error | "
      "safe | safe and tight | point MAPE |\n|---|---|---|---|---|---|---|---|---|\n",
      report.scored_shipped ? "--score-models" : "--write-models", report.split,
      report.context_mib, report.steps, 100 * report.safe_quantile, kTightFactor);
}

}  // namespace

std::string RenderSimulationSection(const SimulationReport& report) {
  std::string md = SimulationIntro(report);
  std::string calibration_table =
      "\n| estimator | family | upper: intercept b | upper: factor k_safe | upper: "
      "conv c | point: intercept | point: factor |\n|---|---|---|---|---|---|---|\n";
  std::string oom_lines;
  for (const FamilyReport& f : report.families) {
    std::vector<std::string> above;
    for (const EstimatorScores& e : f.estimators) {
      const Scores& s = e.upper;
      absl::StrAppendFormat(
          &md, "| %s | %s | %d | %.1f %% | %.0f MiB | %.0f MiB | %.3f | %.3f | %s |\n",
          f.family, e.id, s.n, s.mape, s.p50_abs_error_mib, s.p90_abs_error_mib, s.safe,
          s.safe_and_tight,
          e.point ? absl::StrFormat("%.1f %%", e.point->mape) : std::string("-"));
      above.push_back(absl::StrCat(e.id, " ", e.oom_above_card));
    }
    for (const auto& [id, c] : f.calibration) {
      absl::StrAppendFormat(&calibration_table,
                            "| %s | %s | %.0f MiB | %.3f | %.2f | %.0f MiB | %.3f |\n",
                            id, f.family, c.intercept_mib, c.safe_factor,
                            c.conv_output_factor, c.point_intercept_mib, c.point_factor);
    }
    if (f.oom_rows > 0) {
      absl::StrAppendFormat(&oom_lines,
                            "- %s: %d held-out rows crashed out of memory on the A100 "
                            "40GB; above its %.0f MiB: %s.\n",
                            f.family, f.oom_rows, report.card_mib,
                            absl::StrJoin(above, ", "));
    }
  }
  absl::StrAppend(&md, "\n", oom_lines,
                  report.scored_shipped
                      ? "\nThis run's calibration (training rows only), for comparison: "
                        "not served, not scored above (the terms served are below):\n"
                      : "\nThe calibration (training rows only):\n",
                  calibration_table, "\n");
  return md;
}

namespace {

// The OK rows holding a transient by the trace's evidence, and the unsafe ones among
// them with their case.
void RenderTransientRows(const RealModelsReport& report, std::string& md) {
  absl::StrAppendFormat(
      &md,
      "\nOK rows can hold a smaller transient that keeps the peak rising with the "
      "batch. The trace shows some (`lab/calibration/transient_evidence.h`): what "
      "the traced step does not explain (measured - simulated reserved peak: context, "
      "workspaces, rounding) cannot fall as the batch grows, so where it is larger than "
      "at a larger batch of the same model by more than %.0f MiB + %.0f %% of that "
      "batch's simulated peak, the difference is a transient, not a need. Those rows "
      "are kept out of the fits and scored in the table above all the same; apart:\n\n"
      "| family | OK rows with the evidence | allocsim: safe on them | allocsim on the "
      "other OK rows: safe / safe and tight / point MAPE | analytic: safe on them | "
      "analytic on the other OK rows: safe / safe and tight / point MAPE |\n"
      "|---|---|---|---|---|---|\n",
      kTransientMarginMib, 100 * kTransientMarginShare);
  for (const auto& [family, t] : report.transients) {
    auto safe_on_them = [&](const std::string& id) {
      const auto it = t.safe.find(id);
      return absl::StrFormat("%d of %d", it == t.safe.end() ? 0 : it->second, t.rows);
    };
    auto on_others = [&](const std::string& id) {
      const auto it = t.other_rows.find(id);
      const auto point = t.other_rows_point.find(id);
      if (it == t.other_rows.end() || point == t.other_rows_point.end())
        return std::string("-");
      return absl::StrFormat("%.3f / %.3f / %.1f %% (%d rows)", it->second.safe,
                             it->second.safe_and_tight, point->second.mape, it->second.n);
    };
    absl::StrAppendFormat(&md, "| %s | %d | %s | %s | %s | %s |\n", family, t.rows,
                          safe_on_them("allocsim"), on_others("allocsim"),
                          safe_on_them("analytic"), on_others("analytic"));
  }
  md +=
      "\nThe rows among them above the served `allocsim` requirement, with the case:\n\n"
      "| family | run | measured | requirement (upper bound) | measured - simulated "
      "| the same at the larger batch |\n|---|---|---|---|---|---|\n";
  for (const auto& [family, t] : report.transients) {
    for (const TransientRows::Unsafe& u : t.allocsim_unsafe) {
      absl::StrAppendFormat(
          &md, "| %s | %s | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB (batch %d) |\n",
          family, u.run, u.measured_mib, u.requirement_mib, u.evidence.excess_mib,
          u.evidence.larger_excess_mib, u.evidence.larger_batch);
    }
  }
}

}  // namespace

namespace {

// The section's heading, what is scored and how, and its table's head.
std::string RealModelsIntro(const RealModelsReport& report) {
  const std::string served =
      "`allocsim`, `analytic`: the calibration served. For a family where the fit on "
      "GPUMemNet's training rows alone keeps fewer than the quantile below of these "
      "(unseen) rows safe, or where the out-of-group fit keeps that many safe, more of "
      "them safe and tight and as many of their out-of-memory runs above the card, "
      "that is the out-of-group fit, each row scored by "
      "the fit that never saw its architecture group, and `(GPUMemNet fit, not served)` "
      "shows "
      "the fit it replaces; elsewhere it is GPUMemNet's fit, which never saw any row "
      "here, and `(out-of-group fit, not served)` shows the candidate";
  // --score-models: every served row is the shipped manifests' estimate.
  const std::string shipped =
      "`allocsim`, `analytic`: the terms served, as shipped (the manifests in models/, "
      "above), on every row: the real models' terms, fitted on clean runs (benchmark "
      "off), so these benchmark-on peaks can sit above them (the goal table below "
      "allows for the search's workspace); `(out-of-group fit, not served)`: this "
      "run's out-of-group fit on these rows, the candidate";
  return absl::StrFormat(
      "### Real models: leave-architecture-group-out\n\n"
      "%s: %d models of %d architecture groups (the leading letters of the model "
      "name: resnet, convnext, vit, ...). %s. The out-of-group fit: the point (context "
      "+ b + k x simulated peak, the least MAPE) fitted without the row's group; the "
      "upper bound context + s + m x (point - context) + c x the largest convolution "
      "output at the batch (fp32; c for cuDNN's convolution workspaces, CNNs only), m "
      "keeping %.0f %% of each "
      "dataset's rows safe (GPUMemNet's training rows, and the *other* groups' "
      "out-of-group errors), or more where that keeps fewer of the groups left out "
      "one at a time safe (the quantile chosen again without the group scored: "
      "calibration.h group_coverage), the (s, c) with the most safe-and-tight rows. "
      "GPUMemNet's Transformers (text classifiers) do not join the transformer "
      "family's fit: the real ones are image models. Which fit is served is judged on "
      "the OK rows without a transient's evidence (below). FakeTensor: the dataset's "
      "own column (PyTorch FakeTensor, no context, no allocator). MAPE, safe and tight "
      "score the upper bound, the figure a scheduler reserves; safe: >= measured; "
      "tight: also <= %.1f x measured.\n\n"
      "| family | estimator | rows | MAPE | P50 abs error | P90 abs error | safe | safe "
      "and tight | point MAPE | OOM rows above %.0f MiB |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      report.source, report.models, report.architecture_groups,
      report.scored_shipped ? shipped : served, 100 * report.safe_quantile, kTightFactor,
      report.card_mib);
}

// The SPIKE rows against the served allocsim requirement.
void RenderSpikeRows(const RealModelsReport& report, std::string& md) {
  absl::StrAppendFormat(
      &md,
      "\nRows by status (`shared/data/README.md`, timm section): the table above "
      "scores every OK row, the fits use them but those holding a transient by the "
      "trace's evidence (below), and the OOM and OOM_INFERRED rows as constraints "
      "(the bound must exceed the card); %d CRASHED rows are ignored. SPIKE rows "
      "completed, but their peak holds cuDNN benchmark mode's search (a transient sized "
      "by the free memory, not a requirement: `data/h200-benchmark-mode/`); against "
      "the served `allocsim` requirement (upper bound):\n\n"
      "| family | SPIKE rows | above the requirement | measured / requirement: median | "
      "max |\n|---|---|---|---|---|\n",
      report.crashed_rows);
  for (const auto& [family, spikes] : report.spikes) {
    std::vector<double> ratios = spikes.ratios;
    std::sort(ratios.begin(), ratios.end());
    absl::StrAppendFormat(&md, "| %s | %d | %d | %.2f x | %.2f x |\n", family,
                          spikes.rows, spikes.above_requirement,
                          ratios.empty() ? 0.0 : common::Quantile(ratios, 0.5),
                          ratios.empty() ? 0.0 : ratios.back());
  }
}

}  // namespace

std::string RenderRealModelsSection(const RealModelsReport& report) {
  std::string md = RealModelsIntro(report);
  for (const RealModelsFamily& f : report.families) {
    for (const EstimatorScores& e : f.estimators) {
      const Scores& s = e.upper;
      absl::StrAppendFormat(
          &md,
          "| %s | %s | %d | %.1f %% | %.0f MiB | %.0f MiB | %.3f | %.3f | %s | %d of %d "
          "|\n",
          f.family, e.id, s.n, s.mape, s.p50_abs_error_mib, s.p90_abs_error_mib, s.safe,
          s.safe_and_tight,
          e.point ? absl::StrFormat("%.1f %%", e.point->mape) : std::string("-"),
          e.oom_above_card, f.oom_rows);
    }
  }
  RenderSpikeRows(report, md);
  RenderTransientRows(report, md);
  return md + "\n";
}

}  // namespace gpuest::calibration
