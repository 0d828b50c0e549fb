// Linked into every test binary (and the benchmarks that talk HTTP): SIGPIPE ignored from
// static initialisation on. Debian's cpp-httplib is a compiled library that writes with
// send(..., 0), so a server that closes a connection first (refusing a body from its
// headers, as it should) would otherwise kill the client process with SIGPIPE; the
// write then fails with EPIPE, which the test can see.
#include <csignal>

namespace {

[[maybe_unused]] const bool kSigpipeIgnored = [] {
  return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
}();

}  // namespace
