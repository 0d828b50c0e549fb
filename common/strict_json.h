// File: strict_json.h
//
// The one strict reader of JSON documents this project reads (model manifests, the
// contention model, the layer-type table): field by field, each error naming the file
// and the key's path ("models/allocsim/manifest.json: 'calibration.families.cnn.
// safe_factor' is missing"), and no key left unread. An unknown key is an error, not
// ignored: these files come from this project's own writers, so a key the reader does
// not know is a typo, a hand edit, or a writer newer than the reader, and each of those
// should stop a load rather than be served half-understood.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json_guard.h"
#include "nlohmann/json.hpp"

namespace gpuest::common::strict_json {

// One JSON value into the C++ value of the matching type: false on a mismatch.
// Integers must be JSON integers (no 2.5 for a count) and fit; unsigned ones are
// non-negative.
template <typename Json>
bool ReadValue(const Json& j, std::string& out) {
  if (!j.is_string()) return false;
  out = j.template get<std::string>();
  return true;
}
template <typename Json>
bool ReadValue(const Json& j, bool& out) {
  if (!j.is_boolean()) return false;
  out = j.template get<bool>();
  return true;
}
template <typename Json>
bool ReadValue(const Json& j, double& out) {
  if (!j.is_number()) return false;
  out = j.template get<double>();
  return true;
}
template <typename Json>
bool ReadValue(const Json& j, int64_t& out) {
  if (j.is_number_unsigned()) {
    if (j.template get<uint64_t>() >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
  } else if (!j.is_number_integer()) {
    return false;
  }
  out = j.template get<int64_t>();
  return true;
}
template <typename Json>
bool ReadValue(const Json& j, int& out) {
  int64_t wide = 0;
  if (!ReadValue(j, wide) || wide < std::numeric_limits<int>::min() ||
      wide > std::numeric_limits<int>::max()) {
    return false;
  }
  out = static_cast<int>(wide);
  return true;
}
template <typename Json>
bool ReadValue(const Json& j, uint64_t& out) {
  // Parsed text holds 4 as unsigned; a document built in C++ may hold it as signed.
  if (j.is_number_unsigned()) {
    out = j.template get<uint64_t>();
    return true;
  }
  if (!j.is_number_integer() || j.template get<int64_t>() < 0) return false;
  out = static_cast<uint64_t>(j.template get<int64_t>());
  return true;
}
template <typename Json, typename T>
bool ReadValue(const Json& j, std::vector<T>& out) {
  if (!j.is_array()) return false;
  std::vector<T> values(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!ReadValue(j[i], values[i])) return false;
  }
  out = std::move(values);
  return true;
}

// What ReadValue wants, for error messages.
inline const char* Wanted(const std::string*) { return "a string"; }
inline const char* Wanted(const bool*) { return "true or false"; }
inline const char* Wanted(const double*) { return "a number"; }
inline const char* Wanted(const int64_t*) { return "an integer"; }
inline const char* Wanted(const int*) { return "an integer"; }
inline const char* Wanted(const uint64_t*) { return "a non-negative integer"; }
template <typename T>
const char* Wanted(const std::vector<T>*) {
  return "an array of the right type";
}

// The keys of one JSON object as a manifest type reads them. Refers to the document
// it was made from, which must outlive it.
template <typename Json>
class Fields {
 public:
  // InvalidArgument unless value is an object. path: where it sits ("" for the root).
  static absl::StatusOr<Fields> Of(const Json& value, const std::string& file,
                                   const std::string& path = "") {
    Fields f(value, file, path);
    if (!value.is_object()) return f.ErrorAt(path, "must be a JSON object");
    return f;
  }

  // The document in a file's text; InvalidArgument names the file. A key named twice
  // is refused (json_guard.h): these files' writers never write one.
  static absl::StatusOr<Json> Parse(absl::string_view text, const std::string& file) {
    if (absl::Status shape = CheckJsonText(text, file); !shape.ok()) return shape;
    try {
      return Json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": not JSON: ", e.what()));
    }
  }

  bool Has(const std::string& key) const { return json_->contains(key); }

  template <typename T>
  absl::Status Get(const std::string& key, T& out) {
    if (!Has(key)) return Error(key, "is missing");
    return GetPresent(key, out);
  }

  // Leaves out as it is when the key is absent.
  template <typename T>
  absl::Status GetOptional(const std::string& key, T& out) {
    return Has(key) ? GetPresent(key, out) : absl::OkStatus();
  }

  absl::StatusOr<Fields> Object(const std::string& key) {
    if (!Has(key)) return Error(key, "is missing");
    read_.insert(key);
    return Fields::Of(json_->at(key), file_, Path(key));
  }

  // An array of objects.
  absl::StatusOr<std::vector<Fields>> Objects(const std::string& key) {
    if (!Has(key)) return Error(key, "is missing");
    read_.insert(key);
    const Json& array = json_->at(key);
    if (!array.is_array()) return Error(key, "must be an array");
    std::vector<Fields> out;
    for (size_t i = 0; i < array.size(); ++i) {
      absl::StatusOr<Fields> element =
          Fields::Of(array[i], file_, absl::StrCat(Path(key), "[", i, "]"));
      if (!element.ok()) return element.status();
      out.push_back(std::move(*element));
    }
    return out;
  }

  // The raw value, for a part with its own FromJson (HeadSpec, NetworkConfig, ...).
  absl::StatusOr<const Json*> Value(const std::string& key) {
    if (!Has(key)) return Error(key, "is missing");
    read_.insert(key);
    return &json_->at(key);
  }

  // Every key, for objects keyed by name (families, heads); they count as read.
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    for (auto it = json_->begin(); it != json_->end(); ++it) keys.push_back(it.key());
    read_.insert(keys.begin(), keys.end());
    return keys;
  }

  // "<file>: '<path.key>' <why>".
  absl::Status Error(const std::string& key, absl::string_view why) const {
    return ErrorAt(Path(key), why);
  }

  // "<file>: '<path>' <why>", for this object as a whole.
  absl::Status Invalid(absl::string_view why) const { return ErrorAt(path_, why); }

  // InvalidArgument naming the first key nothing read.
  absl::Status Finish() const {
    for (auto it = json_->begin(); it != json_->end(); ++it) {
      if (!read_.count(it.key())) return Error(it.key(), "is not a known key");
    }
    return absl::OkStatus();
  }

  const std::string& file() const { return file_; }
  std::string Path(const std::string& key) const {
    return path_.empty() ? key : absl::StrCat(path_, ".", key);
  }

 private:
  Fields(const Json& json, std::string file, std::string path)
      : json_(&json), file_(std::move(file)), path_(std::move(path)) {}

  template <typename T>
  absl::Status GetPresent(const std::string& key, T& out) {
    read_.insert(key);
    if (!ReadValue(json_->at(key), out)) {
      return Error(key, absl::StrCat("must be ", Wanted(&out)));
    }
    return absl::OkStatus();
  }

  absl::Status ErrorAt(const std::string& path, absl::string_view why) const {
    return absl::InvalidArgumentError(path.empty()
                                          ? absl::StrCat(file_, ": ", why)
                                          : absl::StrCat(file_, ": '", path, "' ", why));
  }

  const Json* json_;
  std::string file_;
  std::string path_;
  std::set<std::string> read_;
};

}  // namespace gpuest::common::strict_json
