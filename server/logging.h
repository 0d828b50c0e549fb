// File: logging.h
//
// Sets up spdlog's default logger: level, and a text or a JSON-lines format.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace gpuest {

// level: trace|debug|info|warn|error|off; format: text|json. Logs go to stderr.
absl::Status SetUpLogging(const std::string& level, const std::string& format);

}  // namespace gpuest
