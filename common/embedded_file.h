// File: embedded_file.h
//
// A data file built into the program (cmake/GpuestEmbed.cmake: layer_types.json,
// client_policy.json), parsed once. It is part of the build, so a file that does not
// parse is a defect of this build: say so and stop rather than run without it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuest::common {

// parse(text, file) -> absl::StatusOr<T>; the value, kept for the program's life (hold
// it in a function-local static).
template <typename T, typename Parse>
const T* ParseEmbeddedFileOrDie(std::string_view text, const std::string& file,
                                Parse parse) {
  absl::StatusOr<T> parsed = parse(absl::string_view(text.data(), text.size()), file);
  if (!parsed.ok()) {
    std::fprintf(stderr, "gpuest: the embedded %s is invalid: %s\n", file.c_str(),
                 std::string(parsed.status().message()).c_str());
    std::abort();
  }
  return new T(std::move(*parsed));
}

}  // namespace gpuest::common
