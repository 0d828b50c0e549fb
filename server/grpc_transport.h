// File: grpc_transport.h
//
// What one peer may make the gRPC port hold, set on the ServerBuilder before it starts:
// streams per connection (advertised in SETTINGS as MAX_CONCURRENT_STREAMS), one memory
// budget for the whole transport (gRPC's ResourceQuota), header size, and how long an
// idle connection is kept. docs/THREATS.md lists each bound with its source and what
// gRPC 1.51 enforces of it; the rest is closed in-process (server/stream_guard.h).
#pragma once

#include <cstdint>
#include <string>

#include "grpcpp/server_builder.h"

namespace gpuest::server {

struct GrpcTransportOptions {
  // Streams one connection may have open at once; 0 leaves gRPC's default (no limit
  // advertised). Each open stream may hold one response the peer has not read, so a
  // connection holds at most this many responses (at most max_message_bytes each,
  // in practice a few KiB).
  int max_concurrent_streams = 32;
  // The transport's memory budget (read buffers, call arenas) for every connection
  // together; gRPC reclaims and refuses beyond it. 0: gRPC's default (unbounded).
  int64_t memory_bytes = int64_t{256} << 20;
  // The largest header block (metadata) a request may send.
  int max_metadata_bytes = 16 << 10;
  // A connection with no call for this long is closed with GOAWAY; 0: never.
  int max_connection_idle_ms = 5 * 60 * 1000;
  // Calls one connection may cancel (RST_STREAM before their deadline) in a second
  // before it is cut (server/stream_guard.h); 0: never cut.
  int max_resets_per_second = 200;
};

// Sets options on builder (the gRPC API port's, and the admin port's).
void ApplyTransportBounds(const GrpcTransportOptions& options, const std::string& name,
                          grpc::ServerBuilder& builder);

// One line for the start-up log: the bounds in effect.
std::string DescribeTransportBounds(const GrpcTransportOptions& options);

}  // namespace gpuest::server
