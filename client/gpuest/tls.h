// File: gpuest/tls.h
//
// Transport security of a gpuest client's channel. All empty: plaintext (a server on
// loopback). ca_file alone: TLS, the server's certificate checked against that CA and
// the target's host name or IP. With cert_file and key_file too: mutual TLS, for a
// server started with --tls-client-ca.
#pragma once

#include <string>

namespace gpuest {

struct ClientTlsOptions {
  std::string ca_file;    // PEM CA bundle that signed the server's certificate.
  std::string cert_file;  // PEM client certificate chain (mutual TLS).
  std::string key_file;   // PEM private key of cert_file.
};

}  // namespace gpuest
