// File: json_guard.h
//
// Checks on untrusted JSON text before any parser sees it, in one linear pass:
// - Depth. nlohmann's dump() and protobuf's JSON parser recurse once per nesting level,
//   so a body of a few hundred KB that nests 100,000 arrays overflows the stack or
//   burns seconds of CPU.
// - Keys named twice in one object. Readers disagree on which copy wins (nlohmann and
//   protobuf take the last, and protobuf appends a repeated field's two lists;
//   simdjson's lookups take the first), so a duplicate lets one reader act on what
//   another checked differently. No sender gpuest serves writes one: Go's
//   encoding/json (kube-scheduler, the API server), Python's json.dumps
//   (gpuest.describe) and gpuest's own writers emit each key once.
// Excerpts of untrusted text echoed in errors are cut at a UTF-8 character boundary,
// so the error itself is valid JSON text.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest::common {

// Deeper than any request or artifact gpuest reads (a Kubernetes Node object nests
// about 8 levels; a ModelDescription 4), and far below what recursion can survive.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of objects and arrays in text (strings and escapes skipped); it
// stops counting, and returns, once the depth passes stop_above.
int JsonNestingDepth(absl::string_view text, int stop_above = kMaxJsonDepth);

// OK, or INVALID_ARGUMENT naming what (a field or file) when text nests deeper than
// kMaxJsonDepth or an object in it names a key twice (the key and where it sits are
// named: "the body: key \"a\" appears twice in one object, at items[3].metadata").
// Text that is not JSON passes: the parser after it says what is wrong.
absl::Status CheckJsonText(absl::string_view text, absl::string_view what);

// At most max_bytes of text, never ending inside a UTF-8 character.
std::string Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace gpuest::common
