// File: text_file.h
//
// Whole files as strings, with errors that name the path: how the model repository,
// the manifest types and the offline tools (lab/) read and write their files.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuest {

// The bytes of a file; NotFound "cannot read <path>".
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// A PEM file's text (a certificate, a chain, a key, a CA bundle): NotFound naming flag
// and path when it cannot be read, InvalidArgument when it holds no PEM block.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view flag);

// Replaces the file with text, whole (written beside as <path>.partial and renamed
// over it); Internal "cannot write <path>".
absl::Status WriteTextFile(const std::string& path, absl::string_view text);

}  // namespace gpuest
