// File: json_guard.h
//
// Cheap checks on untrusted JSON text before any parser sees it. nlohmann's dump() and
// protobuf's JSON parser recurse once per nesting level, so a body of a few hundred KB
// that nests 100,000 arrays overflows the stack or burns seconds of CPU; counting the
// depth first is one linear pass. Excerpts of untrusted text echoed in errors are cut
// at a UTF-8 character boundary, so the error itself is valid JSON text.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest {

// Deeper than any request or artifact gpuest reads (a Kubernetes Node object nests
// about 8 levels; a ModelDescription 4), and far below what recursion can survive.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of objects and arrays in text (strings and escapes skipped); it
// stops counting, and returns, once the depth passes stop_above.
int JsonNestingDepth(absl::string_view text, int stop_above = kMaxJsonDepth);

// OK, or INVALID_ARGUMENT naming what (a field or file) when text nests deeper than
// kMaxJsonDepth.
absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what);

// At most max_bytes of text, never ending inside a UTF-8 character.
std::string Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace gpuest
