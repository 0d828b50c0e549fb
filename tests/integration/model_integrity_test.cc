// A damaged model is never served: the real server, started on a copy of the shipped
// models with one member's weights overwritten, refuses to start and names the file.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_models.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

constexpr char kModel[] = "gpumemnet-cnn-mlp";
constexpr char kMember[] = "member-2.pt";

// Starts the server on the scratch repository and expects it to refuse, saying why.
void ExpectRefusedToStart(const testing::ScratchModels& models, const std::string& why) {
  auto server = testing::ServerProcess::Start({"--models=" + models.dir()});
  ASSERT_FALSE(server.ok()) << "the server started on a damaged model";
  const std::string message(server.status().message());
  EXPECT_TRUE(absl::StrContains(message, "exited with 1")) << message;
  EXPECT_TRUE(absl::StrContains(message, models.Path(kModel, kMember))) << message;
  EXPECT_TRUE(absl::StrContains(message, why)) << message;
}

TEST(ModelIntegrity, TheScratchCopyOfTheShippedModelsServes) {
  testing::ScratchModels models;
  auto server = testing::ServerProcess::Start({"--models=" + models.dir()});
  ASSERT_TRUE(server.ok()) << server.status();
}

TEST(ModelIntegrity, RandomBytesInAMemberAreRefusedNamingTheFile) {
  testing::ScratchModels models;
  models.WriteRandomBytes(kModel, kMember);
  ExpectRefusedToStart(models, "sha256");
}

TEST(ModelIntegrity, NanWeightsAreRefusedNamingTheFile) {
  testing::ScratchModels models;
  ASSERT_TRUE(models.WriteNanMember(kModel, 2).ok());
  ExpectRefusedToStart(models, "sha256");
}

// The manifest records the damaged file's digest (a careless retraining): the digest
// matches, and the outputs of the probe input are what refuse it.
TEST(ModelIntegrity, NanWeightsWithAMatchingDigestAreRefusedForTheirOutputs) {
  testing::ScratchModels models;
  ASSERT_TRUE(models.WriteNanMember(kModel, 2).ok());
  ASSERT_TRUE(models.RecordMemberSha256(kModel, 2).ok());
  ExpectRefusedToStart(models, "non-finite output");
}

TEST(ModelIntegrity, RandomBytesWithAMatchingDigestAreRefusedNamingTheFile) {
  testing::ScratchModels models;
  models.WriteRandomBytes(kModel, kMember);
  ASSERT_TRUE(models.RecordMemberSha256(kModel, 2).ok());
  ExpectRefusedToStart(models, "libtorch");
}

}  // namespace
}  // namespace gpuest
