// Includes <torch/torch.h> through networks.h to write NaN weights: the tests that
// use this file include only its torch-free header.
#include "tests/support/scratch_models.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "estimators/gpumemnet/networks.h"

namespace gpuest::testing {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<gpumemnet::GpuMemNetManifest> ManifestOf(const std::string& model_dir) {
  return gpumemnet::GpuMemNetManifest::Load(model_dir + "/manifest.json");
}

absl::StatusOr<const gpumemnet::MemberRecord*> MemberOf(
    const gpumemnet::GpuMemNetManifest& manifest, int member) {
  if (member < 0 || member >= static_cast<int>(manifest.members.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(manifest.id, " has no member ", member));
  }
  return &manifest.members[member];
}

}  // namespace

ScratchModels::ScratchModels() {
  std::string pattern = (fs::temp_directory_path() / "gpuest-models-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  dir_ = pattern;
  std::error_code ec;
  fs::copy(GPUEST_MODELS_DIR, dir_, fs::copy_options::recursive, ec);
  if (ec) {
    std::fprintf(stderr, "cannot copy %s to %s: %s\n", GPUEST_MODELS_DIR, dir_.c_str(),
                 ec.message().c_str());
    std::abort();
  }
}

ScratchModels::~ScratchModels() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string ScratchModels::Path(const std::string& model, const std::string& file) const {
  return absl::StrCat(dir_, "/", model, "/", file);
}

void ScratchModels::WriteRandomBytes(const std::string& model,
                                     const std::string& file) const {
  const std::string path = Path(model, file);
  const uintmax_t size = fs::file_size(path);
  std::mt19937_64 random(size);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  if (!common::WriteTextFile(path, bytes).ok()) std::abort();
}

absl::Status ScratchModels::WriteNanMember(const std::string& model, int member) const {
  const std::string dir = absl::StrCat(dir_, "/", model);
  GPUEST_ASSIGN_OR_RETURN(const gpumemnet::GpuMemNetManifest manifest, ManifestOf(dir));
  GPUEST_ASSIGN_OR_RETURN(const gpumemnet::MemberRecord* record,
                          MemberOf(manifest, member));
  const std::string path = absl::StrCat(dir, "/", record->file);
  try {
    gpumemnet::GpuMemNet net(record->network);
    torch::load(net, path);
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : net->parameters()) p.fill_(std::nan(""));
    torch::save(net, path);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status ScratchModels::RecordMemberSha256(const std::string& model,
                                               int member) const {
  const std::string dir = absl::StrCat(dir_, "/", model);
  GPUEST_ASSIGN_OR_RETURN(gpumemnet::GpuMemNetManifest manifest, ManifestOf(dir));
  GPUEST_ASSIGN_OR_RETURN(const gpumemnet::MemberRecord* record,
                          MemberOf(manifest, member));
  GPUEST_ASSIGN_OR_RETURN(const std::string sha256,
                          common::Sha256OfFile(absl::StrCat(dir, "/", record->file)));
  manifest.members[member].sha256 = sha256;
  return common::WriteTextFile(dir + "/manifest.json", manifest.Text());
}

void ScratchModels::Restore(const std::string& model) const {
  const std::string dir = absl::StrCat(dir_, "/", model);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::copy(absl::StrCat(GPUEST_MODELS_DIR, "/", model), dir, fs::copy_options::recursive,
           ec);
  if (ec) std::abort();
}

}  // namespace gpuest::testing
