#include "server/models_location.h"

#include <filesystem>

namespace gpuest::server {

std::string DefaultModelsDirectory() {
  std::error_code ec;
  // The running binary itself, whatever directory the server was started from.
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed =
        (exe.parent_path() / ".." / GPUEST_INSTALL_MODELS_DIR).lexically_normal();
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return "models";
}

}  // namespace gpuest::server
