#include "estimators/layer_types.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "estimators/layer_types_json.h"
#include "nlohmann/json.hpp"

namespace gpuest {
namespace {

// The table's spellings of the kinds and of what a layer saves.
constexpr std::pair<const char*, LayerKind> kKinds[] = {
    {"linear", LayerKind::kLinear},        {"conv", LayerKind::kConv},
    {"batch_norm", LayerKind::kBatchNorm}, {"layer_norm", LayerKind::kLayerNorm},
    {"dropout", LayerKind::kDropout},      {"activation", LayerKind::kActivation},
    {"pooling", LayerKind::kPooling},      {"embedding", LayerKind::kEmbedding},
    {"attention", LayerKind::kAttention},  {"softmax", LayerKind::kSoftmax},
    {"shape", LayerKind::kShape},          {"unknown", LayerKind::kUnknown}};
constexpr std::pair<const char*, SavedForBackward> kSaves[] = {
    {"nothing", SavedForBackward::kNothing},
    {"input", SavedForBackward::kInput},
    {"output", SavedForBackward::kOutput},
    {"input_and_stats", SavedForBackward::kInputAndStats},
    {"mask", SavedForBackward::kMask},
    {"input_and_indices", SavedForBackward::kInputAndIndices},
    {"fused_attention", SavedForBackward::kFusedAttention}};

template <typename T, size_t N>
std::optional<T> Lookup(const std::pair<const char*, T> (&table)[N],
                        const std::string& name) {
  for (const auto& [spelled, value] : table) {
    if (name == spelled) return value;
  }
  return std::nullopt;
}

const char* KindName(LayerKind kind) {
  for (const auto& [spelled, value] : kKinds) {
    if (value == kind) return spelled;
  }
  return "unknown";
}

// Lower-cased, underscores and spaces removed, so 'batch_normalization',
// 'BatchNormalization' and 'batchnormalization' meet.
std::string Squash(absl::string_view type) {
  std::string out;
  out.reserve(type.size());
  for (char c : type) {
    if (c == '_' || c == ' ' || c == '-') continue;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));  // No locale call.
  }
  return out;
}

// A named signal of the family rule: type names that raise it, whole or by a part,
// compared squashed as spellings are.
struct Signal {
  std::string name;
  absl::flat_hash_set<std::string> types;  // Squashed.
  std::vector<std::string> name_contains;  // Squashed.

  bool Matches(absl::string_view type) const {
    const std::string squashed = Squash(type);
    if (types.contains(squashed)) return true;
    return std::any_of(
        name_contains.begin(), name_contains.end(),
        [&](const std::string& part) { return absl::StrContains(squashed, part); });
  }
};

// One clause of the family rule; conditions left out hold.
struct Clause {
  v1::ModelFamily family = v1::MODEL_FAMILY_OTHER;
  std::vector<std::string> any_of, all_of;
  std::optional<std::set<std::string>> only;

  bool Holds(const std::set<std::string>& present) const {
    if (!any_of.empty() && std::none_of(any_of.begin(), any_of.end(),
                                        [&](auto& s) { return present.count(s) > 0; })) {
      return false;
    }
    for (const std::string& s : all_of) {
      if (!present.count(s)) return false;
    }
    if (only) {
      for (const std::string& s : present) {
        if (!only->count(s)) return false;
      }
    }
    return true;
  }
};

struct Table {
  // Exact PyTorch class names first: GPT-2's Conv1D (a linear layer) and torch's
  // Conv1d differ only in case.
  absl::flat_hash_map<std::string, LayerTypeInfo> exact;
  // Then any spelling, squashed; the first type listed wins.
  absl::flat_hash_map<std::string, LayerTypeInfo> squashed;
  SavedForBackward unknown_saves = SavedForBackward::kInput;
  std::vector<Signal> signals;
  std::vector<Clause> clauses;
};

absl::StatusOr<Table> ParseTable(const nlohmann::json& j) {
  Table t;
  auto saves_of = [](const std::string& name) -> absl::StatusOr<SavedForBackward> {
    if (auto s = Lookup(kSaves, name)) return *s;
    return absl::InvalidArgumentError(absl::StrCat("unknown saves '", name, "'"));
  };
  auto unknown_saves = saves_of(j.at("unknown_saves").get<std::string>());
  if (!unknown_saves.ok()) return unknown_saves.status();
  t.unknown_saves = *unknown_saves;

  for (const nlohmann::json& type : j.at("types")) {
    LayerTypeInfo info;
    info.canonical = type.at("name").get<std::string>();
    const std::optional<LayerKind> kind =
        Lookup(kKinds, type.at("kind").get<std::string>());
    if (!kind || *kind == LayerKind::kUnknown) {
      return absl::InvalidArgumentError(absl::StrCat(info.canonical, ": bad kind"));
    }
    info.kind = *kind;
    auto saves = saves_of(type.at("saves").get<std::string>());
    if (!saves.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(info.canonical, ": ", saves.status().message()));
    }
    info.saves = *saves;
    if (!t.exact.emplace(info.canonical, info).second) {
      return absl::InvalidArgumentError(absl::StrCat(info.canonical, " is listed twice"));
    }
    t.squashed.try_emplace(Squash(info.canonical), info);
    for (const nlohmann::json& alias : type.value("aliases", nlohmann::json::array())) {
      t.squashed.try_emplace(Squash(alias.get<std::string>()), info);
    }
  }

  const nlohmann::json& rule = j.at("family_rule");
  std::set<std::string> known_signals;
  for (const auto& [kind, value] : kKinds) known_signals.insert(kind);
  for (const auto& [name, s] : rule.at("signals").items()) {
    Signal signal{name, {}, {}};
    for (const std::string& type : s.at("types").get<std::vector<std::string>>()) {
      signal.types.insert(Squash(type));
    }
    for (const std::string& part :
         s.at("name_contains").get<std::vector<std::string>>()) {
      signal.name_contains.push_back(Squash(part));
    }
    known_signals.insert(name);
    t.signals.push_back(std::move(signal));
  }
  for (const nlohmann::json& c : rule.at("clauses")) {
    Clause clause;
    const std::string family = c.at("family").get<std::string>();
    if (!v1::ModelFamily_Parse(family, &clause.family) ||
        clause.family == v1::MODEL_FAMILY_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat("family_rule: bad family ", family));
    }
    clause.any_of = c.value("any_of", std::vector<std::string>());
    clause.all_of = c.value("all_of", std::vector<std::string>());
    if (c.contains("only")) clause.only = c.at("only").get<std::set<std::string>>();
    std::vector<std::string> named = clause.any_of;
    named.insert(named.end(), clause.all_of.begin(), clause.all_of.end());
    if (clause.only) named.insert(named.end(), clause.only->begin(), clause.only->end());
    for (const std::string& s : named) {
      if (!known_signals.count(s)) {
        return absl::InvalidArgumentError(
            absl::StrCat("family_rule: unknown signal ", s));
      }
    }
    t.clauses.push_back(std::move(clause));
  }
  const Clause& last = t.clauses.empty() ? Clause{} : t.clauses.back();
  if (t.clauses.empty() || !last.any_of.empty() || !last.all_of.empty() || last.only) {
    return absl::InvalidArgumentError(
        "family_rule: the last clause must hold for every model");
  }
  return t;
}

// The embedded table, parsed once. It is part of the build, so a table that does not
// parse is a defect of this build: say so and stop rather than answer without it.
const Table& TheTable() {
  static const Table* table = [] {
    const std::string_view text = LayerTypesJson();
    absl::StatusOr<Table> parsed = absl::InternalError("not parsed");
    try {
      parsed = ParseTable(nlohmann::json::parse(text.begin(), text.end()));
    } catch (const nlohmann::json::exception& e) {
      parsed = absl::InternalError(e.what());
    }
    if (!parsed.ok()) {
      std::fprintf(stderr, "gpuest: the embedded layer_types.json is invalid: %s\n",
                   std::string(parsed.status().message()).c_str());
      std::abort();
    }
    return new Table(std::move(*parsed));
  }();
  return *table;
}

}  // namespace

LayerTypeInfo ClassifyLayerType(absl::string_view type) {
  const Table& table = TheTable();
  if (auto it = table.exact.find(type); it != table.exact.end()) return it->second;
  if (auto it = table.squashed.find(Squash(type)); it != table.squashed.end()) {
    return it->second;
  }
  return LayerTypeInfo{std::string(type), LayerKind::kUnknown, table.unknown_saves};
}

v1::ModelFamily InferFamily(
    const google::protobuf::Map<std::string, int64_t>& layer_counts) {
  const Table& table = TheTable();
  std::set<std::string> present;
  for (const auto& [type, count] : layer_counts) {
    if (count <= 0) continue;
    present.insert(KindName(ClassifyLayerType(type).kind));
    for (const Signal& signal : table.signals) {
      if (signal.Matches(type)) present.insert(signal.name);
    }
  }
  for (const Clause& clause : table.clauses) {
    if (clause.Holds(present)) return clause.family;
  }
  return v1::MODEL_FAMILY_OTHER;  // Unreachable: the last clause always holds.
}

}  // namespace gpuest
