// common/pem_files: a certificate and its key together or not at all, each named in
// errors as its program names it; the files read in order, the first bad one the error.
#include "common/pem_files.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::common {
namespace {

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / ("pem_files_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(PemFiles, ACertificateAndItsKeyComeTogetherOrNotAtAll) {
  EXPECT_TRUE(CheckCertAndKey({"", "--tls-cert"}, {"", "--tls-key"}).ok());
  EXPECT_TRUE(CheckCertAndKey({"c.pem", "--tls-cert"}, {"k.pem", "--tls-key"}).ok());
  const absl::Status no_key = CheckCertAndKey({"c.pem", "--tls-cert"}, {"", "--tls-key"});
  EXPECT_EQ(no_key.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_key.message(), "--tls-key: required with --tls-cert");
  const absl::Status no_cert =
      CheckCertAndKey({"", "tls.cert_file"}, {"k.pem", "tls.key_file"});
  EXPECT_EQ(no_cert.message(), "tls.cert_file: required with tls.key_file");
}

TEST(PemFiles, ReadsEachFileGivenAndSkipsTheOthers) {
  const std::string cert = WriteFile("cert.pem", kPem);
  std::string cert_text = "untouched", key_text = "untouched";
  ASSERT_TRUE(
      ReadPemFiles({{cert, "--tls-cert", &cert_text}, {"", "--tls-key", &key_text}})
          .ok());
  EXPECT_EQ(cert_text, kPem);
  EXPECT_EQ(key_text, "untouched");
}

TEST(PemFiles, TheFirstBadFileInOrderIsTheErrorAndNamesItsFlag) {
  const std::string not_pem = WriteFile("not.pem", "no block here\n");
  const std::string missing = WriteFile("gone.pem", kPem) + ".absent";
  std::string a, b;
  const absl::Status first =
      ReadPemFiles({{missing, "--tls-ca", &a}, {not_pem, "--tls-cert", &b}});
  EXPECT_FALSE(first.ok());
  EXPECT_TRUE(absl::StrContains(first.message(), "--tls-ca")) << first;
  const absl::Status second =
      ReadPemFiles({{not_pem, "--tls-cert", &b}, {missing, "--tls-ca", &a}});
  EXPECT_FALSE(second.ok());
  EXPECT_TRUE(absl::StrContains(second.message(), "--tls-cert")) << second;
}

}  // namespace
}  // namespace gpuest::common
