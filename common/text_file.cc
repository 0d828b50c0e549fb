#include "common/text_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuest {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  // An ifstream opens a directory and reads it as empty: ask for a regular file (a
  // symlink to one is fine; a dangling one is not).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": not a readable regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  return text;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> pem = ReadTextFile(path);
  if (!pem.ok()) {
    return absl::NotFoundError(absl::StrCat(flag, ": ", pem.status().message()));
  }
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is not a PEM file"));
  }
  return pem;
}

absl::Status WriteTextFile(const std::string& path, absl::string_view text) {
  // Written beside and renamed over: a reader (a server reloading its models) sees the
  // old file or the new one, never half of one.
  const std::string partial = path + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out || std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace gpuest
