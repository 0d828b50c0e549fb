// server/reloading_certificate: the HTTPS front's certificate and key read from PEM
// files made with a throw-away PKI (tests/support/pki.h), rotated on disk as kubelet
// and cert-manager rotate them; what GnuTLS would be handed (Retrieve) is compared
// with the DER inside the PEM files, so each assertion names which pair serves.
#include "server/reloading_certificate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/support/pki.h"
#include "tests/support/server_process.h"

namespace gpuest::server {
namespace {

constexpr char kFlag[] = "--test-tls";

// The DER of the first certificate in a PEM file: the base64 between its markers.
std::string FirstCertificateDer(const std::string& pem_file) {
  const std::string pem = testing::ReadFileOrDie(pem_file);
  const std::string begin = "-----BEGIN CERTIFICATE-----";
  const size_t start = pem.find(begin);
  const size_t end = pem.find("-----END CERTIFICATE-----");
  EXPECT_NE(start, std::string::npos) << pem_file;
  EXPECT_NE(end, std::string::npos) << pem_file;
  if (start == std::string::npos || end == std::string::npos) return "";
  std::string base64 = pem.substr(start + begin.size(), end - start - begin.size());
  base64.erase(std::remove_if(base64.begin(), base64.end(),
                              [](char c) { return c == '\n' || c == '\r'; }),
               base64.end());
  std::string der;
  EXPECT_TRUE(absl::Base64Unescape(base64, &der)) << pem_file;
  return der;
}

// What the installed certificate hands GnuTLS for a handshake: its leaf's DER, or the
// GnuTLS error code as text when it answers none.
std::string ServedDer() {
  gnutls_pcert_st* chain = nullptr;
  unsigned int length = 0;
  gnutls_privkey_t key = nullptr;
  const int e = ReloadingCertificate::Retrieve(nullptr, nullptr, 0, nullptr, 0, &chain,
                                               &length, &key);
  if (e != 0) return absl::StrCat("error ", e);
  EXPECT_EQ(length, 1u);  // A leaf signed by the CA directly: no intermediates.
  EXPECT_NE(key, nullptr);
  if (chain == nullptr || length == 0) return "no chain";
  return std::string(reinterpret_cast<const char*>(chain[0].cert.data),
                     chain[0].cert.size);
}

// Replaces path with from's bytes the way a Secret volume is updated: written beside
// it and renamed over it, so a reader sees the old file or the new one.
void Replace(const std::string& path, const std::string& from) {
  const std::string tmp = path + ".new";
  std::filesystem::copy_file(from, tmp,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(tmp, path);
}

class ReloadingCertificateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new testing::Pki();
    pki_->MakeCa("ca");
    pki_->MakeLeaf("one", "ca", "IP:127.0.0.1");
    pki_->MakeLeaf("two", "ca", "IP:127.0.0.1");
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  // The served files start as pair "one".
  void SetUp() override {
    cert_ = pki_->Path(absl::StrCat("serving-", test_number_, ".pem"));
    key_ = pki_->Path(absl::StrCat("serving-", test_number_, ".key"));
    ++test_number_;
    Replace(cert_, pki_->Path("one.pem"));
    Replace(key_, pki_->Path("one.key"));
  }

  std::unique_ptr<ReloadingCertificate> LoadInstalled() {
    auto certificate = ReloadingCertificate::Load(cert_, key_, kFlag);
    EXPECT_TRUE(certificate.ok()) << certificate.status();
    if (!certificate.ok()) return nullptr;
    EXPECT_TRUE((*certificate)->Install().ok());
    return *std::move(certificate);
  }

  static std::string Der(const std::string& pair) {
    return FirstCertificateDer(pki_->Path(pair + ".pem"));
  }

  static testing::Pki* pki_;
  static int test_number_;
  std::string cert_, key_;
};
testing::Pki* ReloadingCertificateTest::pki_ = nullptr;
int ReloadingCertificateTest::test_number_ = 0;

TEST_F(ReloadingCertificateTest, RetrieveAnswersTheInstalledPairAndNothingOtherwise) {
  ASSERT_NE(Der("one"), Der("two"));  // Else no assertion below could tell them apart.
  auto certificate = ReloadingCertificate::Load(cert_, key_, kFlag);
  ASSERT_TRUE(certificate.ok()) << certificate.status();
  EXPECT_EQ(ServedDer(), absl::StrCat("error ", GNUTLS_E_INSUFFICIENT_CREDENTIALS));
  ASSERT_TRUE((*certificate)->Install().ok());
  EXPECT_EQ(ServedDer(), Der("one"));

  // One per process (GnuTLS's callback has no closure): a second is refused, naming
  // its flag, and the first keeps serving.
  auto second = ReloadingCertificate::Load(pki_->Path("two.pem"), pki_->Path("two.key"),
                                           "--other-listen");
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::Status refused = (*second)->Install();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.message(), "--other-listen")) << refused;
  EXPECT_EQ(ServedDer(), Der("one"));

  // Destroying the installed one uninstalls it: the other may then serve.
  certificate->reset();
  EXPECT_EQ(ServedDer(), absl::StrCat("error ", GNUTLS_E_INSUFFICIENT_CREDENTIALS));
  ASSERT_TRUE((*second)->Install().ok());
  EXPECT_EQ(ServedDer(), Der("two"));
}

TEST_F(ReloadingCertificateTest, LoadRefusesWhatCannotServeNamingTheFlagAndTheFile) {
  // A file that cannot be read is NotFound (common::ReadPemFile's code; the header says
  // InvalidArgument for it too), a file that is read but cannot serve InvalidArgument.
  auto expect_refused = [](const std::string& cert, const std::string& key,
                           const std::string& says,
                           absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    auto certificate = ReloadingCertificate::Load(cert, key, kFlag);
    ASSERT_FALSE(certificate.ok()) << cert << " " << key;
    EXPECT_EQ(certificate.status().code(), code) << certificate.status();
    EXPECT_TRUE(absl::StrContains(certificate.status().message(), kFlag))
        << certificate.status();
    EXPECT_TRUE(absl::StrContains(certificate.status().message(), says))
        << certificate.status();
  };
  const std::string missing = pki_->Path("missing.pem");
  expect_refused(missing, key_, "missing.pem", absl::StatusCode::kNotFound);
  expect_refused(cert_, pki_->Path("missing.key"), "missing.key",
                 absl::StatusCode::kNotFound);
  const std::string text = pki_->Path("text.pem");
  std::ofstream(text) << "no PEM block here\n";
  expect_refused(text, key_, "text.pem is not a PEM file");
  // Another leaf's key: every handshake would fail.
  expect_refused(cert_, pki_->Path("two.key"), "is not the certificate's");
  const std::string garbage = pki_->Path("garbage.pem");
  std::ofstream(garbage) << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
                            "-----END CERTIFICATE-----\n";
  expect_refused(garbage, key_, "garbage.pem");
}

TEST_F(ReloadingCertificateTest, ARotatedPairServesFromTheNextCallOn) {
  auto certificate = LoadInstalled();
  ASSERT_NE(certificate, nullptr);
  EXPECT_FALSE(certificate->ReloadIfChanged());  // Nothing changed yet.
  EXPECT_EQ(ServedDer(), Der("one"));

  Replace(cert_, pki_->Path("two.pem"));
  Replace(key_, pki_->Path("two.key"));
  EXPECT_TRUE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("two"));
  EXPECT_FALSE(certificate->ReloadIfChanged());  // Read once per change.
  EXPECT_EQ(ServedDer(), Der("two"));

  // And back, rewritten in place this time (same inodes): a new modification time,
  // set a second on so that a coarse file system's clock cannot hide it.
  for (const auto& [from, to] : {std::pair{pki_->Path("one.pem"), cert_},
                                 std::pair{pki_->Path("one.key"), key_}}) {
    const auto before = std::filesystem::last_write_time(to);
    std::filesystem::copy_file(from, to,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::last_write_time(to, before + std::chrono::seconds(1));
  }
  EXPECT_TRUE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("one"));
}

TEST_F(ReloadingCertificateTest, APairThatDoesNotLoadKeepsTheOldOneServing) {
  auto certificate = LoadInstalled();
  ASSERT_NE(certificate, nullptr);

  // Half a rotation: the new certificate beside the old key.
  Replace(cert_, pki_->Path("two.pem"));
  EXPECT_FALSE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("one"));
  EXPECT_FALSE(certificate->ReloadIfChanged());  // Unchanged since: not read again.
  EXPECT_EQ(ServedDer(), Der("one"));

  // Its key arrives: the pair now matches and serves.
  Replace(key_, pki_->Path("two.key"));
  EXPECT_TRUE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("two"));

  // A file that is not PEM, and one that is gone: still "two".
  {
    std::ofstream(cert_ + ".new") << "not a certificate\n";
    std::filesystem::rename(cert_ + ".new", cert_);
  }
  EXPECT_FALSE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("two"));
  std::filesystem::remove(key_);
  EXPECT_FALSE(certificate->ReloadIfChanged());
  EXPECT_EQ(ServedDer(), Der("two"));
}

TEST_F(ReloadingCertificateTest, ExpiryIsTheServingCertificatesNotAfter) {
  auto certificate = LoadInstalled();
  ASSERT_NE(certificate, nullptr);
  // tests/support/pki.cc signs for one day from now (openssl -days 1).
  absl::Time expiry;
  std::string error;
  ASSERT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%SZ", certificate->Expiry(),
                              absl::UTCTimeZone(), &expiry, &error))
      << certificate->Expiry() << ": " << error;
  EXPECT_GT(expiry, absl::Now() + absl::Hours(23));
  EXPECT_LT(expiry, absl::Now() + absl::Hours(25));
}

}  // namespace
}  // namespace gpuest::server
