#include "estimators/gpumemnet/gpumemnet_manifest.h"

#include "absl/strings/str_cat.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "estimators/core/layer_types.h"

namespace gpuest::gpumemnet {
namespace {

using Json = nlohmann::json;
using Fields = core::manifest::Fields<Json>;

// A part with its own FromJson (NetworkConfig, EncodingSpec), read at its key.
template <typename Part>
absl::StatusOr<Part> PartFromJson(Fields& f, const std::string& key) {
  GPUEST_ASSIGN_OR_RETURN(Fields part, f.Object(key));
  return Part::FromJson(part);
}

absl::StatusOr<MemberRecord> MemberFromJson(Fields& f) {
  MemberRecord m;
  GPUEST_RETURN_IF_ERROR(f.Get("file", m.file));
  GPUEST_RETURN_IF_ERROR(f.Get("sha256", m.sha256));
  GPUEST_RETURN_IF_ERROR(f.Get("seed", m.seed));
  GPUEST_RETURN_IF_ERROR(f.Get("learning_rate", m.learning_rate));
  GPUEST_RETURN_IF_ERROR(f.Get("weight_decay", m.weight_decay));
  GPUEST_RETURN_IF_ERROR(f.Get("epochs", m.epochs));
  GPUEST_RETURN_IF_ERROR(f.Get("batch_size", m.batch_size));
  GPUEST_RETURN_IF_ERROR(f.Get("optimizer", m.optimizer));
  GPUEST_ASSIGN_OR_RETURN(m.network, PartFromJson<NetworkConfig>(f, "network"));
  GPUEST_RETURN_IF_ERROR(
      f.Get("test_accuracy_coarsest_memory", m.test_accuracy_coarsest_memory));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return m;
}

absl::StatusOr<TrainingRecord> TrainingFromJson(Fields& t) {
  TrainingRecord r;
  GPUEST_RETURN_IF_ERROR(t.Get("smoke", r.smoke));
  GPUEST_ASSIGN_OR_RETURN(Fields split, t.Object("split"));
  GPUEST_RETURN_IF_ERROR(split.Get("test_fraction", r.split.test_fraction));
  GPUEST_RETURN_IF_ERROR(split.Get("seed", r.split.seed));
  GPUEST_RETURN_IF_ERROR(split.Get("stratified_on", r.split.stratified_on));
  GPUEST_RETURN_IF_ERROR(split.Get("train_rows", r.split.train_rows));
  GPUEST_RETURN_IF_ERROR(split.Get("test_rows", r.split.test_rows));
  GPUEST_RETURN_IF_ERROR(split.Finish());

  GPUEST_ASSIGN_OR_RETURN(Fields cv, t.Object("cross_validation"));
  GPUEST_RETURN_IF_ERROR(cv.Get("folds", r.cross_validation.folds));
  GPUEST_RETURN_IF_ERROR(cv.Get("seed", r.cross_validation.seed));
  GPUEST_RETURN_IF_ERROR(cv.Get("on", r.cross_validation.on));
  GPUEST_ASSIGN_OR_RETURN(Fields cv_heads, cv.Object("heads"));
  GPUEST_RETURN_IF_ERROR(cv.Finish());
  for (const std::string& head : cv_heads.Keys()) {
    GPUEST_ASSIGN_OR_RETURN(Fields h, cv_heads.Object(head));
    CrossValidationScores& s = r.cross_validation.heads[head];
    GPUEST_RETURN_IF_ERROR(h.Get("accuracy_mean", s.accuracy_mean));
    GPUEST_RETURN_IF_ERROR(h.Get("accuracy_std", s.accuracy_std));
    GPUEST_RETURN_IF_ERROR(h.Get("macro_f1_mean", s.macro_f1_mean));
    GPUEST_RETURN_IF_ERROR(h.Get("macro_f1_std", s.macro_f1_std));
    GPUEST_RETURN_IF_ERROR(h.Get("accuracy_per_fold", s.accuracy_per_fold));
    GPUEST_RETURN_IF_ERROR(h.Finish());
  }

  GPUEST_ASSIGN_OR_RETURN(Fields test, t.Object("test"));
  for (const std::string& head : test.Keys()) {
    GPUEST_ASSIGN_OR_RETURN(Fields h, test.Object(head));
    TestScores& s = r.test[head];
    GPUEST_RETURN_IF_ERROR(h.Get("accuracy", s.accuracy));
    GPUEST_RETURN_IF_ERROR(h.Get("macro_f1", s.macro_f1));
    GPUEST_RETURN_IF_ERROR(h.Get("n", s.n));
    GPUEST_RETURN_IF_ERROR(h.Finish());
  }

  GPUEST_ASSIGN_OR_RETURN(Fields rows, t.Object("rows"));
  GPUEST_RETURN_IF_ERROR(rows.Get("read", r.rows.read));
  GPUEST_RETURN_IF_ERROR(rows.Get("used", r.rows.used));
  GPUEST_RETURN_IF_ERROR(rows.Get("oom_crash", r.rows.oom_crash));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> dropped, rows.Objects("dropped"));
  GPUEST_RETURN_IF_ERROR(rows.Finish());
  for (Fields& d : dropped) {
    DroppedRows& out = r.rows.dropped.emplace_back();
    GPUEST_RETURN_IF_ERROR(d.Get("reason", out.reason));
    GPUEST_RETURN_IF_ERROR(d.Get("rows", out.rows));
    GPUEST_RETURN_IF_ERROR(d.Finish());
  }
  GPUEST_RETURN_IF_ERROR(t.Get("seconds", r.seconds));
  GPUEST_RETURN_IF_ERROR(t.Finish());
  return r;
}

// "memory", naming one of the memory heads as the one served.
absl::StatusOr<GpuMemNetManifest::Memory> MemoryFromJson(
    Fields& f, const std::vector<HeadSpec>& heads) {
  GpuMemNetManifest::Memory out;
  GPUEST_ASSIGN_OR_RETURN(Fields memory, f.Object("memory"));
  GPUEST_RETURN_IF_ERROR(memory.Get("served_head", out.served_head));
  GPUEST_RETURN_IF_ERROR(memory.Get("served_width_gib", out.served_width_gib));
  GPUEST_RETURN_IF_ERROR(memory.Get("rule", out.rule));
  GPUEST_RETURN_IF_ERROR(memory.Get("unit", out.unit));
  GPUEST_RETURN_IF_ERROR(memory.Finish());
  bool served = false;
  for (const HeadSpec& h : heads) {
    served = served || (h.name == out.served_head && h.memory());
  }
  if (!served) return memory.Error("served_head", "is not one of the memory heads");
  return out;
}

// Every head's test and cross-validation scores are in the training record.
absl::Status CheckTrainingCoversHeads(const Fields& f, const TrainingRecord& training,
                                      const std::vector<HeadSpec>& heads) {
  for (const HeadSpec& h : heads) {
    if (!training.test.count(h.name)) {
      return f.Error(absl::StrCat("training.test.", h.name), "is missing");
    }
    if (!training.cross_validation.heads.count(h.name)) {
      return f.Error(absl::StrCat("training.cross_validation.heads.", h.name),
                     "is missing");
    }
  }
  return absl::OkStatus();
}

Json TrainingToJson(const TrainingRecord& r) {
  Json cv_heads = Json::object(), test = Json::object(), dropped = Json::array();
  for (const auto& [head, s] : r.cross_validation.heads) {
    cv_heads[head] = {{"accuracy_mean", s.accuracy_mean},
                      {"accuracy_std", s.accuracy_std},
                      {"macro_f1_mean", s.macro_f1_mean},
                      {"macro_f1_std", s.macro_f1_std},
                      {"accuracy_per_fold", s.accuracy_per_fold}};
  }
  for (const auto& [head, s] : r.test) {
    test[head] = {{"accuracy", s.accuracy}, {"macro_f1", s.macro_f1}, {"n", s.n}};
  }
  for (const DroppedRows& d : r.rows.dropped) {
    dropped.push_back({{"reason", d.reason}, {"rows", d.rows}});
  }
  return {{"smoke", r.smoke},
          {"split",
           {{"test_fraction", r.split.test_fraction},
            {"seed", r.split.seed},
            {"stratified_on", r.split.stratified_on},
            {"train_rows", r.split.train_rows},
            {"test_rows", r.split.test_rows}}},
          {"cross_validation",
           {{"folds", r.cross_validation.folds},
            {"seed", r.cross_validation.seed},
            {"on", r.cross_validation.on},
            {"heads", cv_heads}}},
          {"test", test},
          {"rows",
           {{"read", r.rows.read},
            {"used", r.rows.used},
            {"oom_crash", r.rows.oom_crash},
            {"dropped", dropped}}},
          {"seconds", r.seconds}};
}

}  // namespace

Json GpuMemNetManifest::ToJson() const {
  Json heads_json = Json::array(), members_json = Json::array(),
       datasets_json = Json::array();
  for (const HeadSpec& h : heads) heads_json.push_back(h.ToJson());
  for (const MemberRecord& m : members) {
    members_json.push_back(
        {{"file", m.file},
         {"seed", m.seed},
         {"learning_rate", m.learning_rate},
         {"weight_decay", m.weight_decay},
         {"epochs", m.epochs},
         {"batch_size", m.batch_size},
         {"optimizer", m.optimizer},
         {"network", m.network.ToJson()},
         {"test_accuracy_coarsest_memory", m.test_accuracy_coarsest_memory},
         {"sha256", m.sha256}});
  }
  for (const core::manifest::DatasetDigest& d : datasets) {
    datasets_json.push_back(d.ToJson<Json>());
  }
  return {{"estimator_type", kEstimatorType},
          {"id", id},
          {"version", version},
          {"kind", NetworkKindName(kind)},
          {"family", common::FamilyName(family)},
          {"description", description},
          {"heads", heads_json},
          {"memory",
           {{"served_head", memory.served_head},
            {"served_width_gib", memory.served_width_gib},
            {"rule", memory.rule},
            {"unit", memory.unit}}},
          {"encoding", encoding.ToJson()},
          {"members", members_json},
          {"ensemble", ensemble},
          {"training", TrainingToJson(training)},
          {"datasets", datasets_json},
          {"trainer_version", trainer_version}};
}

absl::StatusOr<GpuMemNetManifest> GpuMemNetManifest::FromJson(const Json& json,
                                                              const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  GpuMemNetManifest m;
  std::string type;
  GPUEST_RETURN_IF_ERROR(f.Get("estimator_type", type));
  if (type != kEstimatorType) {
    return f.Error("estimator_type", absl::StrCat("must be \"", kEstimatorType, "\""));
  }
  GPUEST_RETURN_IF_ERROR(f.Get("id", m.id));
  GPUEST_RETURN_IF_ERROR(f.Get("version", m.version));
  GPUEST_RETURN_IF_ERROR(ReadNetworkKind(f, "kind", m.kind));
  GPUEST_RETURN_IF_ERROR(ReadFamily(f, "family", m.family));
  GPUEST_RETURN_IF_ERROR(f.Get("description", m.description));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> heads, f.Objects("heads"));
  for (Fields& head : heads) {
    GPUEST_ASSIGN_OR_RETURN(HeadSpec spec, HeadSpec::FromJson(head));
    m.heads.push_back(std::move(spec));
  }
  GPUEST_ASSIGN_OR_RETURN(m.memory, MemoryFromJson(f, m.heads));
  GPUEST_ASSIGN_OR_RETURN(m.encoding, PartFromJson<EncodingSpec>(f, "encoding"));
  if (m.family != m.encoding.family) {
    return f.Error("family", absl::StrCat("is not the encoding's family, ",
                                          common::FamilyName(m.encoding.family)));
  }
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> members, f.Objects("members"));
  for (Fields& member : members) {
    GPUEST_ASSIGN_OR_RETURN(MemberRecord record, MemberFromJson(member));
    m.members.push_back(std::move(record));
  }
  GPUEST_RETURN_IF_ERROR(f.Get("ensemble", m.ensemble));
  GPUEST_ASSIGN_OR_RETURN(Fields training, f.Object("training"));
  GPUEST_ASSIGN_OR_RETURN(m.training, TrainingFromJson(training));
  GPUEST_RETURN_IF_ERROR(CheckTrainingCoversHeads(f, m.training, m.heads));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> datasets, f.Objects("datasets"));
  for (Fields& d : datasets) {
    GPUEST_ASSIGN_OR_RETURN(core::manifest::DatasetDigest digest,
                            core::manifest::DatasetDigest::FromJson(d));
    m.datasets.push_back(std::move(digest));
  }
  GPUEST_RETURN_IF_ERROR(f.Get("trainer_version", m.trainer_version));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return m;
}

absl::StatusOr<GpuMemNetManifest> GpuMemNetManifest::Parse(const std::string& text,
                                                           const std::string& file) {
  return core::manifest::ParseManifest<GpuMemNetManifest, Json>(text, file);
}

absl::StatusOr<GpuMemNetManifest> GpuMemNetManifest::Load(const std::string& path) {
  return core::manifest::LoadManifest<GpuMemNetManifest, Json>(path);
}

std::string GpuMemNetManifest::Text() const { return ToJson().dump(1) + "\n"; }

}  // namespace gpuest::gpumemnet
