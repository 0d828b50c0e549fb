#include "estimators/core/model_repository.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/text_file.h"

namespace gpuest::core {
namespace {

namespace fs = std::filesystem;

// Where a repository keeps the contention model, relative to it.
constexpr char kContentionFile[] = "contention/contention.json";

// FNV-1a: a stable fingerprint for the version string, not a security measure.
uint64_t Fnv1a(absl::string_view data, uint64_t hash) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

// One field of the digest: its length first, so that no two sequences of fields run
// together into the same bytes.
uint64_t Field(absl::string_view data, uint64_t hash) {
  return Fnv1a(data, Fnv1a(absl::StrCat(data.size(), ":"), hash));
}

// A scan's reads, each under its file's bound and all under the repository's.
class RepositoryReads {
 public:
  explicit RepositoryReads(std::string dir) : dir_(std::move(dir)) {}

  absl::StatusOr<std::string> Read(const std::string& path, uint64_t file_bound) {
    absl::StatusOr<std::string> text = common::ReadTextFile(path, file_bound);
    if (!text.ok()) return text;
    read_ += text->size();
    if (read_ > kMaxRepositoryBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("model repository ", dir_, ": over ", kMaxRepositoryBytes,
                       " bytes in all (the limit), at ", path));
    }
    return text;
  }

 private:
  std::string dir_;
  uint64_t read_ = 0;
};

// Every file of a model directory but its manifest, by name. A directory entry that
// is not a regular file is skipped, unless it is a link to nothing (a file meant to be
// there): that is an error, as is a file that cannot be read.
absl::StatusOr<std::map<std::string, std::string>> ReadModelFiles(
    const fs::path& dir, RepositoryReads& reads) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "manifest.json") continue;
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec) &&
        !(entry.is_symlink(type_ec) && !entry.exists(type_ec))) {
      continue;
    }
    absl::StatusOr<std::string> bytes =
        reads.Read(entry.path().string(), kMaxModelFileBytes);
    if (!bytes.ok()) return bytes.status();
    files.emplace(name, std::move(*bytes));
  }
  if (ec)
    return absl::InternalError(
        absl::StrCat("listing ", dir.string(), ": ", ec.message()));
  return files;
}

// Each subdirectory with a manifest, sorted by id. A directory without a manifest is
// not a model; one whose manifest is there but cannot be read (a dangling link, a
// directory) is an error, not a quiet skip.
absl::StatusOr<std::vector<ModelArtifact>> ReadModels(const std::string& dir,
                                                      RepositoryReads& reads) {
  std::vector<ModelArtifact> models;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    const fs::path manifest = entry.path() / "manifest.json";
    std::error_code missing;
    if (!fs::exists(fs::symlink_status(manifest, missing))) continue;
    auto text = reads.Read(manifest.string(), common::kMaxConfigFileBytes);
    if (!text.ok()) return text.status();
    auto files = ReadModelFiles(entry.path(), reads);
    if (!files.ok()) return files.status();
    models.push_back({entry.path().filename().string(), entry.path().string(),
                      std::move(*text), std::move(*files)});
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::sort(models.begin(), models.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  return models;
}

// The measured contexts' files (path, text) in contexts/, sorted; none where there is
// no such directory.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadContextFiles(
    const std::string& dir, RepositoryReads& reads) {
  std::vector<std::pair<std::string, std::string>> files;
  const fs::path contexts = fs::path(dir) / kContextsDirectory;
  std::error_code ec;
  if (!fs::is_directory(contexts, ec)) return files;
  for (const fs::directory_entry& entry : fs::directory_iterator(contexts, ec)) {
    if (entry.path().extension() != ".json") continue;
    auto text = reads.Read(entry.path().string(), common::kMaxConfigFileBytes);
    if (!text.ok()) return text.status();
    files.emplace_back(entry.path().string(), std::move(*text));
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("listing ", contexts.string(), ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The version's digest over the models, then the contexts, after what digest holds.
uint64_t DigestModelsAndContexts(const ModelRepositoryContents& contents,
                                 uint64_t digest) {
  for (const ModelArtifact& m : contents.models) {
    digest = Field(m.id, digest);
    digest = Field(m.manifest_text, digest);
    for (const auto& [name, bytes] : m.files) {
      digest = Field(name, digest);
      digest = Field(bytes, digest);
    }
  }
  for (const auto& [path, text] : contents.context_files) {
    digest = Field(fs::path(path).filename().string(), digest);
    digest = Field(text, digest);
  }
  return digest;
}

}  // namespace

std::string ContentionModelPath(const std::string& models_dir) {
  return (fs::path(models_dir) / kContentionFile).string();
}

absl::StatusOr<ModelRepositoryContents> ScanModelRepository(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("model repository ", dir, " is not a directory"));
  }
  ModelRepositoryContents contents;
  RepositoryReads reads(dir);
  contents.gpu_profiles_path = (fs::path(dir) / "gpu_profiles.json").string();
  uint64_t digest = 14695981039346656037ULL;
  auto profiles = reads.Read(contents.gpu_profiles_path, common::kMaxConfigFileBytes);
  if (!profiles.ok()) return profiles.status();
  digest = Field(*profiles, digest);
  // The contention model is optional here (a repository of estimators only); the
  // server requires it. A file there that cannot be read is an error.
  contents.contention_path = ContentionModelPath(dir);
  std::error_code absent;
  if (fs::exists(fs::symlink_status(contents.contention_path, absent))) {
    auto contention = reads.Read(contents.contention_path, common::kMaxConfigFileBytes);
    if (!contention.ok()) return contention.status();
    digest = Field(kContentionFile, digest);
    digest = Field(*contention, digest);
    contents.contention_text = std::move(*contention);
  }

  GPUEST_ASSIGN_OR_RETURN(contents.models, ReadModels(dir, reads));
  GPUEST_ASSIGN_OR_RETURN(contents.context_files, ReadContextFiles(dir, reads));
  digest = DigestModelsAndContexts(contents, digest);
  contents.version = absl::StrFormat("%d-%016x", contents.models.size(), digest);
  return contents;
}

}  // namespace gpuest::core
