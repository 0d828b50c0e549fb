// File: logging.h
//
// Sets up spdlog's default logger: level, and a text or a JSON-lines format. Every
// message goes through one rule on its way to a line, whatever wrote it: a peer's text
// in it (a pod or node name, an error quoting a field, a library's line about a bad
// handshake) is escaped and cut, so it can neither forge a line nor fill the log.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest::server {

// The most of one message a line carries; the rest is counted, not written.
inline constexpr size_t kMaxLogMessageBytes = 4096;

// message cut to max_bytes at a UTF-8 boundary, with the count of bytes left out.
std::string CutForLog(absl::string_view message, size_t max_bytes = kMaxLogMessageBytes);

// message as printable text on one line: backslashes, control characters (C0, DEL,
// C1) and bytes that are not UTF-8 written as escapes (\\, \n, \x1b, \xc2\x9b).
// Printable UTF-8 is kept as it is.
std::string EscapeForLog(absl::string_view message);

// level: trace|debug|info|warn|error|off; format: text|json. Logs go to stderr.
absl::Status SetUpLogging(const std::string& level, const std::string& format);

}  // namespace gpuest::server
