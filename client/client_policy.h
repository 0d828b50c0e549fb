// File: client_policy.h
//
// The deadline and retry policy both gpuest clients apply, C++ and Python alike:
// proto/gpuest/v1/client_policy.json, which this library embeds at build time
// (client/CMakeLists.txt) and the Python package ships and reads the same way. Here it
// becomes what Client::Create gives gRPC: the default deadline, the service config
// (round robin, wait-for-ready, the retry policy) and the reconnect backoff. Internal to
// the client library; ClientOptions shows its defaults (gpuest/client.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace gpuest::client {

struct ClientPolicy {
  absl::Duration default_deadline;
  // The retry policy's maxAttempts, the same in every method config.
  int max_attempts = 0;
  int initial_reconnect_backoff_ms = 0;
  int min_reconnect_backoff_ms = 0;
  int max_reconnect_backoff_ms = 0;
  // gRPC's service config as the file has it; gRPC validates what this reader does not.
  nlohmann::json service_config;
};

// InvalidArgument naming file and key for a document that is not such a policy.
absl::StatusOr<ClientPolicy> ParseClientPolicy(absl::string_view text,
                                               const std::string& file);

// The embedded policy, parsed once. It is part of the build, so one that does not parse
// is a defect of this build: that aborts, naming the key.
const ClientPolicy& EmbeddedClientPolicy();

// The policy's service config for a client that makes at most max_attempts attempts
// (>= 1) a call: maxAttempts replaced (gRPC allows 2 to 5); 1 drops the retry policy
// and wait-for-ready, so that a call fails at once while no server is reachable.
std::string ServiceConfigJson(const ClientPolicy& policy, int max_attempts);

}  // namespace gpuest::client
