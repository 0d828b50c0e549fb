// estimators/model_repository: scans of real directories made for each test.
#include "estimators/core/model_repository.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

class ModelRepositoryTest : public ::testing::Test {
 protected:
  // A repository with profiles and two models, written in reverse order of their ids.
  void SetUp() override {
    // One directory per test process: ctest runs the tests in parallel.
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("model_repository_" + std::string(test->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    Write(dir_ / "gpu_profiles.json", R"({"gpus": []})");
    Write(dir_ / "zeta" / "manifest.json", R"({"id": "zeta"})");
    Write(dir_ / "alpha" / "manifest.json", R"({"id": "alpha"})");
  }
  void TearDown() override { fs::remove_all(dir_); }

  ModelRepositoryContents Scan() {
    auto contents = ScanModelRepository(dir_.string());
    EXPECT_TRUE(contents.ok()) << contents.status();
    return contents.ok() ? *std::move(contents) : ModelRepositoryContents{};
  }

  fs::path dir_;
};

std::vector<std::string> Ids(const ModelRepositoryContents& contents) {
  std::vector<std::string> ids;
  for (const ModelArtifact& m : contents.models) ids.push_back(m.id);
  return ids;
}

TEST_F(ModelRepositoryTest, ReadsEachModelSortedById) {
  const ModelRepositoryContents contents = Scan();
  EXPECT_EQ(contents.gpu_profiles_path, (dir_ / "gpu_profiles.json").string());
  ASSERT_EQ(Ids(contents), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(contents.models[0].directory, (dir_ / "alpha").string());
  EXPECT_EQ(contents.models[0].manifest_text, R"({"id": "alpha"})");
  EXPECT_EQ(contents.models[1].manifest_text, R"({"id": "zeta"})");
  EXPECT_TRUE(absl::StartsWith(contents.version, "2-")) << contents.version;

  // Directory listings come in no particular order; enough ids that the listing
  // being sorted by chance is out of the question.
  for (const char* id : {"m7", "b2", "x9", "k4", "d1", "q3", "g8", "t6"}) {
    Write(dir_ / id / "manifest.json", "{}");
  }
  EXPECT_EQ(Ids(Scan()), (std::vector<std::string>{"alpha", "b2", "d1", "g8", "k4", "m7",
                                                   "q3", "t6", "x9", "zeta"}));
}

// The placement's contention model is read with the rest (the server loads it from
// these bytes), and a change to it is a new version.
TEST_F(ModelRepositoryTest, ReadsTheContentionModelWhoseBytesChangeTheVersion) {
  const ModelRepositoryContents without = Scan();
  EXPECT_EQ(without.contention_path, (dir_ / "contention" / "contention.json").string());
  EXPECT_FALSE(without.contention_text.has_value());
  Write(dir_ / "contention" / "contention.json", R"({"version": "a"})");
  const ModelRepositoryContents with = Scan();
  ASSERT_TRUE(with.contention_text.has_value());
  EXPECT_EQ(*with.contention_text, R"({"version": "a"})");
  EXPECT_EQ(Ids(with), Ids(without));  // No manifest: not an estimator.
  EXPECT_NE(with.version, without.version);
  Write(dir_ / "contention" / "contention.json", R"({"version": "b"})");
  EXPECT_NE(Scan().version, with.version);
}
TEST_F(ModelRepositoryTest, SkipsWhatIsNotAModelDirectory) {
  fs::create_directories(dir_ / "empty");
  Write(dir_ / "notes" / "README.md", "not a model");
  Write(dir_ / "manifest.json", R"({"id": "top-level file"})");
  Write(dir_ / "stray.json", "{}");
  const ModelRepositoryContents contents = Scan();
  EXPECT_EQ(Ids(contents), (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_TRUE(absl::StartsWith(contents.version, "2-")) << contents.version;
}

TEST_F(ModelRepositoryTest, VersionFollowsEveryFileOfTheModelsAndTheProfiles) {
  const std::string first = Scan().version;
  EXPECT_EQ(Scan().version, first) << "a second scan of the same files";

  Write(dir_ / "alpha" / "manifest.json", R"({"id": "alpha", "v": 2})");
  const std::string manifest_changed = Scan().version;
  EXPECT_NE(manifest_changed, first);

  Write(dir_ / "gpu_profiles.json", R"({"gpus": [], "default": "a100"})");
  const std::string profiles_changed = Scan().version;
  EXPECT_NE(profiles_changed, manifest_changed);

  fs::rename(dir_ / "zeta", dir_ / "omega");  // The same manifest under another id.
  EXPECT_NE(Scan().version, profiles_changed);

  Write(dir_ / "beta" / "manifest.json", "{}");
  EXPECT_TRUE(absl::StartsWith(Scan().version, "3-")) << Scan().version;
}

// A damaged weight file under the same manifest is another model: the version says so.
TEST_F(ModelRepositoryTest, VersionCoversTheWeightsBytesNotOnlyTheManifests) {
  Write(dir_ / "alpha" / "member-0.pt", "weights");
  const std::string first = Scan().version;
  EXPECT_EQ(Scan().version, first);

  Write(dir_ / "alpha" / "member-0.pt", "weighTs");  // One byte, same size.
  const std::string byte_changed = Scan().version;
  EXPECT_NE(byte_changed, first);

  Write(dir_ / "alpha" / "member-1.pt", "");  // A new, empty file.
  const std::string file_added = Scan().version;
  EXPECT_NE(file_added, byte_changed);

  fs::rename(dir_ / "alpha" / "member-1.pt", dir_ / "alpha" / "member-2.pt");
  EXPECT_NE(Scan().version, file_added) << "a renamed file";
}

TEST_F(ModelRepositoryTest, EachModelCarriesTheBytesOfItsFiles) {
  Write(dir_ / "alpha" / "member-0.pt", std::string("\0\x01\xff", 3));
  Write(dir_ / "alpha" / "report.md", "# alpha");
  fs::create_directories(dir_ / "alpha" / "notes");  // Not a file: not read.
  const ModelRepositoryContents contents = Scan();
  ASSERT_EQ(contents.models.size(), 2u);
  const auto& files = contents.models[0].files;
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at("member-0.pt"), std::string("\0\x01\xff", 3));
  EXPECT_EQ(files.at("report.md"), "# alpha");
  EXPECT_TRUE(contents.models[1].files.empty());

  // A link to nothing is a file meant to be there: named, not skipped.
  fs::create_symlink(dir_ / "nowhere.pt", dir_ / "alpha" / "member-1.pt");
  auto broken = ScanModelRepository(dir_.string());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(broken.status().message(),
                                (dir_ / "alpha" / "member-1.pt").string()))
      << broken.status();
}

TEST_F(ModelRepositoryTest, AFileOverItsBoundIsRefusedUnreadNamingIt) {
  // Sparse: past the bound without using the disk.
  Write(dir_ / "alpha" / "member-0.pt", "x");
  const fs::path weights = dir_ / "alpha" / "member-0.pt";
  fs::resize_file(weights, kMaxModelFileBytes + 1);
  auto contents = ScanModelRepository(dir_.string());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(contents.status().message(),
                                weights.string() + ": 67108865 bytes, over the limit"))
      << contents.status();
  fs::remove(weights);
  fs::resize_file(dir_ / "gpu_profiles.json", common::kMaxConfigFileBytes + 1);
  contents = ScanModelRepository(dir_.string());
  EXPECT_TRUE(
      absl::StrContains(contents.status().message(), "gpu_profiles.json: 16777217"))
      << contents.status();
}

TEST_F(ModelRepositoryTest, MissingProfilesAreNamed) {
  fs::remove(dir_ / "gpu_profiles.json");
  auto contents = ScanModelRepository(dir_.string());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(contents.status().message(),
                                (dir_ / "gpu_profiles.json").string()))
      << contents.status();
}

TEST_F(ModelRepositoryTest, AManifestThatCannotBeReadIsAnErrorNotASkip) {
  // A dangling link: the model is meant to be there.
  fs::create_directories(dir_ / "beta");
  fs::create_symlink(dir_ / "nowhere.json", dir_ / "beta" / "manifest.json");
  auto contents = ScanModelRepository(dir_.string());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(contents.status().message(),
                                (dir_ / "beta" / "manifest.json").string()))
      << contents.status();

  // A directory named manifest.json reads as empty through an ifstream.
  fs::remove(dir_ / "beta" / "manifest.json");
  fs::create_directories(dir_ / "beta" / "manifest.json");
  contents = ScanModelRepository(dir_.string());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound) << contents.status();
}

TEST(ModelRepository, ARepositoryThatIsNotADirectoryIsNamed) {
  auto missing = ScanModelRepository("/nonexistent/models");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/nonexistent/models"))
      << missing.status();

  const std::string file =
      ::testing::TempDir() + "/model_repository_plain_file_" + std::to_string(getpid());
  Write(file, "{}");
  auto not_dir = ScanModelRepository(file);
  EXPECT_EQ(not_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(not_dir.status().message(), "is not a directory"))
      << not_dir.status();
  fs::remove(file);
}

}  // namespace
}  // namespace gpuest::core
