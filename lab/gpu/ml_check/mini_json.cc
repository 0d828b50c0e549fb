#include "lab/gpu/ml_check/mini_json.h"

#include <cmath>
#include <cstdlib>

namespace gpuest::ml_check {

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  Json Document() {
    Json value = Value(0);
    Space();
    if (at_ != s_.size()) Fail("text after the document");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw std::runtime_error("JSON at offset " + std::to_string(at_) + ": " + why);
  }
  void Space() {
    while (at_ < s_.size() &&
           (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\r' || s_[at_] == '\t')) {
      ++at_;
    }
  }
  bool Eat(const char* word) {
    const std::string w(word);
    if (s_.compare(at_, w.size(), w) != 0) return false;
    at_ += w.size();
    return true;
  }
  Json Value(int depth) {
    if (depth > 64) Fail("nested too deeply");
    Space();
    if (at_ >= s_.size()) Fail("unexpected end");
    Json v;
    const char c = s_[at_];
    if (c == '{') {
      v.type_ = Json::Type::kObject;
      ++at_;
      Space();
      if (at_ < s_.size() && s_[at_] == '}') return ++at_, v;
      for (;;) {
        Space();
        std::string key = String();
        Space();
        if (!Eat(":")) Fail("':' expected");
        if (!v.fields_.emplace(key, Value(depth + 1)).second)
          Fail("duplicate key " + key);
        Space();
        if (Eat(",")) continue;
        if (Eat("}")) return v;
        Fail("',' or '}' expected");
      }
    }
    if (c == '[') {
      v.type_ = Json::Type::kArray;
      ++at_;
      Space();
      if (at_ < s_.size() && s_[at_] == ']') return ++at_, v;
      for (;;) {
        v.items_.push_back(Value(depth + 1));
        Space();
        if (Eat(",")) continue;
        if (Eat("]")) return v;
        Fail("',' or ']' expected");
      }
    }
    if (c == '"') {
      v.type_ = Json::Type::kString;
      v.string_ = String();
      return v;
    }
    if (Eat("true") || Eat("false")) {
      v.type_ = Json::Type::kBool;
      v.boolean_ = s_[at_ - 1] == 'e' && s_[at_ - 2] == 'u';  // "true", not "false".
      return v;
    }
    if (Eat("null")) return v;
    const char* begin = s_.c_str() + at_;
    char* end = nullptr;
    v.number_ = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v.number_)) Fail("a value expected");
    v.type_ = Json::Type::kNumber;
    at_ += static_cast<size_t>(end - begin);
    return v;
  }
  std::string String() {
    if (!Eat("\"")) Fail("'\"' expected");
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) break;
      c = s_[at_++];
      switch (c) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (at_ + 4 > s_.size()) Fail("short \\u escape");
          const unsigned code = std::stoul(s_.substr(at_, 4), nullptr, 16);
          at_ += 4;
          // Manifests hold ASCII; anything else is kept as UTF-8 of the BMP code.
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          out += c;
      }
    }
    if (!Eat("\"")) Fail("unterminated string");
    return out;
  }

  const std::string& s_;
  size_t at_ = 0;
};

Json Json::Parse(const std::string& text) { return JsonParser(text).Document(); }

bool Json::Has(const std::string& key) const {
  return type_ == Type::kObject && fields_.count(key) > 0;
}

const Json& Json::operator[](const std::string& key) const {
  if (type_ != Type::kObject)
    throw std::runtime_error("not an object where '" + key + "' is read");
  auto it = fields_.find(key);
  if (it == fields_.end()) throw std::runtime_error("key '" + key + "' missing");
  return it->second;
}

const std::vector<Json>& Json::Items() const {
  if (type_ != Type::kArray) throw std::runtime_error("an array expected");
  return items_;
}

double Json::Number() const {
  if (type_ != Type::kNumber) throw std::runtime_error("a number expected");
  return number_;
}

int Json::Int() const {
  const double n = Number();
  if (n != std::floor(n) || std::abs(n) > 1e9) {
    throw std::runtime_error("an integer expected");
  }
  return static_cast<int>(n);
}

const std::string& Json::String() const {
  if (type_ != Type::kString) throw std::runtime_error("a string expected");
  return string_;
}

bool Json::Bool() const {
  if (type_ != Type::kBool) throw std::runtime_error("true or false expected");
  return boolean_;
}

}  // namespace gpuest::ml_check
