#include "tests/support/pki.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/server_process.h"

namespace gpuest::testing {

Pki::Pki() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "gpuest-tls-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  dir_ = pattern;
}

Pki::~Pki() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Pki::MakeCa(const std::string& name) {
  Run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-keyout", Path(name + ".key"), "-out", Path(name + ".pem"), "-days",
       "1", "-subj", "/CN=" + name});
}

void Pki::MakeLeaf(const std::string& name, const std::string& ca,
                   const std::string& subject_alt_name) {
  Run({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", Path(name + ".key"), "-out", Path(name + ".csr"), "-subj",
       "/CN=" + name});
  {
    std::ofstream ext(Path(name + ".ext"));
    ext << "subjectAltName=" << subject_alt_name << "\n";
  }
  Run({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".pem"), "-CAkey",
       Path(ca + ".key"), "-CAcreateserial", "-out", Path(name + ".pem"), "-days", "1",
       "-extfile", Path(name + ".ext")});
}

void Pki::Run(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  const CommandResult r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << "openssl failed: " << r.err;
}

}  // namespace gpuest::testing
