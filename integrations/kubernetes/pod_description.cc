#include "integrations/kubernetes/pod_description.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json_guard.h"
#include "common/text_file.h"
#include "requests/request_files.h"

namespace gpuest::kubernetes {
namespace {

// A ConfigMap name (a DNS subdomain) or key: no path separators, no dot files.
bool SafeName(const std::string& s) {
  if (s.empty() || s.size() > 253 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
           c == '.';
  });
}

}  // namespace

absl::StatusOr<std::string> DescriptionText(const std::string& value,
                                            const std::string& descriptions_dir,
                                            const std::string& where) {
  const size_t first = value.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && value[first] == '{') return value;
  std::vector<std::string> parts = absl::StrSplit(value, absl::MaxSplits('/', 1));
  const std::string name = parts[0];
  const std::string key = parts.size() > 1 ? parts[1] : "description.json";
  if (!SafeName(name) || !SafeName(key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": neither inline JSON (starting with '{') nor a ConfigMap reference NAME or "
        "NAME/KEY: ",
        common::Utf8Prefix(value, 200)));
  }
  if (descriptions_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": names ConfigMap ", name,
                     " but the server has no --extender-descriptions-dir to read "
                     "mounted ConfigMaps from"));
  }
  const std::string path = absl::StrCat(descriptions_dir, "/", name, "/", key);
  absl::StatusOr<std::string> text = common::ReadTextFile(path, kMaxConfigMapBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ConfigMap ", name, " key ",
                                                   key, " is not mounted (no file ", path,
                                                   ")"));
  }
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ConfigMap ", name, " key ",
                                                   key, ": ", text.status().message()));
  }
  return text;
}

std::string DescriptionWhere(const std::string& object) {
  return absl::StrCat(object, ": annotation ", kDescriptionAnnotation);
}

absl::StatusOr<PodJob> ReadPodJob(const std::string& value,
                                  const std::string& descriptions_dir,
                                  const std::string& where) {
  absl::StatusOr<std::string> text = DescriptionText(value, descriptions_dir, where);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::EstimateRequest> request = requests::ParseRequestText(*text, where);
  if (!request.ok()) return request.status();
  return PodJob{*std::move(request), *std::move(text)};
}

}  // namespace gpuest::kubernetes
