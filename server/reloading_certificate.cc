#include "server/reloading_certificate.h"

#include <gnutls/x509.h>

#include <atomic>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/text_file.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// The certificate Retrieve answers with: GnuTLS's callback has no closure.
std::atomic<ReloadingCertificate*> g_installed{nullptr};

// More certificates than a serving chain has (leaf and intermediates).
constexpr unsigned kMaxChain = 16;

gnutls_datum_t Datum(const std::string& text) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())),
          static_cast<unsigned int>(text.size())};
}

// The public key's DER, or empty.
std::string PublicKeyDer(gnutls_pubkey_t key) {
  gnutls_datum_t der{};
  if (gnutls_pubkey_export2(key, GNUTLS_X509_FMT_DER, &der) < 0) return "";
  std::string out(reinterpret_cast<const char*>(der.data), der.size);
  gnutls_free(der.data);
  return out;
}

}  // namespace

// One certificate chain and its key, as GnuTLS takes them; released with the object.
struct ReloadingCertificate::Pair {
  std::vector<gnutls_pcert_st> chain;
  gnutls_privkey_t key = nullptr;
  ~Pair() {
    for (gnutls_pcert_st& cert : chain) gnutls_pcert_deinit(&cert);
    if (key != nullptr) gnutls_privkey_deinit(key);
  }
};

bool ReloadingCertificate::Stamp::operator==(const Stamp& other) const {
  return device == other.device && inode == other.inode && size == other.size &&
         modified.tv_sec == other.modified.tv_sec &&
         modified.tv_nsec == other.modified.tv_nsec;
}

absl::StatusOr<std::unique_ptr<ReloadingCertificate>> ReloadingCertificate::Load(
    const std::string& cert_file, const std::string& key_file, const std::string& flag) {
  std::unique_ptr<ReloadingCertificate> c(
      new ReloadingCertificate(cert_file, key_file, flag));
  const std::pair<Stamp, Stamp> stamps = c->Stamps();
  absl::StatusOr<std::shared_ptr<Pair>> pair = c->Read();
  if (!pair.ok()) return pair.status();
  absl::MutexLock lock(&c->mu_);
  c->current_ = *std::move(pair);
  c->stamps_ = stamps;
  return c;
}

ReloadingCertificate::~ReloadingCertificate() {
  if (!installed_) return;
  ReloadingCertificate* self = this;
  g_installed.compare_exchange_strong(self, nullptr);
}

absl::Status ReloadingCertificate::Install() {
  ReloadingCertificate* none = nullptr;
  if (!g_installed.compare_exchange_strong(none, this)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag_, ": another HTTPS certificate is served by this process"));
  }
  installed_ = true;
  return absl::OkStatus();
}

std::pair<ReloadingCertificate::Stamp, ReloadingCertificate::Stamp>
ReloadingCertificate::Stamps() const {
  auto stamp = [](const std::string& path) {
    Stamp s;
    struct stat st {};
    // stat follows links: a Secret's files are links that kubelet swaps at once.
    if (stat(path.c_str(), &st) == 0) {
      s.device = st.st_dev;
      s.inode = st.st_ino;
      s.size = st.st_size;
      s.modified = st.st_mtim;
    }
    return s;
  };
  return {stamp(cert_file_), stamp(key_file_)};
}

absl::StatusOr<std::shared_ptr<ReloadingCertificate::Pair>> ReloadingCertificate::Read()
    const {
  absl::StatusOr<std::string> cert =
      common::ReadPemFile(cert_file_, flag_ + " certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = common::ReadPemFile(key_file_, flag_ + " key");
  if (!key.ok()) return key.status();
  auto pair = std::make_shared<Pair>();
  pair->chain.resize(kMaxChain);
  unsigned count = kMaxChain;
  const gnutls_datum_t cert_text = Datum(*cert);
  if (const int e = gnutls_pcert_list_import_x509_raw(pair->chain.data(), &count,
                                                      &cert_text, GNUTLS_X509_FMT_PEM, 0);
      e < 0) {
    pair->chain.clear();
    return absl::InvalidArgumentError(
        absl::StrCat(flag_, " certificate: ", cert_file_, ": ", gnutls_strerror(e)));
  }
  pair->chain.resize(count);
  const gnutls_datum_t key_text = Datum(*key);
  if (gnutls_privkey_init(&pair->key) < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(flag_, ": cannot allocate a key"));
  }
  if (const int e = gnutls_privkey_import_x509_raw(pair->key, &key_text,
                                                   GNUTLS_X509_FMT_PEM, nullptr, 0);
      e < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_, " key: ", key_file_, ": ", gnutls_strerror(e)));
  }
  // The key must be the certificate's, or every handshake would fail.
  gnutls_pubkey_t from_key = nullptr;
  std::string key_public;
  if (gnutls_pubkey_init(&from_key) >= 0) {
    if (gnutls_pubkey_import_privkey(from_key, pair->key, 0, 0) >= 0) {
      key_public = PublicKeyDer(from_key);
    }
    gnutls_pubkey_deinit(from_key);
  }
  if (key_public.empty() || key_public != PublicKeyDer(pair->chain[0].pubkey)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag_, ": the key ", key_file_, " is not the certificate's (", cert_file_, ")"));
  }
  return pair;
}

bool ReloadingCertificate::ReloadIfChanged() {
  const std::pair<Stamp, Stamp> stamps = Stamps();
  {
    absl::MutexLock lock(&mu_);
    if (stamps.first == stamps_.first && stamps.second == stamps_.second) return false;
    // Seen: a pair that does not load is said once, and tried again when it changes.
    stamps_ = stamps;
  }
  absl::StatusOr<std::shared_ptr<Pair>> pair = Read();
  if (!pair.ok()) {
    spdlog::warn(
        "{}: the certificate changed but does not load; still serving the "
        "previous one: {}",
        flag_, std::string(pair.status().message()));
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    retired_.push_back(std::move(current_));
    current_ = *std::move(pair);
  }
  spdlog::info("{}: serving the new certificate from {} (valid until {})", flag_,
               cert_file_, Expiry());
  return true;
}

std::string ReloadingCertificate::Expiry() const {
  absl::MutexLock lock(&mu_);
  gnutls_x509_crt_t crt = nullptr;
  std::string out = "?";
  if (gnutls_x509_crt_init(&crt) < 0) return out;
  if (gnutls_x509_crt_import(crt, &current_->chain[0].cert, GNUTLS_X509_FMT_DER) >= 0) {
    const time_t until = gnutls_x509_crt_get_expiration_time(crt);
    if (until != static_cast<time_t>(-1)) {
      out = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromTimeT(until),
                             absl::UTCTimeZone());
    }
  }
  gnutls_x509_crt_deinit(crt);
  return out;
}

int ReloadingCertificate::Retrieve(gnutls_session_t, const gnutls_datum_t*, int,
                                   const gnutls_pk_algorithm_t*, int,
                                   gnutls_pcert_st** pcert, unsigned int* pcert_length,
                                   gnutls_privkey_t* privkey) {
  ReloadingCertificate* self = g_installed.load();
  if (self == nullptr) return GNUTLS_E_INSUFFICIENT_CREDENTIALS;
  absl::MutexLock lock(&self->mu_);
  // GnuTLS neither frees nor changes what it is given here; the pair outlives the
  // handshake (retired pairs are kept).
  *pcert = self->current_->chain.data();
  *pcert_length = static_cast<unsigned int>(self->current_->chain.size());
  *privkey = self->current_->key;
  return 0;
}

}  // namespace gpuest::server
