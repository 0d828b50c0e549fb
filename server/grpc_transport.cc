#include "server/grpc_transport.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"

namespace gpuest::server {

void ApplyTransportBounds(const GrpcTransportOptions& options, const std::string& name,
                          grpc::ServerBuilder& builder) {
  if (options.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               options.max_concurrent_streams);
  }
  if (options.memory_bytes > 0) {
    // The builder copies the quota's handle; the quota lives as long as the server.
    grpc::ResourceQuota quota(absl::StrCat("gpuest-", name));
    quota.Resize(static_cast<size_t>(options.memory_bytes));
    builder.SetResourceQuota(quota);
  }
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, options.max_metadata_bytes);
  if (options.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               options.max_connection_idle_ms);
  }
}

std::string DescribeTransportBounds(const GrpcTransportOptions& options) {
  return absl::StrCat(
      "streams per connection ",
      options.max_concurrent_streams > 0 ? absl::StrCat(options.max_concurrent_streams)
                                         : std::string("unbounded (gRPC's default)"),
      ", transport memory ",
      options.memory_bytes > 0 ? absl::StrCat(options.memory_bytes >> 20, " MiB")
                               : std::string("unbounded (gRPC's default)"),
      ", headers ", options.max_metadata_bytes, " bytes, idle connections closed after ",
      options.max_connection_idle_ms > 0
          ? absl::StrCat(options.max_connection_idle_ms / 1000, " s")
          : std::string("never"),
      ", a connection resetting over ",
      options.max_resets_per_second > 0 ? absl::StrCat(options.max_resets_per_second)
                                        : std::string("any number of (never cut)"),
      " streams a second is cut");
}

}  // namespace gpuest::server
