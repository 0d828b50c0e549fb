#include "estimators/core/layer_types.h"

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
#include "common/embedded_file.h"
#include "common/status_macros.h"
#include "common/strict_json.h"
#include "estimators/core/layer_types_json.h"
#include "nlohmann/json.hpp"

namespace gpuest::core {
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
    {"fused_attention", SavedForBackward::kFusedAttention},
    {"input_and_evo_norm", SavedForBackward::kInputAndEvoNorm},
    {"float_input_and_normalized", SavedForBackward::kFloatInputAndNormalized}};

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

using Fields = common::strict_json::Fields<nlohmann::json>;

// The keys of an object that names each of a table's words once: the "kinds" and
// "saves" glossaries must document exactly the words the code knows.
template <typename T, size_t N>
absl::Status CheckGlossary(Fields& f, const std::string& key,
                           const std::pair<const char*, T> (&words)[N],
                           absl::string_view except = "") {
  GPUEST_ASSIGN_OR_RETURN(Fields glossary, f.Object(key));
  std::set<std::string> listed, known;
  for (const std::string& word : glossary.Keys()) {
    std::string text;
    GPUEST_RETURN_IF_ERROR(glossary.Get(word, text));
    listed.insert(word);
  }
  for (const auto& [word, value] : words) {
    if (word != except) known.insert(word);
  }
  for (const std::string& word : known) {
    if (!listed.count(word)) return glossary.Error(word, "is missing");
  }
  for (const std::string& word : listed) {
    if (!known.count(word)) return glossary.Error(word, "is not a word the code knows");
  }
  return absl::OkStatus();
}

// The saves word at key, into out.
absl::Status ReadSaves(Fields& at, const std::string& key, SavedForBackward& out) {
  std::string name;
  GPUEST_RETURN_IF_ERROR(at.Get(key, name));
  std::optional<SavedForBackward> saves = Lookup(kSaves, name);
  if (!saves) return at.Error(key, absl::StrCat("is not a known saves: '", name, "'"));
  out = *saves;
  return absl::OkStatus();
}

// Each of "types", by its exact name and, squashed, by its name and its aliases.
absl::Status ReadTypes(Fields& f, Table& t) {
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> types, f.Objects("types"));
  for (Fields& type : types) {
    LayerTypeInfo info;
    std::string kind;
    std::vector<std::string> aliases;
    GPUEST_RETURN_IF_ERROR(type.Get("name", info.canonical));
    GPUEST_RETURN_IF_ERROR(type.Get("kind", kind));
    const std::optional<LayerKind> known = Lookup(kKinds, kind);
    if (!known || *known == LayerKind::kUnknown) {
      return type.Error("kind", absl::StrCat("is not a known kind: '", kind, "'"));
    }
    info.kind = *known;
    GPUEST_RETURN_IF_ERROR(ReadSaves(type, "saves", info.saves));
    GPUEST_RETURN_IF_ERROR(type.GetOptional("aliases", aliases));
    GPUEST_RETURN_IF_ERROR(type.Finish());
    if (!t.exact.emplace(info.canonical, info).second) {
      return type.Error("name", absl::StrCat("'", info.canonical, "' is listed twice"));
    }
    t.squashed.try_emplace(Squash(info.canonical), info);
    for (const std::string& alias : aliases) t.squashed.try_emplace(Squash(alias), info);
  }
  return absl::OkStatus();
}

// The family rule's named signals, into t; returns the names a clause may use: the
// kinds' and the signals'.
absl::StatusOr<std::set<std::string>> ReadSignals(Fields& rule, Table& t) {
  std::set<std::string> known_signals;
  for (const auto& [kind, value] : kKinds) known_signals.insert(kind);
  GPUEST_ASSIGN_OR_RETURN(Fields signals, rule.Object("signals"));
  for (const std::string& name : signals.Keys()) {
    GPUEST_ASSIGN_OR_RETURN(Fields s, signals.Object(name));
    std::vector<std::string> types, name_contains;
    GPUEST_RETURN_IF_ERROR(s.Get("types", types));
    GPUEST_RETURN_IF_ERROR(s.Get("name_contains", name_contains));
    GPUEST_RETURN_IF_ERROR(s.Finish());
    Signal signal{name, {}, {}};
    for (const std::string& type : types) signal.types.insert(Squash(type));
    for (const std::string& part : name_contains) {
      signal.name_contains.push_back(Squash(part));
    }
    known_signals.insert(name);
    t.signals.push_back(std::move(signal));
  }
  return known_signals;
}

// One clause of the family rule, naming only known signals.
absl::StatusOr<Clause> ReadClause(Fields& c, const std::set<std::string>& known_signals) {
  Clause clause;
  std::string family;
  GPUEST_RETURN_IF_ERROR(c.Get("family", family));
  if (!v1::ModelFamily_Parse(family, &clause.family) ||
      clause.family == v1::MODEL_FAMILY_UNSPECIFIED) {
    return c.Error("family", absl::StrCat("is not a family: '", family, "'"));
  }
  GPUEST_RETURN_IF_ERROR(c.GetOptional("any_of", clause.any_of));
  GPUEST_RETURN_IF_ERROR(c.GetOptional("all_of", clause.all_of));
  if (c.Has("only")) {
    std::vector<std::string> only;
    GPUEST_RETURN_IF_ERROR(c.Get("only", only));
    clause.only.emplace(only.begin(), only.end());
  }
  GPUEST_RETURN_IF_ERROR(c.Finish());
  std::vector<std::string> named = clause.any_of;
  named.insert(named.end(), clause.all_of.begin(), clause.all_of.end());
  if (clause.only) named.insert(named.end(), clause.only->begin(), clause.only->end());
  for (const std::string& s : named) {
    if (!known_signals.count(s)) {
      return c.Invalid(absl::StrCat("names an unknown signal '", s, "'"));
    }
  }
  return clause;
}

// The family rule's doc, signals and clauses, into t.
absl::Status ReadFamilyRule(Fields& rule, Table& t) {
  std::string rule_doc;
  GPUEST_RETURN_IF_ERROR(rule.Get("doc", rule_doc));
  GPUEST_ASSIGN_OR_RETURN(const std::set<std::string> known_signals,
                          ReadSignals(rule, t));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> clauses, rule.Objects("clauses"));
  GPUEST_RETURN_IF_ERROR(rule.Finish());
  for (Fields& c : clauses) {
    GPUEST_ASSIGN_OR_RETURN(Clause clause, ReadClause(c, known_signals));
    t.clauses.push_back(std::move(clause));
  }
  return absl::OkStatus();
}

absl::StatusOr<Table> ParseTable(Fields& f) {
  Table t;
  GPUEST_ASSIGN_OR_RETURN(Fields doc, f.Object("doc"));
  doc.Keys();  // Prose for people; any keys.
  GPUEST_RETURN_IF_ERROR(CheckGlossary(f, "kinds", kKinds, "unknown"));
  GPUEST_RETURN_IF_ERROR(CheckGlossary(f, "saves", kSaves));
  GPUEST_RETURN_IF_ERROR(ReadSaves(f, "unknown_saves", t.unknown_saves));
  GPUEST_RETURN_IF_ERROR(ReadTypes(f, t));
  GPUEST_ASSIGN_OR_RETURN(Fields rule, f.Object("family_rule"));
  GPUEST_RETURN_IF_ERROR(ReadFamilyRule(rule, t));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  const Clause& last = t.clauses.empty() ? Clause{} : t.clauses.back();
  if (t.clauses.empty() || !last.any_of.empty() || !last.all_of.empty() || last.only) {
    return rule.Error("clauses", "must end with a clause that holds for every model");
  }
  return t;
}

absl::StatusOr<Table> ParseLayerTypes(absl::string_view text, const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(nlohmann::json json, Fields::Parse(text, file));
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  return ParseTable(f);
}

// The embedded table, parsed once. It is part of the build, so a table that does not
// parse is a defect of this build: say so and stop rather than answer without it.
const Table& TheTable() {
  static const Table* table = common::ParseEmbeddedFileOrDie<Table>(
      LayerTypesJson(), "layer_types.json", ParseLayerTypes);
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

absl::Status CheckLayerTypeTable(absl::string_view text, const std::string& file) {
  return ParseLayerTypes(text, file).status();
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

}  // namespace gpuest::core
