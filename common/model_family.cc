#include "common/model_family.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"

namespace gpuest::common {
namespace {

// Built once from the enum's descriptor, so a new family needs no edit here.
const std::map<int, std::string>& Names() {
  static const auto* names = [] {
    auto* out = new std::map<int, std::string>();
    const google::protobuf::EnumDescriptor* d = v1::ModelFamily_descriptor();
    for (int i = 0; i < d->value_count(); ++i) {
      const int number = d->value(i)->number();
      if (number == v1::MODEL_FAMILY_UNSPECIFIED) continue;
      (*out)[number] =
          absl::AsciiStrToLower(absl::StripPrefix(d->value(i)->name(), "MODEL_FAMILY_"));
    }
    return out;
  }();
  return *names;
}

}  // namespace

const std::string& FamilyName(v1::ModelFamily family) {
  static const std::string* any = new std::string("any");
  const auto it = Names().find(family);
  return it == Names().end() ? *any : it->second;
}

std::optional<v1::ModelFamily> FamilyFromName(absl::string_view name) {
  for (const auto& [number, spelled] : Names()) {
    if (spelled == name) return static_cast<v1::ModelFamily>(number);
  }
  return std::nullopt;
}

}  // namespace gpuest::common
