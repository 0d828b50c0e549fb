// common/text_file: every file gpuest reads is bounded before it is read, on real
// files: sparse ones past the bound (no disk used), a FIFO, a directory, and a
// /proc file whose size the kernel does not report.
#include "common/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::common {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/text_file_" + std::to_string(getpid()) + "_" + name;
}

TEST(ReadTextFile, ReadsARegularFileWholeAtItsBound) {
  const std::string path = TempPath("whole");
  std::ofstream(path, std::ios::binary) << std::string("ab\0cd", 5);
  absl::StatusOr<std::string> text = ReadTextFile(path, 5);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("ab\0cd", 5));
  std::remove(path.c_str());
}

TEST(ReadTextFile, AFileOverItsBoundIsRefusedBeforeAByteIsRead) {
  const std::string path = TempPath("sparse");
  std::ofstream(path, std::ios::binary) << "{}";
  // 1 TiB that uses no disk: read, it would take the machine down.
  ASSERT_EQ(truncate(path.c_str(), off_t{1} << 40), 0);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> text = ReadTextFile(path, kMaxConfigFileBytes);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << text.status();
  EXPECT_EQ(text.status().message(),
            path + ": 1099511627776 bytes, over the limit of 16777216 for this file");
  std::remove(path.c_str());
}

TEST(ReadTextFile, AFileThatReportsNoSizeIsBoundedAsItIsRead) {
  // /proc files have st_size 0 and more bytes than that.
  absl::StatusOr<std::string> status = ReadTextFile("/proc/self/status", 16);
  EXPECT_EQ(status.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(status.status().message(), "16 or more bytes, over the limit"))
      << status.status();
  status = ReadTextFile("/proc/self/status", 1 << 20);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(absl::StrContains(*status, "VmRSS")) << *status;
}

TEST(ReadTextFile, ADirectoryOrAFifoIsNotReadAndNeverWaitedOn) {
  EXPECT_EQ(ReadTextFile(::testing::TempDir(), 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  const std::string fifo = TempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // No writer ever opens it: a blocking open would hang here.
  absl::StatusOr<std::string> text = ReadTextFile(fifo, 1 << 20);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound) << text.status();
  EXPECT_TRUE(absl::StrContains(text.status().message(), "not a readable regular file"));
  std::remove(fifo.c_str());
  EXPECT_EQ(ReadTextFile(TempPath("absent"), 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReadPemFile, APemFileOverItsBoundIsRefusedNamingTheFlag) {
  const std::string path = TempPath("big.pem");
  std::ofstream(path, std::ios::binary) << "-----BEGIN CERTIFICATE-----\n";
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxPemFileBytes) + 1), 0);
  absl::StatusOr<std::string> pem = ReadPemFile(path, "--tls-cert");
  EXPECT_EQ(pem.status().code(), absl::StatusCode::kInvalidArgument) << pem.status();
  EXPECT_TRUE(
      absl::StrContains(pem.status().message(), "--tls-cert: " + path + ": 1048577"))
      << pem.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpuest::common
