// File: pki.h
//
// A throw-away PKI in a temporary directory, made with the openssl CLI: CAs and
// certificates they sign, for the tests of TLS on the gRPC port and of the admission
// webhook's HTTPS.
#pragma once

#include <string>
#include <vector>

namespace gpuest::testing {

class Pki {
 public:
  Pki();   // A fresh temporary directory; aborts when none can be made.
  ~Pki();  // Removes it.

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // <name>.key and a self-signed <name>.pem.
  void MakeCa(const std::string& name);

  // <name>.key and <name>.pem signed by ca, with the given subjectAltName
  // ("IP:127.0.0.1,DNS:localhost").
  void MakeLeaf(const std::string& name, const std::string& ca,
                const std::string& subject_alt_name);

 private:
  void Run(std::vector<std::string> args);
  std::string dir_;
};

}  // namespace gpuest::testing
