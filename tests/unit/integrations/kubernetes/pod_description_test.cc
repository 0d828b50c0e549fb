// integrations/kubernetes/pod_description: the annotation's two forms, inline JSON and
// a mounted ConfigMap file, on real files.
#include "integrations/kubernetes/pod_description.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::kubernetes {
namespace {

namespace fs = std::filesystem;

class PodDescriptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("descriptions_" + std::to_string(getpid()));
    fs::create_directories(dir_ / "train-job");
    std::ofstream(dir_ / "train-job" / "description.json") << R"({"batchSize": 8})";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PodDescriptionTest, InlineJsonIsItselfAndAReferenceReadsTheMountedFile) {
  EXPECT_EQ(DescriptionText(R"( {"batchSize": 4})", dir_.string(), "pod a").value(),
            R"( {"batchSize": 4})");
  EXPECT_EQ(DescriptionText("train-job", dir_.string(), "pod a").value(),
            R"({"batchSize": 8})");
  const auto absent = DescriptionText("train-job/other.json", dir_.string(), "pod a");
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(absent.status().message(), "is not mounted"))
      << absent.status();
}

TEST_F(PodDescriptionTest, AMountedFileLargerThanAConfigMapIsRefusedUnread) {
  // Kubernetes holds a ConfigMap to 1 MiB; a file past that is not one. Sparse: no disk.
  fs::resize_file(dir_ / "train-job" / "description.json", kMaxConfigMapBytes + 1);
  const auto big = DescriptionText("train-job", dir_.string(), "pod ml/a");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(big.status().message(),
                                "pod ml/a: ConfigMap train-job key description.json: "))
      << big.status();
  EXPECT_TRUE(absl::StrContains(big.status().message(), "1048577 bytes, over the limit"))
      << big.status();
}

}  // namespace
}  // namespace gpuest::kubernetes
