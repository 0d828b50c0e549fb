// File: scratch_models.h
//
// A copy of the shipped model repository in a temporary directory, for tests that
// damage or change its files (random bytes, NaN weights) and see what the server
// makes of them. The copy is removed with the object.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuest::testing {

class ScratchModels {
 public:
  ScratchModels();  // Copies GPUEST_MODELS_DIR; aborts the test binary if it cannot.
  ~ScratchModels();
  ScratchModels(const ScratchModels&) = delete;
  ScratchModels& operator=(const ScratchModels&) = delete;

  const std::string& dir() const { return dir_; }
  // <dir>/<model>/<file>.
  std::string Path(const std::string& model, const std::string& file) const;

  // Overwrites the file with as many random bytes as it had.
  void WriteRandomBytes(const std::string& model, const std::string& file) const;

  // Member `member` of a gpumemnet model, saved again as a valid libtorch file whose
  // every weight is NaN.
  absl::Status WriteNanMember(const std::string& model, int member) const;

  // Rewrites the model's manifest so that member `member` records the sha256 of the
  // file as it is now: what a careless retraining would leave behind.
  absl::Status RecordMemberSha256(const std::string& model, int member) const;

  // Replaces this copy's model directory with the shipped one again.
  void Restore(const std::string& model) const;

 private:
  std::string dir_;
};

}  // namespace gpuest::testing
