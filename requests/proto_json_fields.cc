#include "requests/proto_json_fields.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace gpuest::requests {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Whether protobuf reads the field's value as a message object of fields: not a map
// (its keys are data) and not a well-known type (Struct, Duration, ... have JSON forms
// of their own).
bool HoldsFields(const FieldDescriptor& field) {
  return field.type() == FieldDescriptor::TYPE_MESSAGE && !field.is_map() &&
         !absl::StartsWith(field.message_type()->file()->name(), "google/protobuf/");
}

absl::Status CheckObject(const nlohmann::json& object, const Descriptor& type,
                         const std::string& at, absl::string_view what) {
  std::map<int, std::string> keys_by_field;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const FieldDescriptor* field = JsonField(type, it.key());
    if (field == nullptr) continue;  // protobuf's parser refuses unknown fields itself
    const auto [seen, fresh] = keys_by_field.emplace(field->number(), it.key());
    const std::string here = at.empty() ? it.key() : absl::StrCat(at, ".", it.key());
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": field ", field->name(), " is given twice, as \"",
                       seen->second, "\" and as \"", it.key(), "\"",
                       at.empty() ? "" : absl::StrCat(" (in ", at, ")")));
    }
    if (!HoldsFields(*field)) continue;
    const nlohmann::json& value = it.value();
    if (value.is_object()) {
      if (absl::Status s = CheckObject(value, *field->message_type(), here, what);
          !s.ok())
        return s;
    } else if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_object()) continue;
        if (absl::Status s = CheckObject(value[i], *field->message_type(),
                                         absl::StrCat(here, "[", i, "]"), what);
            !s.ok()) {
          return s;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const FieldDescriptor* JsonField(const Descriptor& type, absl::string_view key) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* field = type.field(i);
    if (field->json_name() == key || field->name() == key) return field;
  }
  return nullptr;
}

absl::Status CheckEachFieldOnce(absl::string_view json_text, const Descriptor& type,
                                absl::string_view what) {
  const nlohmann::json doc =
      nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return absl::OkStatus();
  return CheckObject(doc, type, "", what);
}

}  // namespace gpuest::requests
