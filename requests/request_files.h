// File: request_files.h
//
// Reads what `gpuest estimate` is given, from a file or stdin: a ModelDescription in its
// JSON form, a whole EstimateRequest, or a model summary printed by torchsummary or
// torchinfo (anything whose first non-space character is not '{').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/placement.pb.h"

namespace gpuest::requests {

struct ReadOptions {
  // Training batch size; 0 keeps the file's. A summary does not say it (its batch
  // dimension is whatever the summary was run with), so a summary needs one here.
  int64_t batch_size = 0;
  // How the job spreads over GPUs; set, it replaces the description's (a description
  // made for one GPU estimated for 8, say). The estimate is then per GPU.
  std::optional<v1::Parallelism> parallelism;
};

// The --sharding words: none (or ddp), optimizer (zero1), gradients (zero2,
// fsdp-shard-grad-op), parameters (zero3, fsdp-full-shard). InvalidArgument lists them.
absl::StatusOr<v1::Sharding> ParseSharding(const std::string& word);

// The most a job file (or stdin) may hold: a request larger than the gRPC message
// bound cannot be sent, and a description with its trace is a few MB.
inline constexpr uint64_t kMaxRequestFileBytes = uint64_t{64} << 20;

// path "-" reads stdin. NotFound when the file cannot be read; InvalidArgument, naming
// the file (and for a summary the line) and the parser's complaint, when it is none of
// the forms, when a summary comes without options.batch_size, or when
// options.batch_size differs from the batch a description's trace was recorded at (a
// trace answers for its own batch only; the message says how to describe it again). A
// summary's model is named after the file's base name.
absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path,
                                                const ReadOptions& options = {});

// The same, for text already read (standard input, a pod annotation); name stands for
// the file in errors ("stdin" for standard input). What ReadRequest does after
// reading, and what tests/fuzz feeds.
absl::StatusOr<v1::EstimateRequest> ParseRequestText(const std::string& text,
                                                     const std::string& name,
                                                     const ReadOptions& options = {});

// One job for `gpuest place` / `gpuest rank`: a PlacementJob in JSON (a key "measured",
// "estimate" or "description"), or anything ReadRequest reads, as the job's
// description. The job is named after the file when the JSON names none.
absl::StatusOr<v1::PlacementJob> ReadPlacementJob(const std::string& path,
                                                  const ReadOptions& options = {});

struct PlacementReadOptions {
  ReadOptions job;                  // For description files.
  std::string gpu;                  // Catalog id; overrides the file's GPU.
  std::vector<std::string> beside;  // Job files already on the GPU (existing).
};

// `gpuest place FILE`: a CheckPlacementRequest in JSON (a key "candidate" or
// "existing"), or one job file (ReadPlacementJob) as the candidate, which then needs
// options.gpu. options.beside adds existing jobs to either.
absl::StatusOr<v1::CheckPlacementRequest> ReadPlacementRequest(
    const std::string& path, const PlacementReadOptions& options);

// `gpuest rank FILE`: a RankGpusRequest in JSON (a key "job") or one job file.
absl::StatusOr<v1::RankGpusRequest> ReadRankRequest(const std::string& path,
                                                    const ReadOptions& options = {});

}  // namespace gpuest::requests
