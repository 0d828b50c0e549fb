#include "common/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuest::common {

absl::StatusOr<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; a regular file ignores it.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  // The size of what was opened, not of what the path names a moment later.
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": not a readable regular file"));
  }
  const auto over = [&](uint64_t bytes, absl::string_view more) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes, more,
                                                   " bytes, over the limit of ",
                                                   max_bytes, " for this file"));
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return over(st.st_size, "");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t filled = 0;
  for (;;) {
    // One byte of room past the bound tells a file that grew past it.
    if (filled == text.size()) {
      if (filled > max_bytes) return over(max_bytes, " or more");
      text.resize(std::min<uint64_t>(max_bytes + 1, filled + (uint64_t{64} << 10)));
    }
    const ssize_t got = read(fd, text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::NotFoundError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (got == 0) break;
    filled += static_cast<size_t>(got);
  }
  if (filled > max_bytes) return over(max_bytes, " or more");
  text.resize(filled);
  return text;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> pem = ReadTextFile(path, kMaxPemFileBytes);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(),
                        absl::StrCat(flag, ": ", pem.status().message()));
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

}  // namespace gpuest::common
