// gpuest-placement-replay: does placing with gpuest pay? A stream of real training jobs
// (timm models described with their allocation traces; their measured nvidia-smi peaks
// are the truth) arrives one by one at a cluster of mixed GPUs, and each policy places
// every job as it comes, knowing only its own figure for the job:
//
//   one-per-gpu     each job on an empty GPU of its own (the smallest whose capacity
//                   covers gpuest's figure);
//   gpuest          best fit by gpuest's recommended memory, refusing a GPU where the
//                   contention model (PlacementEngine::CheckPlacement) predicts a job
//                   below 0.85 of its speed alone;
//   gpuest-memory   the same memory figure, no contention check (memory-only packing);
//   horus           best fit by the Horus formula's figure (estimator horus);
//   gpumemnet       best fit by GPUMemNet's predicted bin's upper edge.
//
// A job is killed by out-of-memory when its measured peak exceeds what the GPU has
// left after the measured peaks of the jobs alive there (the newcomer is the one that
// fails to allocate). Utilization, for the contention model: gpuest's own GRACT class
// estimate of each job. Deterministic for a seed. Writes a markdown report.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/core/engine.h"
#include "estimators/core/registry.h"
#include "estimators/default_factories.h"
#include "lab/data/measured_rows.h"
#include "placement/contention_model.h"
#include "placement/placement_engine.h"

ABSL_FLAG(std::string, models, "models", "model repository");
ABSL_FLAG(std::string, dataset, "build/datasets/timm_traced.jsonl",
          "timm rows with description and measured peak (maxMemoryMib), one JSON a line");
ABSL_FLAG(int, jobs, 200, "jobs in the stream (drawn without replacement)");
ABSL_FLAG(uint64_t, seed, 2026, "seed of the draw and of the arrival order");
ABSL_FLAG(std::string, gpus, "a100-40gb,a100-80gb",
          "GPU models of the cluster, as many of each as the policies open");
ABSL_FLAG(
    std::string, min_speeds, "0.85,0.7,0.65,0.6",
    "the gpuest policy's floors, one row each: a shared GPU is accepted only where "
    "every job's predicted speed stays at or above it (0.85: Lucid's bad-pair line)");
ABSL_FLAG(std::string, out, "", "write the markdown report here (else stdout)");

namespace gpuest {
namespace {

struct Job {
  std::string name;
  uint64_t truth_bytes = 0;  // Measured peak, CUDA context included.
  // Per GPU model: each policy's figure.
  std::map<std::string, uint64_t> gpuest, horus, gpumemnet;
  std::optional<v1::UtilizationEstimate> util;  // GRACT class; none: unknown.
};

struct Gpu {
  std::string model;
  uint64_t capacity = 0;
  std::vector<int> jobs;  // Alive, by index.
};

struct Outcome {
  std::string policy;
  int placed = 0, refused = 0, oom = 0, gpus_used = 0, shared_jobs = 0, bad_jobs = 0;
  int below_truth =
      0;  // Jobs whose figure (on the GPU placed) is below the measured peak.
  double mean_speed_shared = 1;
  double work = 0;  // Jobs' speeds summed: alone 1, shared the predicted speed.
};

enum class Figure { kGpuest, kHorus, kGpuMemNet };

absl::StatusOr<std::vector<Job>> LoadJobs(const core::Engine& engine,
                                          const std::vector<std::string>& models,
                                          const std::string& path, int count,
                                          uint64_t seed) {
  GPUEST_ASSIGN_OR_RETURN(data::MeasuredFile file, data::ReadExportedRows(path));
  // Rows without a measured peak (out of memory, crashed) have no truth to judge by.
  std::vector<data::MeasuredRow> rows;
  for (data::MeasuredRow& row : file.rows) {
    if (!row.oom && row.status != "CRASHED") rows.push_back(std::move(row));
  }
  std::mt19937_64 rng(seed);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(std::min<size_t>(rows.size(), static_cast<size_t>(count)));

  std::vector<Job> jobs;
  for (const data::MeasuredRow& row : rows) {
    Job job;
    job.name = row.file_name;
    job.truth_bytes = static_cast<uint64_t>(std::llround(row.peak_mib * common::kMiB));
    v1::EstimateRequest request;
    *request.mutable_model() = row.model;
    for (const std::string& gpu : models) {
      request.set_gpu(gpu);
      absl::StatusOr<v1::EstimateResponse> r = engine.Estimate(request);
      if (!r.ok())
        return absl::Status(r.status().code(),
                            job.name + ": " + std::string(r.status().message()));
      job.gpuest[gpu] = r->recommendation().memory_bytes();
      for (const v1::EstimatorResult& result : r->results()) {
        const v1::MemoryEstimate& m = result.memory();
        if (result.estimator_id() == "horus") {
          job.horus[gpu] = m.upper_bytes() > 0 ? m.upper_bytes() : m.point_bytes();
        }
        if (result.estimator_id().rfind("gpumemnet", 0) == 0 && m.bins_size() > 0 &&
            m.predicted_bin() >= 0 && m.predicted_bin() < m.bins_size()) {
          job.gpumemnet[gpu] =
              std::max(job.gpumemnet[gpu], m.bins(m.predicted_bin()).upper_bytes());
        }
        for (const v1::UtilizationEstimate& u : result.utilization()) {
          if (u.metric() == v1::UTILIZATION_METRIC_GRACT && !job.util) job.util = u;
        }
      }
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

uint64_t FigureOf(const Job& job, Figure figure, const std::string& gpu) {
  const auto& table = figure == Figure::kHorus       ? job.horus
                      : figure == Figure::kGpuMemNet ? job.gpumemnet
                                                     : job.gpuest;
  auto it = table.find(gpu);
  return it == table.end() ? 0 : it->second;
}

v1::PlacementJob AsPlacementJob(const Job& job, uint64_t figure) {
  v1::PlacementJob p;
  p.set_name(job.name);
  p.mutable_estimate()->set_peak_bytes(figure);
  if (job.util) *p.mutable_estimate()->mutable_utilization() = *job.util;
  return p;
}

class Replay {
 public:
  Replay(const placement::PlacementEngine& placement, const core::GpuProfiles& catalog,
         std::vector<std::string> models, const std::vector<Job>& jobs)
      : placement_(placement),
        catalog_(catalog),
        models_(std::move(models)),
        jobs_(jobs) {}

  // policy: one-per-gpu, gpuest-memory, horus, gpumemnet; gpuest, which accepts a
  // shared GPU only where every job's predicted speed stays at or above min_speed; or
  // gpuest-verdict, only where the contention model's verdict is not BAD (no job's
  // probability of running below 0.85 at its operating point or above).
  Outcome Run(const std::string& policy, double min_speed = 0) {
    std::vector<Gpu> gpus;
    Outcome out;
    out.policy = PolicyName(policy, min_speed);
    Place(policy, min_speed, gpus, out);
    JudgeSharing(gpus, out);
    return out;
  }

 private:
  std::string PolicyName(const std::string& policy, double min_speed) const {
    return policy == "gpuest" ? absl::StrFormat("gpuest (speed >= %.2f)", min_speed)
           : policy == "gpuest-verdict"
               ? absl::StrFormat("gpuest (verdict: every P(below %.2f) < %.3f)",
                                 placement_.contention().bad_threshold,
                                 placement_.contention().verdict_probability)
               : policy;
  }

  // Every job as it arrives: onto a GPU the policy picks (else a new one), counted as
  // placed, refused or OOM-killed.
  void Place(const std::string& policy, double min_speed, std::vector<Gpu>& gpus,
             Outcome& out) {
    const Figure figure = policy == "horus"       ? Figure::kHorus
                          : policy == "gpumemnet" ? Figure::kGpuMemNet
                                                  : Figure::kGpuest;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      const Job& job = jobs_[j];
      int chosen = -1;
      if (policy != "one-per-gpu")
        chosen = BestFit(gpus, j, figure, policy == "gpuest" ? min_speed : 0,
                         policy == "gpuest-verdict");
      if (chosen < 0) chosen = OpenGpu(gpus, job, figure);
      if (chosen < 0) {
        ++out.refused;  // No GPU model of the cluster holds the policy's figure.
        continue;
      }
      Gpu& gpu = gpus[chosen];
      if (FigureOf(job, figure, gpu.model) < job.truth_bytes) ++out.below_truth;
      uint64_t used = 0;
      for (int k : gpu.jobs) used += jobs_[k].truth_bytes;
      if (used + job.truth_bytes > gpu.capacity) {
        ++out.oom;
        continue;
      }
      gpu.jobs.push_back(static_cast<int>(j));
      ++out.placed;
    }
  }

  // The GPUs used, and each shared job's predicted speed beside the others on its GPU.
  void JudgeSharing(const std::vector<Gpu>& gpus, Outcome& out) {
    double speed_sum = 0;
    for (const Gpu& gpu : gpus) {
      if (!gpu.jobs.empty()) ++out.gpus_used;
      if (gpu.jobs.size() == 1) out.work += 1;
      if (gpu.jobs.size() < 2) continue;
      for (int self : gpu.jobs) {
        const std::optional<double> speed = PredictedSpeed(gpu, self);
        if (!speed) continue;
        speed_sum += *speed;
        out.work += *speed;
        ++out.shared_jobs;
        if (*speed < placement_.contention().bad_threshold) ++out.bad_jobs;
      }
    }
    if (out.shared_jobs > 0) out.mean_speed_shared = speed_sum / out.shared_jobs;
  }

  // Job `self` as the candidate beside the others on its GPU: its predicted speed, with
  // the utilization read exactly as the placement engine reads it; nullopt when the
  // check fails.
  std::optional<double> PredictedSpeed(const Gpu& gpu, int self) {
    v1::CheckPlacementRequest check;
    check.mutable_gpu()->set_catalog_id(gpu.model);
    for (int other : gpu.jobs)
      if (other != self)
        *check.add_existing() = AsPlacementJob(
            jobs_[other], FigureOf(jobs_[other], Figure::kGpuest, gpu.model));
    *check.mutable_candidate() =
        AsPlacementJob(jobs_[self], FigureOf(jobs_[self], Figure::kGpuest, gpu.model));
    absl::StatusOr<v1::CheckPlacementResponse> r = placement_.CheckPlacement(check);
    if (!r.ok()) return std::nullopt;
    return r->jobs(r->jobs_size() - 1).predicted_speed();
  }

  // The used GPU the job fits tightest by the policy's figure; -1 for none. The node
  // reports what its running jobs hold (their measured peaks, as nvidia-smi shows
  // them once they have reached them); the larger of that and the running jobs'
  // figures counts as used, as PlacementEngine does for a node-reported GPU.
  int BestFit(const std::vector<Gpu>& gpus, size_t j, Figure figure, double min_speed,
              bool refuse_bad_verdict) {
    int best = -1;
    int64_t best_headroom = 0;
    for (size_t g = 0; g < gpus.size(); ++g) {
      const Gpu& gpu = gpus[g];
      if (gpu.jobs.empty()) continue;
      uint64_t in_use = 0;
      for (int k : gpu.jobs) in_use += jobs_[k].truth_bytes;
      v1::CheckPlacementRequest check;
      v1::NodeReportedGpu* node = check.mutable_gpu()->mutable_node_reported();
      node->set_total_bytes(gpu.capacity);
      node->set_free_bytes(gpu.capacity - std::min(gpu.capacity, in_use));
      node->set_model(gpu.model);
      for (int k : gpu.jobs)
        *check.add_existing() =
            AsPlacementJob(jobs_[k], FigureOf(jobs_[k], figure, gpu.model));
      *check.mutable_candidate() =
          AsPlacementJob(jobs_[j], FigureOf(jobs_[j], figure, gpu.model));
      absl::StatusOr<v1::CheckPlacementResponse> r = placement_.CheckPlacement(check);
      if (!r.ok() || !r->fits()) continue;
      if (r->worst_predicted_speed() < min_speed) continue;
      if (refuse_bad_verdict && r->verdict() == v1::CONTENTION_VERDICT_BAD) continue;
      if (best < 0 || r->headroom_bytes() < best_headroom) {
        best = static_cast<int>(g);
        best_headroom = r->headroom_bytes();
      }
    }
    return best;
  }

  // A new GPU of the smallest model that holds the figure; -1 when none does.
  int OpenGpu(std::vector<Gpu>& gpus, const Job& job, Figure figure) {
    const core::GpuProfile* pick = nullptr;
    for (const std::string& model : models_) {
      const core::GpuProfile* p = catalog_.Find(model);
      const uint64_t need = FigureOf(job, figure, model);
      if (need == 0 || need > p->memory_bytes) continue;
      if (pick == nullptr || p->memory_bytes < pick->memory_bytes) pick = p;
    }
    if (pick == nullptr) return -1;
    gpus.push_back(Gpu{pick->id, pick->memory_bytes, {}});
    return static_cast<int>(gpus.size()) - 1;
  }

  const placement::PlacementEngine& placement_;
  const core::GpuProfiles& catalog_;
  const std::vector<std::string> models_;
  const std::vector<Job>& jobs_;
};

// The report's heading and what it measures, how and under which assumptions.
std::string Introduction(const std::vector<Job>& jobs, const std::string& gpus) {
  const std::string cluster = absl::StrReplaceAll(gpus, {{",", " and "}});
  int with_util = 0;
  for (const Job& j : jobs) with_util += j.util.has_value();
  return absl::StrCat(
      "# Placement replay: does placing with gpuest pay?\n\n"
      "Written by `bench/placement_replay.cc` (`gpuest-placement-replay`); the numbers "
      "below are its output, not edited.\n\n"
      "A stream of ",
      jobs.size(),
      " real training jobs (timm models at batch 8..128, drawn with a fixed seed from "
      "the SUCCESSFUL rows of `timm_traced.jsonl`: each row's description with its "
      "allocation trace, and its peak measured by nvidia-smi on an A100 40GB, CUDA "
      "context included, as the truth) arrives one job at a time at a cluster of ",
      cluster,
      " GPUs (as many of each as a policy opens). Each policy places each job when it "
      "arrives, knowing only its own memory figure for it and the jobs already "
      "placed:\n\n"
      "- **one-per-gpu**: an empty GPU of its own, the smallest model whose capacity "
      "covers gpuest's figure;\n"
      "- **gpuest**: best fit (least headroom left) by gpuest's recommended memory "
      "(each process with its own CUDA context), skipping any GPU where the contention "
      "model (`PlacementEngine::CheckPlacement`, `docs/contention.md`) predicts a job "
      "below the floor (a fraction of its speed alone; one row per floor, 0.85 being "
      "Lucid's bad-pair line); else a new GPU;\n"
      "- **gpuest-memory**: the same figure, best fit, no contention check (memory-only "
      "packing);\n"
      "- **horus**: best fit by the Horus formula's figure (estimator `horus`);\n"
      "- **gpumemnet**: best fit by the upper edge of GPUMemNet's predicted memory bin "
      "(the `gpumemnet-*` estimators; the largest when several answer).\n\n"
      "The node reports what its running jobs hold (their measured peaks, as "
      "nvidia-smi shows them), and the larger of that and the running jobs' figures "
      "counts as used, as `CheckPlacement` does for a node-reported GPU and as the "
      "Kubernetes extender reads a node: only the newcomer is judged by a figure. "
      "A job is **OOM-killed** when its measured peak exceeds what its GPU has left "
      "after the measured peaks of the jobs alive there (the newcomer fails to "
      "allocate; it then holds nothing). **Refused**: no GPU model of the cluster holds "
      "the policy's figure. **Packing** is jobs running per GPU used, against "
      "one-per-gpu. **Figure below measured peak**: placed jobs whose policy figure "
      "(on the GPU they got) is below their measured peak, what makes an OOM possible. "
      "**Work per GPU**: the jobs' speeds summed (1 for a job alone, its predicted "
      "speed when shared) per GPU used, the throughput a GPU delivers in jobs-alone. "
      "The **predicted speed** of a shared job is the contention model's, "
      "beside the other jobs on its GPU at the end of the stream, with gpuest's GRACT "
      "utilization class estimate of each job (",
      with_util, " of ", jobs.size(),
      " jobs have one; a job without is taken as the placement engine takes an unknown "
      "job: anything up to saturating).\n\n"
      "Assumptions: every job runs at once (no departures); the A100 40GB measurement "
      "holds on the A100 80GB (same architecture, allocator and CUDA context size in "
      "the catalog); the contention model was fitted on pairs, so a GPU with three or "
      "more jobs is an extrapolation.\n\n");
}

// The outcomes' table, each packing against the first (one-per-gpu).
std::string OutcomeTable(const std::vector<Outcome>& outcomes) {
  const Outcome& baseline = outcomes.front();
  const double base =
      baseline.gpus_used ? static_cast<double>(baseline.placed) / baseline.gpus_used : 1;
  std::string md =
      "| policy | placed | OOM-killed | refused | figure below measured peak | GPUs "
      "used | jobs per GPU | packing vs one per GPU | shared jobs | mean predicted "
      "speed of shared jobs | shared jobs below 0.85 | work per GPU |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Outcome& o : outcomes) {
    const double per_gpu = o.gpus_used ? static_cast<double>(o.placed) / o.gpus_used : 0;
    absl::StrAppendFormat(
        &md, "| %s | %d | %d | %d | %d | %d | %.2f | %.2fx | %d | %s | %d | %.2f |\n",
        o.policy, o.placed, o.oom, o.refused, o.below_truth, o.gpus_used, per_gpu,
        per_gpu / base, o.shared_jobs,
        o.shared_jobs ? absl::StrFormat("%.3f", o.mean_speed_shared) : std::string("-"),
        o.bad_jobs, o.gpus_used ? o.work / o.gpus_used : 0.0);
  }
  return md;
}

std::string Report(const std::vector<Outcome>& outcomes, const std::vector<Job>& jobs,
                   const std::string& gpus, const std::string& command) {
  return absl::StrCat(Introduction(jobs, gpus), OutcomeTable(outcomes),
                      absl::StrFormat("\nCommand: `%s`\n", command));
}

// The policies replayed in the report's order: one-per-gpu, gpuest at each of
// --min_speeds, gpuest-verdict, gpuest-memory, horus, gpumemnet; false after a floor
// that is not a fraction.
bool RunPolicies(Replay& replay, std::vector<Outcome>& outcomes) {
  outcomes.push_back(replay.Run("one-per-gpu"));
  for (absl::string_view floor :
       absl::StrSplit(absl::GetFlag(FLAGS_min_speeds), ',', absl::SkipEmpty())) {
    double min_speed = 0;
    if (!absl::SimpleAtod(floor, &min_speed) || min_speed < 0 || min_speed > 1) {
      std::fprintf(stderr, "--min_speeds: not a fraction 0..1: %s\n",
                   std::string(floor).c_str());
      return false;
    }
    outcomes.push_back(replay.Run("gpuest", min_speed));
  }
  outcomes.push_back(replay.Run("gpuest-verdict"));
  for (const char* policy : {"gpuest-memory", "horus", "gpumemnet"})
    outcomes.push_back(replay.Run(policy));
  return true;
}

// The report to --out, else stdout; the exit status.
int WriteReport(const std::string& md) {
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::fputs(md.c_str(), stdout);
    return 0;
  }
  std::ofstream out(absl::GetFlag(FLAGS_out));
  out << md;
  return out ? 0 : 1;
}

int Main(int argc, char** argv) {
  common::ParseFlags(
      argc, argv,
      {"gpuest-placement-replay [flags]",
       "Replays a stream of measured training jobs onto a simulated cluster under "
       "five placement policies and reports OOM kills, GPUs used and predicted "
       "slowdown.",
       "", __FILE__});
  const std::vector<std::string> models =
      absl::StrSplit(absl::GetFlag(FLAGS_gpus), ',', absl::SkipEmpty());
  auto registry = core::EstimatorRegistry::Load(
      estimators::WithDefaultFactories({absl::GetFlag(FLAGS_models), "cpu"}));
  if (!registry.ok()) {
    std::fprintf(stderr, "%s\n", registry.status().ToString().c_str());
    return 1;
  }
  for (const std::string& m : models) {
    if ((*registry)->gpus().Find(m) == nullptr) {
      std::fprintf(stderr, "--gpus: unknown GPU %s\n", m.c_str());
      return 2;
    }
  }
  auto contention = placement::ContentionModel::Load(
      core::ContentionModelPath(absl::GetFlag(FLAGS_models)));
  if (!contention.ok()) {
    std::fprintf(stderr, "%s\n", contention.status().ToString().c_str());
    return 1;
  }
  core::Engine engine(
      std::shared_ptr<const core::EstimatorRegistry>(std::move(*registry)),
      core::ValidationLimits{});
  placement::PlacementEngine placement(engine, *contention);
  auto jobs = LoadJobs(engine, models, absl::GetFlag(FLAGS_dataset),
                       absl::GetFlag(FLAGS_jobs), absl::GetFlag(FLAGS_seed));
  if (!jobs.ok()) {
    std::fprintf(stderr, "%s\n", jobs.status().ToString().c_str());
    return 1;
  }
  const std::shared_ptr<const core::EstimatorRegistry> served = engine.registry();
  Replay replay(placement, served->gpus(), models, *jobs);
  std::vector<Outcome> outcomes;
  if (!RunPolicies(replay, outcomes)) return 2;
  const std::string command = absl::StrFormat(
      "build/bench/gpuest-placement-replay --dataset build/datasets/timm_traced.jsonl "
      "--jobs %d --seed %d --gpus %s --min_speeds %s --out docs/placement.md",
      absl::GetFlag(FLAGS_jobs), absl::GetFlag(FLAGS_seed), absl::GetFlag(FLAGS_gpus),
      absl::GetFlag(FLAGS_min_speeds));
  return WriteReport(Report(outcomes, *jobs, absl::GetFlag(FLAGS_gpus), command));
}

}  // namespace
}  // namespace gpuest

int main(int argc, char** argv) { return gpuest::Main(argc, argv); }
