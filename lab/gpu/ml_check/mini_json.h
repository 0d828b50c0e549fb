// File: mini_json.h
//
// A small strict JSON reader for gpuest-ml-check, which must build with a compiler and
// libtorch alone (a GPU machine with only PyTorch's wheel has no JSON library). It
// reads the model manifests: objects, arrays, strings (with \uXXXX escapes), numbers,
// true, false, null. The rest of the project reads JSON with nlohmann/json.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuest::ml_check {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  // Throws std::runtime_error naming the offset of the first error.
  static Json Parse(const std::string& text);

  Type type() const { return type_; }
  bool Has(const std::string& key) const;
  // Throw std::runtime_error naming the key or the expected type.
  const Json& operator[](const std::string& key) const;
  const std::vector<Json>& Items() const;
  double Number() const;
  int Int() const;
  const std::string& String() const;
  bool Bool() const;

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool boolean_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::map<std::string, Json> fields_;
};

}  // namespace gpuest::ml_check
