#include "lab/contention/contention_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/quantile.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "lab/data/measured_rows.h"

namespace gpuest::contention {
namespace {

using Table = std::vector<std::map<std::string, std::string>>;

absl::StatusOr<Table> ReadCsv(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text,
                          common::ReadTextFile(path, common::kMaxDatasetFileBytes));
  Table rows;
  std::vector<std::string> header;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string> fields = data::SplitCsvRecord(line);
    if (header.empty()) {
      header = std::move(fields);
      continue;
    }
    if (fields.size() != header.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", line_no, ": ", fields.size(),
                       " fields, header has ", header.size()));
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

absl::StatusOr<double> Number(const std::map<std::string, std::string>& row,
                              const std::string& key, const std::string& where) {
  auto it = row.find(key);
  double v = 0;
  if (it == row.end() || !absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": column '", key, "' is missing or not a number"));
  }
  return v;
}

std::string Key(const std::map<std::string, std::string>& row,
                const std::string& suffix) {
  auto get = [&](const std::string& k) {
    auto it = row.find(k + suffix);
    return it == row.end() ? std::string() : it->second;
  };
  return absl::StrCat(get("model"), "|", get("dataset"), "|", get("batchsize"), "|",
                      get("amp"));
}

struct Verdicts {
  std::vector<double> speed;  // Per sample.
  std::vector<bool> bad;      // Per sample: this job below the threshold.
};

// Scores per-sample predictions against the measurements.
// Pairs of the samples rows, each truly bad when either of its jobs ran below threshold
// and called bad when called(k) holds for either of its jobs (k indexes rows).
struct PairTally {
  int pairs = 0, right = 0, bad = 0, called = 0, hit = 0;
  double precision() const { return called > 0 ? static_cast<double>(hit) / called : 0; }
  double recall() const { return bad > 0 ? static_cast<double>(hit) / bad : 0; }
};

template <typename Called>
PairTally TallyPairs(const LucidData& data, const std::vector<size_t>& rows,
                     double threshold, const Called& called) {
  std::map<int, std::pair<bool, bool>> pairs;  // pair -> (truly bad, called bad)
  for (size_t k = 0; k < rows.size(); ++k) {
    const PairSample& x = data.samples[rows[k]];
    auto& p = pairs[x.pair];
    p.first = p.first || x.speed < threshold;
    p.second = p.second || called(k);
  }
  PairTally t;
  t.pairs = static_cast<int>(pairs.size());
  for (const auto& [id, p] : pairs) {
    t.right += p.first == p.second;
    t.bad += p.first;
    t.called += p.second;
    t.hit += p.first && p.second;
  }
  return t;
}

std::vector<size_t> AllRows(const LucidData& data) {
  std::vector<size_t> all(data.samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

// Scores per-sample predictions against the measurements.
RuleScores Score(const std::string& rule, const LucidData& data, const Verdicts& v,
                 double threshold) {
  RuleScores s;
  s.rule = rule;
  double abs_sum = 0;
  int job_right = 0;
  for (size_t i = 0; i < data.samples.size(); ++i) {
    const PairSample& x = data.samples[i];
    abs_sum += std::abs(v.speed[i] - x.speed);
    job_right += (x.speed < threshold) == v.bad[i];
  }
  const PairTally pairs = TallyPairs(data, AllRows(data), threshold,
                                     [&](size_t k) { return bool{v.bad[k]}; });
  const double n = static_cast<double>(data.samples.size());
  s.speed_mae = abs_sum / n;
  s.job_accuracy = job_right / n;
  s.pair_accuracy = pairs.right / static_cast<double>(pairs.pairs);
  s.bad_recall = pairs.recall();
  s.bad_precision = pairs.precision();
  return s;
}

absl::StatusOr<std::vector<double>> FitOn(const LucidData& data,
                                          const std::vector<size_t>& rows, double ridge) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (size_t i : rows) {
    const placement::ContentionFeatureValues f = placement::ContentionFeatures(
        data.samples[i].self_util, data.samples[i].other_util);
    x.emplace_back(f.begin(), f.end());
    y.push_back(data.samples[i].speed);
  }
  return LeastSquares(x, y, ridge);
}

// The linear predictions (before clipping) of the samples rows by weights w.
std::vector<double> Linear(const LucidData& data, const std::vector<size_t>& rows,
                           const std::vector<double>& w) {
  placement::ContentionModel m;
  m.coefficients = w;
  std::vector<double> u;
  for (size_t i : rows)
    u.push_back(m.LinearSpeed(data.samples[i].self_util, data.samples[i].other_util));
  return u;
}

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// Pair precision and recall of calling a job bad at probability >= cut, over rows
// (a pair is called bad when either of its jobs among rows is).
OperatingPoint PairScores(const LucidData& data, const std::vector<size_t>& rows,
                          const std::vector<double>& prob, double cut, double threshold) {
  const PairTally t =
      TallyPairs(data, rows, threshold, [&](size_t k) { return prob[k] >= cut; });
  return {cut, t.precision(), t.recall()};
}

// The operating probability: the most bad pairs found at min_precision or more (the
// highest such cut among equals); the cut of best precision if none reaches it.
double ChooseOperatingProbability(const LucidData& data, const std::vector<size_t>& rows,
                                  const std::vector<double>& prob, double threshold,
                                  double min_precision) {
  std::vector<double> cuts = prob;
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  double best = 0.5, best_recall = -1, fallback = 0.5, fallback_precision = -1;
  for (double cut : cuts) {
    const OperatingPoint p = PairScores(data, rows, prob, cut, threshold);
    if (p.precision >= min_precision && p.recall >= best_recall) {
      best_recall = p.recall;
      best = cut;
    }
    if (p.precision > fallback_precision) {
      fallback_precision = p.precision;
      fallback = cut;
    }
  }
  return best_recall >= 0 ? best : fallback;
}

// Rows of the samples whose own model is not `held` and that do not involve it.
std::vector<size_t> Without(const LucidData& data, const std::vector<size_t>& rows,
                            const std::string& held) {
  std::vector<size_t> out;
  for (size_t i : rows)
    if (data.samples[i].self_model != held && data.samples[i].other_model != held)
      out.push_back(i);
  return out;
}

// A fitted head's P(below threshold) for the samples rows, as the served model computes
// it (ContentionModel::LinearSpeed, then BadProbability).
std::vector<double> HeadProbabilities(
    const LucidData& data, const std::vector<size_t>& rows,
    const std::pair<std::vector<double>, std::pair<double, double>>& head) {
  placement::ContentionModel m;
  m.coefficients = head.first;
  m.verdict_intercept = head.second.first;
  m.verdict_slope = head.second.second;
  std::vector<double> prob;
  for (size_t i : rows) {
    prob.push_back(m.BadProbability(
        m.LinearSpeed(data.samples[i].self_util, data.samples[i].other_util)));
  }
  return prob;
}

// The verdict head fitted on rows: least squares, then the logistic on its in-sample
// linear predictions.
absl::StatusOr<std::pair<std::vector<double>, std::pair<double, double>>> FitHead(
    const LucidData& data, const std::vector<size_t>& rows, double ridge, double t) {
  GPUEST_ASSIGN_OR_RETURN(std::vector<double> w, FitOn(data, rows, ridge));
  std::vector<bool> bad;
  for (size_t i : rows) bad.push_back(data.samples[i].speed < t);
  return std::make_pair(w, FitLogistic(Linear(data, rows, w), bad));
}

// The SMACT -> utilization.gpu line over GPUMemNet's MLP and CNN rows.
absl::Status FitSmactMap(const std::string& dir, FitResult& result,
                         nlohmann::ordered_json& datasets) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& [file, family] :
       {std::pair<std::string, v1::ModelFamily>{"mlp.csv", v1::MODEL_FAMILY_MLP},
        {"cnn.csv", v1::MODEL_FAMILY_CNN}}) {
    GPUEST_ASSIGN_OR_RETURN(const data::MeasuredFile measured,
                            data::ReadGpuMemNetCsv(dir + "/" + file, family));
    int used = 0;
    for (const data::MeasuredRow& row : measured.rows) {
      auto smact = row.utilization.find("SMACT");
      auto gputl = row.utilization.find("GPUTL");
      if (smact == row.utilization.end() || gputl == row.utilization.end() ||
          gputl->second <= 0) {
        continue;
      }
      x.push_back({1.0, smact->second});
      y.push_back(gputl->second / 100.0);
      ++used;
    }
    datasets.push_back({{"file", "gpumemnet/" + file},
                        {"sha256", measured.sha256},
                        {"role", "SMACT -> utilization.gpu map"},
                        {"rows_used", used}});
  }
  GPUEST_ASSIGN_OR_RETURN(const std::vector<double> w, LeastSquares(x, y, 0));
  result.model.smact_intercept = w[0];
  result.model.smact_slope = w[1];
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) err += std::abs(w[0] + w[1] * x[i][1] - y[i]);
  result.smact_rows = static_cast<int>(x.size());
  result.smact_mae = err / static_cast<double>(x.size());
  result.model.smact_mae = result.smact_mae;
  return absl::OkStatus();
}

}  // namespace

std::pair<double, double> FitLogistic(const std::vector<double>& u,
                                      const std::vector<bool>& y) {
  constexpr double kRidge = 1e-6;  // Keeps a separable set finite.
  double a = 0, b = 0;
  for (int iter = 0; iter < 100; ++iter) {
    double ga = 0, gb = 0, haa = 0, hab = 0, hbb = kRidge;
    for (size_t i = 0; i < u.size(); ++i) {
      const double p = Sigmoid(a + b * u[i]);
      const double r = (y[i] ? 1.0 : 0.0) - p, w = p * (1 - p);
      ga += r;
      gb += r * u[i];
      haa += w;
      hab += w * u[i];
      hbb += w * u[i] * u[i];
    }
    gb -= kRidge * b;
    const double det = haa * hbb - hab * hab;
    if (det <= 0) break;
    const double da = (hbb * ga - hab * gb) / det, db = (haa * gb - hab * ga) / det;
    a += da;
    b += db;
    if (std::abs(da) + std::abs(db) < 1e-10) break;
  }
  return {a, b};
}

absl::StatusOr<LucidData> ReadLucid(const std::string& dir) {
  const std::string single_path = dir + "/single.csv";
  const std::string pair_path = dir + "/colocation.csv";
  GPUEST_ASSIGN_OR_RETURN(const Table single, ReadCsv(single_path));
  GPUEST_ASSIGN_OR_RETURN(const Table pairs, ReadCsv(pair_path));
  LucidData data;
  GPUEST_ASSIGN_OR_RETURN(data.single_sha256, common::Sha256OfFile(single_path));
  GPUEST_ASSIGN_OR_RETURN(data.colocation_sha256, common::Sha256OfFile(pair_path));
  data.single_rows = static_cast<int>(single.size());
  std::map<std::string, double> util;
  for (size_t i = 0; i < single.size(); ++i) {
    GPUEST_ASSIGN_OR_RETURN(
        const double u,
        Number(single[i], "gpu_util", absl::StrCat(single_path, " row ", i + 1)));
    util[Key(single[i], "")] = u / 100.0;
  }
  std::set<std::string> models;
  data.pairs = static_cast<int>(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string where = absl::StrCat(pair_path, " row ", i + 1);
    auto a = util.find(Key(pairs[i], "1"));
    auto b = util.find(Key(pairs[i], "2"));
    if (a == util.end() || b == util.end()) continue;
    GPUEST_ASSIGN_OR_RETURN(const double s1, Number(pairs[i], "speed1", where));
    GPUEST_ASSIGN_OR_RETURN(const double s2, Number(pairs[i], "speed2", where));
    const std::string m1 = pairs[i].at("model1"), m2 = pairs[i].at("model2");
    const int id = data.joined++;
    data.samples.push_back({m1, m2, a->second, b->second, s1, id});
    data.samples.push_back({m2, m1, b->second, a->second, s2, id});
    models.insert(m1);
    models.insert(m2);
  }
  data.models.assign(models.begin(), models.end());
  if (data.joined == 0)
    return absl::InvalidArgumentError(pair_path + ": no pair joins single.csv");
  return data;
}

namespace {

// The point model and its baselines leaving models out: each sample predicted by the
// fold of its own job's model, fitted without any pair that involves that model.
struct LeaveModelOut {
  Verdicts model, utilization_sum, stump, mean;
  std::vector<double> residual;  // Measured - the model's point, per sample.
  std::map<std::string, std::vector<size_t>> fold_rows;  // Model -> its jobs' samples.
};

// Lucid's labels as a rule: a threshold on the sum of utilization fitted to them on
// train (pair bad when a job runs below threshold), and each side's mean speed.
struct UtilizationSumStump {
  double cut = 1.0;
  double above = 0, below = 0;
};

UtilizationSumStump FitStump(const LucidData& data, const std::vector<size_t>& train,
                             double mean, double threshold) {
  UtilizationSumStump stump;
  double best_acc = -1;
  for (double cut = 0.2; cut <= 2.0001; cut += 0.01) {
    int right = 0;
    for (size_t i : train) {
      const PairSample& s = data.samples[i];
      right += ((s.self_util + s.other_util) >= cut) == (s.speed < threshold);
    }
    if (right > best_acc) {
      best_acc = right;
      stump.cut = cut;
    }
  }
  double above = 0, below = 0;
  int n_above = 0, n_below = 0;
  for (size_t i : train) {
    const PairSample& s = data.samples[i];
    if (s.self_util + s.other_util >= stump.cut) {
      above += s.speed;
      ++n_above;
    } else {
      below += s.speed;
      ++n_below;
    }
  }
  stump.above = n_above ? above / n_above : mean;
  stump.below = n_below ? below / n_below : mean;
  return stump;
}

absl::StatusOr<LeaveModelOut> PredictLeavingModelsOut(const LucidData& data, double ridge,
                                                      double t) {
  const size_t n = data.samples.size();
  LeaveModelOut out;
  out.model = Verdicts{std::vector<double>(n), std::vector<bool>(n)};
  out.utilization_sum = out.stump = out.mean = out.model;
  out.residual.assign(n, 0.0);
  for (const std::string& held : data.models) {
    std::vector<size_t> train, test;
    for (size_t i = 0; i < n; ++i) {
      const PairSample& s = data.samples[i];
      if (s.self_model == held || s.other_model == held) {
        if (s.self_model == held) test.push_back(i);
      } else {
        train.push_back(i);
      }
    }
    out.fold_rows[held] = test;
    GPUEST_ASSIGN_OR_RETURN(const std::vector<double> w, FitOn(data, train, ridge));
    placement::ContentionModel fold;
    fold.coefficients = w;
    // Baselines on the same training rows: the mean speed, and the stump.
    double mean = 0;
    for (size_t i : train) mean += data.samples[i].speed;
    mean /= static_cast<double>(train.size());
    const UtilizationSumStump stump = FitStump(data, train, mean, t);
    for (size_t i : test) {
      const PairSample& s = data.samples[i];
      const double sum = s.self_util + s.other_util;
      out.model.speed[i] = fold.PointSpeed(s.self_util, s.other_util);
      out.model.bad[i] = out.model.speed[i] < t;
      out.residual[i] = s.speed - out.model.speed[i];
      out.utilization_sum.speed[i] = sum > 1.0 ? 1.0 / sum : 1.0;
      out.utilization_sum.bad[i] = sum >= 1.0;
      out.stump.bad[i] = sum >= stump.cut;
      out.stump.speed[i] = out.stump.bad[i] ? stump.above : stump.below;
      out.mean.speed[i] = mean;
      out.mean.bad[i] = mean < t;
    }
  }
  return out;
}

// The verdict head, leaving models out: in each fold, least squares and the logistic
// on the training rows; the operating probability from inner folds over the training
// models only (each inner model's jobs predicted by a fit without its pairs); the
// held-out jobs called bad at it. Every sample's held-out probability into
// outer_prob.
absl::StatusOr<Verdicts> HeadLeavingModelsOut(const LucidData& data,
                                              const LeaveModelOut& point,
                                              const FitOptions& options,
                                              std::vector<double>& outer_prob) {
  const double t = options.bad_threshold;
  const std::vector<size_t> all = AllRows(data);
  Verdicts head = point.model;
  outer_prob.assign(data.samples.size(), 0.0);
  for (const std::string& held : data.models) {
    const std::vector<size_t> train = Without(data, all, held);
    GPUEST_ASSIGN_OR_RETURN(const auto fitted, FitHead(data, train, options.ridge, t));
    std::vector<size_t> inner_rows;
    std::vector<double> inner_prob;
    for (const std::string& inner : data.models) {
      if (inner == held) continue;
      GPUEST_ASSIGN_OR_RETURN(
          const auto inner_fit,
          FitHead(data, Without(data, train, inner), options.ridge, t));
      std::vector<size_t> rows;
      for (size_t i : train)
        if (data.samples[i].self_model == inner) rows.push_back(i);
      const std::vector<double> prob = HeadProbabilities(data, rows, inner_fit);
      inner_rows.insert(inner_rows.end(), rows.begin(), rows.end());
      inner_prob.insert(inner_prob.end(), prob.begin(), prob.end());
    }
    const double cut = ChooseOperatingProbability(data, inner_rows, inner_prob, t,
                                                  options.min_pair_precision);
    const std::vector<size_t>& test = point.fold_rows.at(held);
    const std::vector<double> prob = HeadProbabilities(data, test, fitted);
    for (size_t k = 0; k < test.size(); ++k) {
      outer_prob[test[k]] = prob[k];
      head.bad[test[k]] = prob[k] >= cut;
    }
  }
  return head;
}

// The point model's held-out residuals by fold (each model's jobs), and the intervals
// their quantiles give.
class FoldResiduals {
 public:
  explicit FoldResiduals(const LeaveModelOut& point)
      : residual_(point.residual), fold_rows_(point.fold_rows) {}

  // The residual quantiles at level of every fold of folds but held, pooled.
  std::pair<double, double> QuantilesWithout(const std::vector<std::string>& folds,
                                             const std::string& held,
                                             double level) const {
    const double tail = (1.0 - level) / 2.0;
    std::vector<double> pooled;
    for (const std::string& g : folds)
      if (g != held)
        for (size_t i : fold_rows_.at(g)) pooled.push_back(residual_[i]);
    return std::make_pair(common::Quantile(pooled, tail),
                          common::Quantile(pooled, 1.0 - tail));
  }

  // How many of fold's jobs interval covers.
  int CoveredBy(const std::string& fold, std::pair<double, double> interval) const {
    int covered = 0;
    for (size_t i : fold_rows_.at(fold))
      covered += residual_[i] >= interval.first && residual_[i] <= interval.second;
    return covered;
  }

  // The share of folds' jobs covered by the other folds' quantiles at level.
  double CrossFit(const std::vector<std::string>& folds, double level) const {
    int covered = 0, total = 0;
    for (const std::string& f : folds) {
      covered += CoveredBy(f, QuantilesWithout(folds, f, level));
      total += static_cast<int>(fold_rows_.at(f).size());
    }
    return total ? static_cast<double>(covered) / total : 0.0;
  }

  // The level, from nominal up, whose cross-fitted coverage of folds reaches nominal.
  double AdjustedLevel(const std::vector<std::string>& folds, double nominal) const {
    double level = nominal;
    while (level < 0.995 && CrossFit(folds, level) < nominal) level += 0.0025;
    return level;
  }

 private:
  const std::vector<double>& residual_;
  const std::map<std::string, std::vector<size_t>>& fold_rows_;
};

// The interval: residual quantiles over every held-out job. A fold's jobs are not like
// the others' (models unlike the rest are harder), so quantiles at the nominal level
// cover fewer held-out jobs than nominal: the level is raised until each fold's jobs,
// against the quantiles of the other folds' residuals, are covered at the nominal rate
// (split conformal with the level adjusted by a leave-one-fold-out cross-fit). Into
// result: the interval, its level and coverages; returns the cautious verdict (bad
// where the interval's lower end is below the threshold).
Verdicts FitInterval(const LucidData& data, const LeaveModelOut& point,
                     const FitOptions& options, FitResult& result) {
  const double nominal = options.interval_coverage;
  const FoldResiduals folds(point);
  result.interval_level = folds.AdjustedLevel(data.models, nominal);
  const double tail = (1.0 - result.interval_level) / 2.0;
  result.model.residual_low = common::Quantile(point.residual, tail);
  result.model.residual_high = common::Quantile(point.residual, 1.0 - tail);
  result.model.interval_coverage = nominal;
  // Held-out coverage, nested: each fold's jobs against the level and quantiles that
  // the other folds alone give.
  int nested_covered = 0;
  for (const std::string& held : data.models) {
    std::vector<std::string> others;
    for (const std::string& m : data.models)
      if (m != held) others.push_back(m);
    nested_covered += folds.CoveredBy(
        held, folds.QuantilesWithout(others, "", folds.AdjustedLevel(others, nominal)));
  }
  result.interval_coverage_level_adjusted =
      nested_covered / static_cast<double>(data.samples.size());
  // At the nominal level, cross-fitted: what the interval covered before the level was
  // adjusted. The same quantiles give the cautious verdict: bad when the interval's
  // lower end (speed_low at serving) is below the threshold.
  result.interval_coverage_cross_fitted = folds.CrossFit(data.models, nominal);
  Verdicts cautious = point.model;
  for (const std::string& held : data.models) {
    const double lo = folds.QuantilesWithout(data.models, held, nominal).first;
    for (size_t i : point.fold_rows.at(held))
      cautious.bad[i] = point.model.speed[i] + lo < options.bad_threshold;
  }
  return cautious;
}

// What the model file says of how it was made and how it scored (its "validation" key,
// kept for the loaded artifacts' schema, holds the accuracy).
void WriteProvenance(const LucidData& data, const FitOptions& options,
                     const nlohmann::ordered_json& datasets, FitResult& result) {
  nlohmann::ordered_json accuracy;
  accuracy["method"] =
      "leave-model-out: for each of the models, every pair involving it is held out; "
      "each job is predicted by the fit of the fold of its own model";
  accuracy["models"] = data.models;
  accuracy["interval_coverage_cross_fitted"] = result.interval_coverage_cross_fitted;
  accuracy["interval_level"] = result.interval_level;
  accuracy["interval_coverage_level_adjusted"] = result.interval_coverage_level_adjusted;
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (const OperatingPoint& p : result.pr_curve) {
    curve.push_back({{"operating_probability", p.probability},
                     {"bad_pair_precision", p.precision},
                     {"bad_pair_recall", p.recall}});
  }
  accuracy["verdict_precision_recall"] = curve;
  accuracy["operating_point"] = absl::StrCat(
      "the most bad pairs found at a pair precision of ", options.min_pair_precision,
      " or more, on every job's leave-model-out probability");
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (const RuleScores& s : result.table) {
    rules.push_back({{"rule", s.rule},
                     {"speed_mae", s.speed_mae},
                     {"job_verdict_accuracy", s.job_accuracy},
                     {"pair_verdict_accuracy", s.pair_accuracy},
                     {"bad_pair_recall", s.bad_recall},
                     {"bad_pair_precision", s.bad_precision}});
  }
  accuracy["rules"] = rules;
  accuracy["smact_map_mae"] = result.smact_mae;
  accuracy["smact_map_rows"] = result.smact_rows;
  result.model.extra["validation"] = accuracy;
  result.model.extra["manifest"] = {
      {"made_by", "gpuest-fit-contention"},
      {"command", options.command},
      {"seed", nullptr},
      {"seed_note",
       "none needed: least squares, the logistic (Newton) and the leave-model-out "
       "folds are deterministic (no random split)"},
      {"ridge", options.ridge},
      {"datasets", datasets},
      {"mem_util",
       "not a feature: adding utilization.memory made the leave-model-out "
       "error worse; it is accepted and echoed, not used"}};
}

// The served verdict head, fitted on every job, its operating point chosen on every
// job's held-out probability (outer_prob), and its precision-recall curve.
absl::Status FitServedHead(const LucidData& data, const FitOptions& options,
                           const std::vector<double>& outer_prob, FitResult& result) {
  const double t = options.bad_threshold;
  const std::vector<size_t> all = AllRows(data);
  GPUEST_ASSIGN_OR_RETURN(const auto served, FitHead(data, all, options.ridge, t));
  result.model.coefficients = served.first;
  result.model.bad_threshold = t;
  result.model.verdict_intercept = served.second.first;
  result.model.verdict_slope = served.second.second;
  // The operating point, on every job's held-out probability.
  result.model.verdict_probability =
      ChooseOperatingProbability(data, all, outer_prob, t, options.min_pair_precision);
  for (double cut : {0.05, 0.075, 0.1, 0.125, 0.15, result.model.verdict_probability, 0.2,
                     0.25, 0.3, 0.4, 0.5, 0.6}) {
    result.pr_curve.push_back(PairScores(data, all, outer_prob, cut, t));
  }
  std::sort(result.pr_curve.begin(), result.pr_curve.end(),
            [](const OperatingPoint& a, const OperatingPoint& b) {
              return a.probability < b.probability;
            });
  return absl::OkStatus();
}

// The Lucid files the model is fitted on, as its manifest lists them.
nlohmann::ordered_json LucidDatasets(const LucidData& data) {
  nlohmann::ordered_json datasets = nlohmann::ordered_json::array();
  datasets.push_back({{"file", "lucid/single.csv"},
                      {"sha256", data.single_sha256},
                      {"role", "each job alone: utilization.gpu"},
                      {"rows", data.single_rows}});
  datasets.push_back({{"file", "lucid/colocation.csv"},
                      {"sha256", data.colocation_sha256},
                      {"role", "pairs: each job's speed beside the other"},
                      {"rows", data.pairs},
                      {"rows_joined", data.joined}});
  return datasets;
}

}  // namespace

absl::StatusOr<FitResult> FitContention(const FitOptions& options) {
  GPUEST_ASSIGN_OR_RETURN(const LucidData data, ReadLucid(options.lucid_dir));
  const double t = options.bad_threshold;
  FitResult result;

  GPUEST_ASSIGN_OR_RETURN(const LeaveModelOut point,
                          PredictLeavingModelsOut(data, options.ridge, t));
  result.table.push_back(
      Score("gpuest contention model (least squares, 5 features)", data, point.model, t));
  result.table.push_back(Score("sum of utilization below 100 % (speed 1 / sum above it)",
                               data, point.utilization_sum, t));
  result.table.push_back(Score(
      "Lucid's labels: utilization-sum threshold fitted to them (speed: side's mean)",
      data, point.stump, t));
  result.table.push_back(Score("mean speed of the training pairs", data, point.mean, t));

  std::vector<double> outer_prob;
  GPUEST_ASSIGN_OR_RETURN(const Verdicts head,
                          HeadLeavingModelsOut(data, point, options, outer_prob));
  result.table.push_back(Score(
      "gpuest contention model, verdict head (P(below 0.85): logistic of the linear "
      "prediction; operating point from inner folds)",
      data, head, t));

  const Verdicts cautious = FitInterval(data, point, options, result);
  result.table.push_back(
      Score("gpuest contention model, cautious verdict (interval's lower end below 0.85)",
            data, cautious, t));

  GPUEST_RETURN_IF_ERROR(FitServedHead(data, options, outer_prob, result));
  nlohmann::ordered_json datasets = LucidDatasets(data);
  GPUEST_RETURN_IF_ERROR(FitSmactMap(options.gpumemnet_dir, result, datasets));
  result.model.version = "lucid-lsq-" + data.colocation_sha256.substr(0, 12);
  WriteProvenance(data, options, datasets, result);
  return result;
}

std::string RenderTable(const FitResult& result) {
  std::string out =
      "| rule | speed MAE | job verdict accuracy | pair verdict accuracy | bad-pair "
      "recall | bad-pair precision |\n|---|---|---|---|---|---|\n";
  for (const RuleScores& s : result.table) {
    absl::StrAppendFormat(&out, "| %s | %.4f | %.3f | %.3f | %.3f | %.3f |\n", s.rule,
                          s.speed_mae, s.job_accuracy, s.pair_accuracy, s.bad_recall,
                          s.bad_precision);
  }
  absl::StrAppendFormat(
      &out,
      "\nInterval: level %.4f (residual quantiles %+.4f / %+.4f); held-out coverage "
      "%.3f with the level adjusted from the other folds, %.3f at the nominal level.\n",
      result.interval_level, result.model.residual_low, result.model.residual_high,
      result.interval_coverage_level_adjusted, result.interval_coverage_cross_fitted);
  out +=
      "\nVerdict head, leave-model-out (a pair is called bad when either job's "
      "probability reaches the cut):\n\n| operating probability | bad-pair precision | "
      "bad-pair recall |\n|---|---|---|\n";
  for (const OperatingPoint& p : result.pr_curve) {
    absl::StrAppendFormat(
        &out, "| %.3f%s | %.3f | %.3f |\n", p.probability,
        p.probability == result.model.verdict_probability ? " (served)" : "", p.precision,
        p.recall);
  }
  return out;
}

}  // namespace gpuest::contention
