#include "server/stream_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace gpuest::server {
namespace {

// An HTTP/2 GOAWAY frame (RFC 9113 6.8) with ENHANCE_YOUR_CALM (0x0b), any stream the
// peer opened as the last, and why as its debug data: one buffer, sent in one call.
std::string GoAwayFrame() {
  const std::string reason = "too many streams reset";
  const size_t length = 8 + reason.size();
  std::string frame = {static_cast<char>(length >> 16),
                       static_cast<char>(length >> 8),
                       static_cast<char>(length),
                       7 /* GOAWAY */,
                       0,
                       0,
                       0,
                       0,
                       0};
  frame += std::string("\x7f\xff\xff\xff\x00\x00\x00\x0b", 8);
  return frame + reason;
}

// gRPC's peer string as an address: "ipv4:1.2.3.4:5678", "ipv6:[::1]:5678".
bool ParsePeer(absl::string_view peer, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof(out));
  const bool v4 = absl::ConsumePrefix(&peer, "ipv4:");
  if (!v4 && !absl::ConsumePrefix(&peer, "ipv6:")) return false;
  const size_t colon = peer.rfind(':');
  if (colon == absl::string_view::npos) return false;
  int port = 0;
  if (!absl::SimpleAtoi(peer.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return false;
  }
  absl::string_view host = peer.substr(0, colon);
  if (v4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&out);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    return inet_pton(AF_INET, std::string(host).c_str(), &a->sin_addr) == 1;
  }
  if (!absl::ConsumePrefix(&host, "[") || !absl::ConsumeSuffix(&host, "]")) return false;
  auto* a = reinterpret_cast<sockaddr_in6*>(&out);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET6, std::string(host).c_str(), &a->sin6_addr) == 1;
}

// An IPv4 peer of a dual-stack socket (gRPC makes its listeners so) as plain IPv4:
// getpeername says ::ffff:1.2.3.4 where gRPC's peer string says ipv4:1.2.3.4.
sockaddr_storage Unmapped(const sockaddr_storage& a) {
  if (a.ss_family != AF_INET6) return a;
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  if (!IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) return a;
  sockaddr_storage out;
  std::memset(&out, 0, sizeof(out));
  auto& v4 = reinterpret_cast<sockaddr_in&>(out);
  v4.sin_family = AF_INET;
  v4.sin_port = v6.sin6_port;
  std::memcpy(&v4.sin_addr, &v6.sin6_addr.s6_addr[12], 4);
  return out;
}

bool SameAddress(const sockaddr_storage& mapped, const sockaddr_storage& b) {
  const sockaddr_storage a = Unmapped(mapped);
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port &&
         std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
}

int PortOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  }
  return -1;
}

}  // namespace

StreamGuard::StreamGuard(int max_resets_per_second,
                         std::function<void(const std::string&)> on_cut)
    : max_resets_per_second_(max_resets_per_second), on_cut_(std::move(on_cut)) {
  trimmer_ = std::thread([this] { ReturnMemoryAfterCuts(); });
}

StreamGuard::~StreamGuard() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  trimmer_.join();
}

void StreamGuard::ReturnMemoryAfterCuts() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(250))) {
    if (returned_ || absl::Now() - last_cut_ < absl::Seconds(1)) continue;
    returned_ = true;
    mu_.Unlock();
    malloc_trim(0);
    mu_.Lock();
  }
}

bool StreamGuard::CallCancelled(const std::string& peer) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    // Forget connections quiet for a while, so that the map stays as small as the set
    // of connections resetting now.
    if (windows_.size() > 4096) {
      absl::erase_if(windows_, [now](const auto& entry) {
        return now - entry.second.began > absl::Seconds(2);
      });
    }
    const std::string address = peer.substr(0, peer.rfind(':'));
    int limit = max_resets_per_second_;
    if (auto it = penalized_.find(address); it != penalized_.end()) {
      if (now < it->second) {
        limit = std::min(limit, kPenalizedResets);
      } else {
        penalized_.erase(it);
      }
    }
    Window& w = windows_[peer];
    if (now - w.began > absl::Seconds(1)) w = Window{now, 0};
    if (++w.resets <= limit) return false;
    windows_.erase(peer);  // Counted afresh if it comes back.
    if (penalized_.size() < 4096) penalized_[address] = now + kPenalty;
  }
  const bool cut = ShutConnection(peer);
  if (!cut) {
    spdlog::debug("stream guard: no socket of {} to shut", peer.substr(0, 64));
    return false;
  }
  int unlogged = -1;  // -1: not logged this time
  {
    absl::MutexLock lock(&mu_);
    last_cut_ = absl::Now();
    returned_ = false;
    // One warning per kWarningInterval at most, with the count since the last: a peer
    // that reconnects and resets again must not choose the log's volume.
    if (last_cut_ - last_warning_ >= kWarningInterval) {
      last_warning_ = last_cut_;
      unlogged = unlogged_cuts_;
      unlogged_cuts_ = 0;
    } else {
      ++unlogged_cuts_;
    }
  }
  if (unlogged >= 0) {
    spdlog::warn(
        "gRPC: cut the connection of {}, which reset over {} streams in a second "
        "(HTTP/2 rapid reset); {} more cut since the last such warning",
        peer.substr(0, 64), max_resets_per_second_, unlogged);
  }
  if (on_cut_) on_cut_(peer);
  return true;
}

bool StreamGuard::ShutConnection(const std::string& peer) const {
  sockaddr_storage wanted;
  if (!ParsePeer(peer, wanted)) return false;
  // The process's sockets: the one connected to peer on the guarded port. Rare (once
  // per cut), so a walk of /proc/self/fd is cheap enough, and needs nothing of gRPC.
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool shut = false;
  while (const dirent* entry = readdir(dir)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    sockaddr_storage remote, local;
    socklen_t remote_len = sizeof(remote), local_len = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) continue;
    if (!SameAddress(remote, wanted)) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        (local_port_ != 0 && PortOf(local) != local_port_)) {
      continue;
    }
    // First a GOAWAY with ENHANCE_YOUR_CALM, as HTTP/2 servers answer a rapid reset
    // (RFC 9113 section 6.8; 0x0b). gRPC writes this socket too: one small send is
    // never interleaved with another send's bytes, but may land between two writes of
    // a frame gRPC could not send at once; the connection ends either way, and only
    // an abusive client's last frame can suffer.
    static const std::string kGoAway = GoAwayFrame();
    send(fd, kGoAway.data(), kGoAway.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // Shut, not closed: gRPC owns the descriptor, sees the end of the stream, and
    // closes it itself (so the number is never reused under it).
    shut = shutdown(fd, SHUT_RDWR) == 0 || shut;
  }
  closedir(dir);
  return shut;
}

}  // namespace gpuest::server
