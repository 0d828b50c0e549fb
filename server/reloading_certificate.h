// File: reloading_certificate.h
//
// The HTTPS front's certificate and key, from PEM files, read again when either file
// changes: a rotated certificate (admission-certs.sh, cert-manager, kubelet updating a
// mounted Secret) is served from the next handshake on, without a restart. GnuTLS asks
// for it per handshake through Retrieve (libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK,
// a callback without a closure: hence one installed certificate per process).
#pragma once

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gpuest::server {

class ReloadingCertificate {
 public:
  // Reads and checks the pair: InvalidArgument naming flag for a file that cannot be
  // read, is not PEM, or a key that is not the certificate's.
  static absl::StatusOr<std::unique_ptr<ReloadingCertificate>> Load(
      const std::string& cert_file, const std::string& key_file, const std::string& flag);
  ~ReloadingCertificate();  // Uninstalls it if installed.

  // Re-reads the files when either one's modification time, size or inode changed.
  // A new pair that cannot be read or does not match keeps the old one serving (said
  // in the log, and tried again at the next call). True when a new pair was taken.
  bool ReloadIfChanged();

  // Makes this the certificate Retrieve answers with. FailedPrecondition when another
  // one is installed in the process.
  absl::Status Install();

  // gnutls_certificate_retrieve_function2: the installed certificate chain and key.
  static int Retrieve(gnutls_session_t session, const gnutls_datum_t* req_ca_rdn,
                      int nreqs, const gnutls_pk_algorithm_t* pk_algos,
                      int pk_algos_length, gnutls_pcert_st** pcert,
                      unsigned int* pcert_length, gnutls_privkey_t* privkey);

  // The serving certificate's notAfter, for the log.
  std::string Expiry() const;

 private:
  struct Pair;
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    struct timespec modified {};
    bool operator==(const Stamp& other) const;
  };

  ReloadingCertificate(std::string cert_file, std::string key_file, std::string flag)
      : cert_file_(std::move(cert_file)),
        key_file_(std::move(key_file)),
        flag_(std::move(flag)) {}
  absl::StatusOr<std::shared_ptr<Pair>> Read() const;
  std::pair<Stamp, Stamp> Stamps() const;

  const std::string cert_file_, key_file_, flag_;
  mutable absl::Mutex mu_;
  std::shared_ptr<Pair> current_ ABSL_GUARDED_BY(mu_);
  // Pairs replaced by a reload: a handshake may still use them, and rotations are rare,
  // so they live as long as this object.
  std::vector<std::shared_ptr<Pair>> retired_ ABSL_GUARDED_BY(mu_);
  std::pair<Stamp, Stamp> stamps_ ABSL_GUARDED_BY(mu_);
  bool installed_ = false;
};

}  // namespace gpuest::server
