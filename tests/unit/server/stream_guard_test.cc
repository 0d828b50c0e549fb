// server/stream_guard: a connection whose client cancels its calls faster than the
// bound is sent a GOAWAY and shut, on real sockets of this process: only past the
// bound, only on the guarded port, and its address cut sooner for a while after.
#include "server/stream_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

// A listening socket on the loopback and the connections made to it: the accepted end
// is "the server's", as gRPC's would be.
class Loopback {
 public:
  Loopback() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listener_, 8), 0);
    port_ = PortOf(listener_, getsockname);
  }
  ~Loopback() {
    for (int fd : fds_) close(fd);
    close(listener_);
  }
  int port() const { return port_; }

  // Connects; returns the client's end, and its peer string as gRPC gives it.
  int Connect(std::string& peer) {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    fds_.push_back(client);
    fds_.push_back(accept(listener_, nullptr, nullptr));
    peer = "ipv4:127.0.0.1:" + std::to_string(PortOf(client, getsockname));
    return client;
  }

 private:
  template <typename Get>
  static int PortOf(int fd, Get get) {
    sockaddr_in a{};
    socklen_t length = sizeof(a);
    get(fd, reinterpret_cast<sockaddr*>(&a), &length);
    return ntohs(a.sin_port);
  }
  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fds_;
};

// What the client end reads until the server's end is shut.
std::string ReadToEnd(int fd) {
  std::string got;
  char buffer[256];
  ssize_t n = 0;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) got.append(buffer, n);
  return got;
}

TEST(StreamGuard, AConnectionResettingPastTheBoundIsSentGoawayAndShut) {
  Loopback loopback;
  std::vector<std::string> cut;
  StreamGuard guard(3, [&cut](const std::string& peer) { cut.push_back(peer); });
  guard.SetLocalPort(loopback.port());
  std::string peer;
  const int client = loopback.Connect(peer);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(guard.CallCancelled(peer)) << i;
  EXPECT_TRUE(cut.empty());
  EXPECT_TRUE(guard.CallCancelled(peer));
  EXPECT_EQ(cut, std::vector<std::string>{peer});
  // A GOAWAY frame (type 7) with ENHANCE_YOUR_CALM (0x0b) and why, then the end.
  const std::string frame = ReadToEnd(client);
  ASSERT_GE(frame.size(), 17u);
  EXPECT_EQ(frame[3], 7);
  EXPECT_EQ(frame.substr(13, 4), std::string("\x00\x00\x00\x0b", 4));
  EXPECT_EQ(frame.substr(17), "too many streams reset");
}

TEST(StreamGuard, OnlyTheGuardedPortsSocketsAreShut) {
  Loopback loopback;
  int cuts = 0;
  StreamGuard guard(1, [&cuts](const std::string&) { ++cuts; });
  guard.SetLocalPort(loopback.port() == 1 ? 2 : 1);  // Not this listener's port.
  std::string peer;
  loopback.Connect(peer);
  EXPECT_FALSE(guard.CallCancelled(peer));
  EXPECT_FALSE(guard.CallCancelled(peer));  // Past the bound, but no socket to shut.
  EXPECT_EQ(cuts, 0);
  EXPECT_FALSE(guard.ShutConnection(peer));
  EXPECT_FALSE(guard.ShutConnection("unix:/tmp/socket"));
  EXPECT_FALSE(guard.ShutConnection("ipv4:127.0.0.1:0"));
  EXPECT_FALSE(guard.ShutConnection("ipv6:::1:80"));  // Without its brackets.
}

TEST(StreamGuard, ACutAddressIsCutSoonerForAWhile) {
  Loopback loopback;
  int cuts = 0;
  StreamGuard guard(100, [&cuts](const std::string&) { ++cuts; });
  guard.SetLocalPort(loopback.port());
  std::string first;
  loopback.Connect(first);
  int resets = 0;
  while (!guard.CallCancelled(first) && resets < 1000) ++resets;
  EXPECT_EQ(resets, 100);
  // The address's next connection: cut after kPenalizedResets, not 100.
  std::string second;
  loopback.Connect(second);
  resets = 0;
  while (!guard.CallCancelled(second) && resets < 1000) ++resets;
  EXPECT_EQ(resets, StreamGuard::kPenalizedResets);
  EXPECT_EQ(cuts, 2);
}

}  // namespace
}  // namespace gpuest::server
