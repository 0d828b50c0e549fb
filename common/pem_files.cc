#include "common/pem_files.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/text_file.h"

namespace gpuest::common {

absl::Status CheckCertAndKey(const PemFile& cert, const PemFile& key) {
  if (cert.path.empty() == key.path.empty()) return absl::OkStatus();
  const PemFile& missing = cert.path.empty() ? cert : key;
  const PemFile& given = cert.path.empty() ? key : cert;
  return absl::InvalidArgumentError(
      absl::StrCat(missing.name, ": required with ", given.name));
}

absl::Status ReadPemFiles(std::initializer_list<PemFileRead> files) {
  for (const PemFileRead& file : files) {
    if (file.path.empty()) continue;
    absl::StatusOr<std::string> text = ReadPemFile(std::string(file.path), file.name);
    if (!text.ok()) return text.status();
    *file.text = *std::move(text);
  }
  return absl::OkStatus();
}

}  // namespace gpuest::common
