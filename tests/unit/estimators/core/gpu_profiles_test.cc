// GPU profiles (estimators/core/gpu_profiles.h): parsing, lookup and refusals.
#include "estimators/core/gpu_profiles.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/units.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

TEST(GpuProfiles, ParsesAndRejects) {
  constexpr const char* kGpu =
      R"({"id":"x","name":"X","architecture":"a","memory_mib":1024,"context_mib":300,)"
      R"("cublas_workspace_bytes":1000,"constants":"%s","constants_basis":"why"})";
  auto ok = GpuProfiles::Parse(
      absl::StrCat(R"({"default":"x","gpus":[)", absl::StrFormat(kGpu, "assumed"), "]}"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->Default().memory_bytes, 1ull << 30);
  EXPECT_EQ(ok->Default().context_bytes, 300ull << 20);
  EXPECT_EQ(ok->Default().cublas_workspace_bytes, 1000u);
  EXPECT_FALSE(ok->Default().constants_calibrated);
  EXPECT_EQ(ok->Default().constants_basis, "why");
  auto guessed = GpuProfiles::Parse(
      absl::StrCat(R"({"default":"x","gpus":[)", absl::StrFormat(kGpu, "guessed"), "]}"));
  EXPECT_TRUE(absl::StrContains(guessed.status().message(), "calibrated"))
      << guessed.status();
  EXPECT_EQ(ok->Find("X"), &ok->Default());
  EXPECT_EQ(ok->Find("y"), nullptr);
  EXPECT_FALSE(GpuProfiles::Parse(R"({"default":"y","gpus":[]})").ok());
  EXPECT_FALSE(GpuProfiles::Parse("not json").ok());
}

// A GPU's contexts per stack are read from the file and written back as they were; a
// GPU without any borrows the others' (marked lent, so the choice adds its margin),
// and one with its own keeps them.
TEST(GpuProfiles, ContextsPerStackAndLentToGpusWithoutAny) {
  constexpr const char* kTwo =
      R"({"default":"a","gpus":[)"
      R"({"id":"a","name":"A","architecture":"x","memory_mib":1024,"context_mib":300,)"
      R"("cublas_workspace_bytes":1000,"constants":"calibrated","constants_basis":"why",)"
      R"("contexts":[{"cuda_major":13,"torch":"2.11","module_loading":"LAZY",)"
      R"("context_mib":758,"basis":"lease"}]},)"
      R"({"id":"b","name":"B","architecture":"x","memory_mib":1024,"context_mib":300,)"
      R"("cublas_workspace_bytes":1000,"constants":"assumed","constants_basis":"why"}]})";
  auto profiles = GpuProfiles::Parse(kTwo);
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  ASSERT_EQ(profiles->Find("a")->contexts.size(), 1u);
  EXPECT_EQ(profiles->Find("a")->contexts[0].context_bytes, 758ull << 20);
  EXPECT_TRUE(profiles->Find("b")->contexts.empty());
  profiles->LendContexts();
  ASSERT_EQ(profiles->Find("b")->contexts.size(), 1u);
  EXPECT_EQ(profiles->Find("b")->contexts[0].lent_by, "a");
  EXPECT_TRUE(profiles->Find("a")->contexts[0].lent_by.empty());
  // A MIG slice borrows its whole GPU's contexts only.
  auto with_mig = GpuProfiles::Parse(absl::StrReplaceAll(
      kTwo, {{R"("id":"b","name":"B")", R"("id":"a-mig-1g","name":"A MIG 1g.5gb")"}}));
  ASSERT_TRUE(with_mig.ok()) << with_mig.status();
  with_mig->LendContexts();
  ASSERT_EQ(with_mig->Find("a-mig-1g")->contexts.size(), 1u);
  EXPECT_EQ(with_mig->Find("a-mig-1g")->contexts[0].lent_by, "a");
  auto orphan = GpuProfiles::Parse(absl::StrReplaceAll(
      kTwo, {{R"("id":"b","name":"B")", R"("id":"z-mig","name":"Z MIG 1g.5gb")"}}));
  ASSERT_TRUE(orphan.ok());
  orphan->LendContexts();
  EXPECT_TRUE(orphan->Find("z-mig")->contexts.empty());
  // A GPU whose context is calibrated on its own data keeps it.
  auto calibrated = GpuProfiles::Parse(absl::StrReplaceAll(
      kTwo, {{R"("constants":"assumed")", R"("constants":"calibrated")"}}));
  ASSERT_TRUE(calibrated.ok());
  calibrated->LendContexts();
  EXPECT_TRUE(calibrated->Find("b")->contexts.empty());
  auto bad = GpuProfiles::Parse(absl::StrReplaceAll(kTwo, {{"\"LAZY\"", "\"LATER\""}}));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "module_loading"))
      << bad.status();
}

TEST(GpuCatalogTest, NvidiaSmiNamesAndMigProfilesResolve) {
  auto gpus =
      GpuProfiles::LoadFile(std::string(GPUEST_MODELS_DIR) + "/gpu_profiles.json");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_NE(gpus->Find("NVIDIA A100-SXM4-80GB"), nullptr);
  EXPECT_EQ(gpus->Find("NVIDIA A100-SXM4-80GB")->id, "a100-80gb");
  EXPECT_EQ(gpus->Find("nvidia h100 80gb hbm3")->id, "h100-80gb");
  const GpuProfile* slice = gpus->Find("NVIDIA A100-SXM4-40GB MIG 1g.5gb");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->id, "a100-40gb-mig-1g.5gb");
  EXPECT_EQ(slice->memory_bytes, 4864 * common::kMiB);  // 4.75 GiB.
  EXPECT_TRUE(IsMigProfile(*slice));
  EXPECT_FALSE(IsMigProfile(gpus->Default()));
  int mig = 0;
  for (const GpuProfile& p : gpus->All()) {
    if (!IsMigProfile(p)) continue;
    ++mig;
    // A profile is a slice of its parent: the id's prefix, less memory.
    const GpuProfile* parent = gpus->Find(p.id.substr(0, p.id.find("-mig-")));
    ASSERT_NE(parent, nullptr) << p.id;
    EXPECT_LT(p.memory_bytes, parent->memory_bytes) << p.id;
    EXPECT_EQ(p.architecture, parent->architecture) << p.id;
  }
  EXPECT_EQ(mig, 17);  // A100 40GB: 5, A100 80GB: 6, H100 80GB: 6.
}

}  // namespace
}  // namespace gpuest::core
