// File: stream_guard.h
//
// Cuts off a gRPC connection whose client cancels (RST_STREAM) its calls faster than a
// bound: the HTTP/2 "rapid reset" pattern (CVE-2023-44487). gRPC 1.51, Debian's, has no
// defence of its own (chttp2's came in 1.57-1.59: grpc/grpc#34638, #34642): a client
// sending HEADERS + DATA + RST_STREAM in a loop makes it create, dispatch and tear down
// a call per stream faster than they are freed, and 4 such connections took the server
// from 190 MiB to +600 MiB in 10 s (bench/transport_abuse.py). MAX_CONCURRENT_STREAMS
// does not help: a reset stream no longer counts against it.
//
// Each call a client cancels is counted against its connection (the peer address gRPC
// gives the call, one per TCP connection); past max_resets_per_second in a one-second
// window the connection is sent a GOAWAY (ENHANCE_YOUR_CALM) and its socket shut down
// (found among the server's own sockets by its peer and local port), which makes gRPC
// drop the transport and every call on it at once. The client may reconnect; for a
// while its address is then cut after a few resets.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpuest::server {

class StreamGuard {
 public:
  // After a cut, the address's next connections may reset this many streams a second,
  // for kPenalty.
  static constexpr int kPenalizedResets = 8;
  static constexpr absl::Duration kPenalty = absl::Seconds(10);
  // At most one warning per this long, counting the cuts it did not log.
  static constexpr absl::Duration kWarningInterval = absl::Seconds(10);

  // on_cut(peer) is called once per connection cut (a metric).
  StreamGuard(int max_resets_per_second, std::function<void(const std::string&)> on_cut);
  ~StreamGuard();

  // The port the guarded server listens on: only sockets on it are ever shut.
  void SetLocalPort(int port) { local_port_ = port; }

  // A call of peer (gRPC's "ipv4:10.0.0.1:53012" or "ipv6:[::1]:53012") ended
  // cancelled by its client. Returns true when this cut the connection.
  bool CallCancelled(const std::string& peer);

  // Shuts the socket of this server whose remote address is peer; false when there is
  // none (gone already) or peer does not parse. Exposed for its test.
  bool ShutConnection(const std::string& peer) const;

 private:
  struct Window {
    absl::Time began;
    int resets = 0;
  };

  const int max_resets_per_second_;
  const std::function<void(const std::string&)> on_cut_;
  int local_port_ = 0;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Window> windows_ ABSL_GUARDED_BY(mu_);
  // Addresses (peer without its port) cut lately, until when: their new connections
  // are cut after kPenalizedResets, so that reconnecting does not buy a full second's
  // worth of resets each time.
  absl::flat_hash_map<std::string, absl::Time> penalized_ ABSL_GUARDED_BY(mu_);
  // What the cut connections' calls held is freed into glibc's arenas, which keep it:
  // measured, 4 connections cut for 30 s left RSS 32 MiB up. Once a second passes with
  // no cut, malloc_trim hands the free pages back (ReturnMemoryAfterCuts).
  void ReturnMemoryAfterCuts();
  absl::Time last_cut_ ABSL_GUARDED_BY(mu_);
  absl::Time last_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int unlogged_cuts_ ABSL_GUARDED_BY(mu_) = 0;
  bool returned_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread trimmer_;
};

}  // namespace gpuest::server
