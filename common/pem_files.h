// File: pem_files.h
//
// The PEM files of one end of a TLS connection, checked and read the same way by the
// server's gRPC port (server/credentials.h) and the client library
// (client/credentials.h): a certificate and its key come together or not at all, and
// each file is named in errors as its program names it: a flag (--tls-cert) or a field
// (tls.cert_file).
#pragma once

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuest::common {

struct PemFile {
  absl::string_view path;  // Empty: not given.
  absl::string_view name;  // In errors: the flag or field that gave it.
};

// InvalidArgument "<the missing one's name>: required with <the given one's name>"
// when one of a certificate and its key is given without the other.
absl::Status CheckCertAndKey(const PemFile& cert, const PemFile& key);

// One file to read: its path (empty: not given, nothing read), its name in errors,
// and where its text goes.
struct PemFileRead {
  absl::string_view path;
  absl::string_view name;
  std::string* text;
};

// Reads each file given into its text, in the order listed; the first that cannot be
// read or holds no PEM block is the error (ReadPemFile's, which names it).
absl::Status ReadPemFiles(std::initializer_list<PemFileRead> files);

}  // namespace gpuest::common
