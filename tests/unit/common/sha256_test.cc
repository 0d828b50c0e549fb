// estimators/sha256: the FIPS 180-4 test vectors, and a file's digest.
#include "common/sha256.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::common {
namespace {

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks.
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, OfAFileIsOfItsBytesAndAMissingFileIsNamed) {
  const std::string path =
      ::testing::TempDir() + "/sha256_test_" + std::to_string(getpid()) + ".bin";
  std::ofstream(path, std::ios::binary) << std::string("a\0b", 3);
  auto digest = Sha256OfFile(path);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(*digest, Sha256Hex(std::string("a\0b", 3)));
  std::filesystem::remove(path);

  auto missing = Sha256OfFile(path);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), path)) << missing.status();
}

}  // namespace
}  // namespace gpuest::common
