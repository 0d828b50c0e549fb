#include "common/json_guard.h"

#include "absl/strings/str_cat.h"

namespace gpuest {

int JsonNestingDepth(absl::string_view text, int stop_above) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // The escaped character cannot end the string.
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
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
