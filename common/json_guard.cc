#include "common/json_guard.h"

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace gpuest::common {
namespace {

// Past this many keys an object's duplicates are found with a hash set; below it a
// scan of the few keys is cheaper than building one (most objects have a handful).
constexpr size_t kKeysScannedInLine = 16;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// Four hex digits at s, or -1.
int32_t Hex4(absl::string_view s) {
  if (s.size() < 4) return -1;
  int32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const int d = HexDigit(s[i]);
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

// A JSON string's contents with its escapes applied, so that "a" and "\u0061" are
// one key, as every parser reads them. A malformed escape is kept as written: the
// parser after the check refuses the text.
std::string Unescape(absl::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out += raw[i];
      continue;
    }
    const char c = raw[++i];
    switch (c) {
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        int32_t code = Hex4(raw.substr(i + 1));
        if (code < 0) {
          out += "\\u";
          break;
        }
        i += 4;
        // A high surrogate and its low one are one character.
        if (code >= 0xD800 && code < 0xDC00 && raw.substr(i + 1, 2) == "\\u") {
          const int32_t low = Hex4(raw.substr(i + 3));
          if (low >= 0xDC00 && low < 0xE000) {
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
          }
        }
        AppendUtf8(static_cast<uint32_t>(code), out);
        break;
      }
      default:
        out += c;
        break;  // \" \\ \/ and anything the parser will refuse
    }
  }
  return out;
}

// One open object or array.
struct Frame {
  bool object = false;
  size_t keys_begin = 0;  // its keys, in JsonScan::keys_
  // Where it sits in its parent: under the key name, or at element index.
  bool under_key = false;
  absl::string_view name;
  size_t index = 0;
  size_t elements = 0;  // in an array: commas seen, the index of the element now
  std::unique_ptr<absl::flat_hash_set<absl::string_view>>
      many;  // past kKeysScannedInLine
};

// The one pass: depth, and the first key an object names twice.
class JsonScan {
 public:
  JsonScan(absl::string_view text, int stop_above)
      : text_(text), stop_above_(stop_above) {}

  void Run() {
    const char* p = text_.data();
    const char* const end = p + text_.size();
    bool expecting_key = false;
    while (p < end) {
      switch (*p++) {
        case '"': {
          const char* begin = p;
          // Most bytes are inside strings: jump from quote to quote (memchr is
          // vectorised), keeping a quote that an odd run of backslashes escapes.
          const char* quote = nullptr;
          for (;;) {
            quote = static_cast<const char*>(std::memchr(p, '"', end - p));
            if (quote == nullptr) return;  // Unterminated: nothing more to see.
            const char* run = quote;
            while (run > p && run[-1] == '\\') --run;
            p = quote + 1;
            if ((quote - run) % 2 == 0) break;
          }
          if (expecting_key && !frames_.empty() && frames_.back().object) {
            expecting_key = false;
            if (!AddKey(absl::string_view(begin, quote - begin))) return;
          }
          break;
        }
        case '{':
        case '[':
          Push(p[-1] == '{');
          expecting_key = p[-1] == '{';
          if (deepest_ > stop_above_) return;
          break;
        case '}':
        case ']':
          Pop();
          expecting_key = false;
          break;
        case ',':
          if (!frames_.empty()) {
            expecting_key = frames_.back().object;
            if (!frames_.back().object) ++frames_.back().elements;
          }
          break;
        default:
          break;
      }
    }
  }

  int deepest() const { return deepest_; }
  const std::string& duplicate() const { return duplicate_; }
  bool found_duplicate() const { return found_duplicate_; }

  // Where the object with the duplicate sits: "items[3].metadata", or "the top level".
  std::string DuplicateAt() const { return at_; }

 private:
  void Push(bool object) {
    Frame frame;
    frame.object = object;
    frame.keys_begin = keys_.size();
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      // A key's view stays valid while the frame below it is open: keys_ only shrinks
      // on a pop, and decoded_ never does.
      frame.under_key = parent.object && keys_.size() > parent.keys_begin;
      if (frame.under_key) frame.name = keys_.back();
      frame.index = parent.elements;
    }
    frames_.push_back(std::move(frame));
    deepest_ = std::max(deepest_, static_cast<int>(frames_.size()));
  }

  void Pop() {
    if (frames_.empty()) return;
    keys_.resize(frames_.back().keys_begin);
    frames_.pop_back();
  }

  // False when the top object already has key.
  bool AddKey(absl::string_view raw) {
    absl::string_view key = raw;
    if (raw.find('\\') != absl::string_view::npos) {
      decoded_.push_back(Unescape(raw));
      key = decoded_.back();
    }
    Frame& frame = frames_.back();
    const size_t count = keys_.size() - frame.keys_begin;
    bool seen = false;
    if (frame.many) {
      seen = !frame.many->insert(key).second;
    } else {
      for (size_t i = frame.keys_begin; i < keys_.size() && !seen; ++i) {
        seen = keys_[i] == key;
      }
      if (!seen && count + 1 == kKeysScannedInLine) {
        frame.many = std::make_unique<absl::flat_hash_set<absl::string_view>>(
            keys_.begin() + static_cast<std::ptrdiff_t>(frame.keys_begin), keys_.end());
        frame.many->insert(key);
      }
    }
    if (seen) {
      found_duplicate_ = true;
      duplicate_ = std::string(key);
      for (size_t i = 1; i < frames_.size(); ++i) {
        if (!frames_[i - 1].object) {
          absl::StrAppend(&at_, "[", frames_[i].index, "]");
        } else if (frames_[i].under_key) {
          absl::StrAppend(&at_, at_.empty() ? "" : ".", frames_[i].name);
        }
      }
      if (at_.empty()) at_ = "the top level";
      return false;
    }
    keys_.push_back(key);
    return true;
  }

  absl::string_view text_;
  int stop_above_;
  int deepest_ = 0;
  std::vector<Frame> frames_;
  std::vector<absl::string_view> keys_;  // the open objects' keys, innermost last
  std::deque<std::string> decoded_;      // keys that had escapes, unescaped (stable)
  bool found_duplicate_ = false;
  std::string duplicate_;
  std::string at_;
};

}  // namespace

int JsonNestingDepth(absl::string_view text, int stop_above) {
  JsonScan scan(text, stop_above);
  scan.Run();
  return scan.deepest();
}

absl::Status CheckJsonText(absl::string_view text, absl::string_view what) {
  JsonScan scan(text, kMaxJsonDepth);
  scan.Run();
  if (scan.deepest() > kMaxJsonDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": JSON nested more than ", kMaxJsonDepth, " levels deep (the limit)"));
  }
  if (scan.found_duplicate()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": key \"", Utf8Prefix(scan.duplicate(), 128),
        "\" appears twice in one object, at ", Utf8Prefix(scan.DuplicateAt(), 256),
        " (readers disagree on which copy counts, so none is taken)"));
  }
  return absl::OkStatus();
}

std::string Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = max_bytes;
  // Back off continuation bytes (10xxxxxx) to the start of the character they belong to.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end));
}

}  // namespace gpuest::common
