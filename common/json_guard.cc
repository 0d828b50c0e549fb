#include "common/json_guard.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpuest {

int JsonNestingDepth(absl::string_view text, int stop_above) {
  int depth = 0, deepest = 0;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    switch (*p++) {
      case '"':
        // Most of a request's bytes are inside strings: jump from quote to quote
        // (memchr is vectorised), keeping a quote that an odd run of backslashes escapes.
        for (;;) {
          const char* quote = static_cast<const char*>(std::memchr(p, '"', end - p));
          if (quote == nullptr) return deepest;  // Unterminated: nothing more nests.
          const char* run = quote;
          while (run > p && run[-1] == '\\') --run;
          p = quote + 1;
          if ((quote - run) % 2 == 0) break;
        }
        break;
      case '{':
      case '[':
        if (++depth > deepest) deepest = depth;
        if (deepest > stop_above) return deepest;
        break;
      case '}':
      case ']':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what) {
  if (JsonNestingDepth(text) <= kMaxJsonDepth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": JSON nested more than ", kMaxJsonDepth, " levels deep (the limit)"));
}

std::string Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back off continuation bytes (10xxxxxx) to the start of the character they belong to.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

}  // namespace gpuest
