#include "estimators/core/gpu_profiles.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "estimators/core/gpu_profiles_manifest.h"

namespace gpuest::core {

GpuProfiles::GpuProfiles(const GpuProfilesManifest& manifest) : profiles_(manifest.gpus) {
  for (size_t i = 0; i < profiles_.size(); ++i) {
    if (profiles_[i].id == manifest.default_id) default_index_ = i;
  }
}

absl::StatusOr<GpuProfiles> GpuProfiles::LoadFile(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const GpuProfilesManifest manifest,
                          GpuProfilesManifest::Load(path));
  return GpuProfiles(manifest);
}

absl::StatusOr<GpuProfiles> GpuProfiles::Parse(const std::string& json_text) {
  GPUEST_ASSIGN_OR_RETURN(const GpuProfilesManifest manifest,
                          GpuProfilesManifest::Parse(json_text, "GPU profiles"));
  return GpuProfiles(manifest);
}

const GpuProfile* GpuProfiles::Find(absl::string_view name) const {
  // Compared in place: the extender looks up every GPU of every node.
  for (const GpuProfile& p : profiles_) {
    if (absl::EqualsIgnoreCase(p.id, name) || absl::EqualsIgnoreCase(p.name, name)) {
      return &p;
    }
    for (const std::string& alias : p.aliases) {
      if (absl::EqualsIgnoreCase(alias, name)) return &p;
    }
  }
  return nullptr;
}

bool IsMigProfile(const GpuProfile& profile) {
  return absl::StrContains(profile.name, " MIG ");
}

absl::Status GpuProfiles::AddMeasuredContext(absl::string_view gpu_name,
                                             StackContext context) {
  const GpuProfile* found = Find(gpu_name);
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no GPU profile is '", gpu_name.substr(0, 128), "' (known: ", KnownIds(), ")"));
  }
  profiles_[static_cast<size_t>(found - profiles_.data())].contexts.push_back(
      std::move(context));
  return absl::OkStatus();
}

namespace {

// The contexts measured on `by` itself, marked lent by it, appended to out.
void AppendLentBy(const GpuProfile& by, std::vector<StackContext>& out) {
  for (const StackContext& c : by.contexts) {
    if (!c.lent_by.empty()) continue;
    out.push_back(c);
    out.back().lent_by = by.id;
  }
}

}  // namespace

void GpuProfiles::LendContexts() {
  std::vector<StackContext> measured;
  for (const GpuProfile& p : profiles_) AppendLentBy(p, measured);
  // A GPU whose context was fitted on its own measurements keeps that figure. A MIG
  // slice takes its whole GPU's contexts only (the same driver and card; none when the
  // GPU has none: then its own figure, as the whole GPU's is).
  for (GpuProfile& p : profiles_) {
    if (!p.contexts.empty() || p.constants_calibrated) continue;
    const size_t mig = p.name.find(" MIG ");
    if (mig == std::string::npos) {
      p.contexts = measured;
      continue;
    }
    // Only its whole GPU's own contexts, never ones lent to it.
    for (const GpuProfile& whole : profiles_) {
      if (whole.name == p.name.substr(0, mig)) AppendLentBy(whole, p.contexts);
    }
  }
}

std::string GpuProfiles::KnownIds() const {
  return absl::StrJoin(profiles_, ", ",
                       [](std::string* out, const GpuProfile& p) { out->append(p.id); });
}

}  // namespace gpuest::core
