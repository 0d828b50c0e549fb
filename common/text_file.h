// File: text_file.h
//
// Whole files as strings, with errors that name the path: how the model repository,
// the manifest types and the offline tools (lab/) read and write their files.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuest::common {

// What a reader may hold of one file, by kind; each reader names the bound it reads
// under, and a file over it is refused before a byte of it is read.
// A certificate chain, a key or a CA bundle (Mozilla's whole bundle is about 220 KB).
inline constexpr uint64_t kMaxPemFileBytes = uint64_t{1} << 20;
// A JSON document gpuest or its operator writes: a manifest, the GPU table, a stack
// context, the contention model, DRA device classes (the largest shipped is 20 KB).
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;
// A dataset the offline tools read (the largest in ../shared/data is 3 MB).
inline constexpr uint64_t kMaxDatasetFileBytes = uint64_t{1} << 30;

// The bytes of a regular file of at most max_bytes: NotFound "cannot read <path>"
// (also for a directory or a FIFO, which is never opened for a blocking read), or
// InvalidArgument "<path>: N bytes, over the limit of M" before any of it is read
// (and if it grows past max_bytes while being read).
absl::StatusOr<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes);

// A PEM file's text (a certificate, a chain, a key, a CA bundle): NotFound naming flag
// and path when it cannot be read, InvalidArgument when it holds no PEM block.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view flag);

// Replaces the file with text, whole (written beside as <path>.partial and renamed
// over it); Internal "cannot write <path>".
absl::Status WriteTextFile(const std::string& path, absl::string_view text);

}  // namespace gpuest::common
