// estimators/core/torch_device: the --device flag resolved once, at start: auto takes
// CUDA only where libtorch sees it, cuda is refused where it does not, anything else
// is refused naming the choices.
#include "estimators/core/torch_device.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

TEST(TorchDevice, AutoTakesCudaOnlyWhereLibtorchSeesIt) {
  EXPECT_EQ(ResolveDevice("cpu").value_or(""), "cpu");
  const absl::StatusOr<std::string> cuda = ResolveDevice("cuda");
  const absl::StatusOr<std::string> automatic = ResolveDevice("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  if (cuda.ok()) {
    EXPECT_EQ(*cuda, "cuda");
    EXPECT_EQ(*automatic, "cuda");
  } else {
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(cuda.status().message(), "device 'cuda' requested"))
        << cuda.status();
    EXPECT_EQ(*automatic, "cpu");
  }
}

TEST(TorchDevice, AnyOtherNameIsRefused) {
  for (const char* name : {"gpu", "CUDA", "", "cuda:0"}) {
    const absl::Status s = ResolveDevice(name).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(s.message(), "want auto|cpu|cuda")) << s;
  }
}

}  // namespace
}  // namespace gpuest::core
