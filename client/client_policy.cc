#include "client/client_policy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client_policy_json.h"
#include "common/embedded_file.h"
#include "common/status_macros.h"
#include "common/strict_json.h"

namespace gpuest::client {
namespace {

using Fields = common::strict_json::Fields<nlohmann::json>;

// gRPC's limit: a retry policy's maxAttempts above it counts as 5.
constexpr int kGrpcMaxAttempts = 5;

}  // namespace

absl::StatusOr<ClientPolicy> ParseClientPolicy(absl::string_view text,
                                               const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(nlohmann::json json, Fields::Parse(text, file));
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  ClientPolicy policy;
  GPUEST_ASSIGN_OR_RETURN(Fields doc, f.Object("doc"));
  doc.Keys();  // Prose for people; any keys.

  double deadline_s = 0;
  GPUEST_RETURN_IF_ERROR(f.Get("defaultDeadlineSeconds", deadline_s));
  if (!(deadline_s > 0)) return f.Error("defaultDeadlineSeconds", "must be positive");
  policy.default_deadline = absl::Seconds(deadline_s);

  GPUEST_ASSIGN_OR_RETURN(Fields backoff, f.Object("reconnectBackoffMs"));
  GPUEST_RETURN_IF_ERROR(backoff.Get("initial", policy.initial_reconnect_backoff_ms));
  GPUEST_RETURN_IF_ERROR(backoff.Get("min", policy.min_reconnect_backoff_ms));
  GPUEST_RETURN_IF_ERROR(backoff.Get("max", policy.max_reconnect_backoff_ms));
  GPUEST_RETURN_IF_ERROR(backoff.Finish());
  if (policy.min_reconnect_backoff_ms <= 0 ||
      policy.initial_reconnect_backoff_ms < policy.min_reconnect_backoff_ms ||
      policy.max_reconnect_backoff_ms < policy.initial_reconnect_backoff_ms) {
    return backoff.Invalid("must hold 0 < min <= initial <= max");
  }

  // The service config is gRPC's to check (Python hands gRPC the same object); read
  // here is only the maxAttempts that ClientOptions::max_attempts replaces.
  GPUEST_ASSIGN_OR_RETURN(const nlohmann::json* service_config, f.Value("serviceConfig"));
  GPUEST_ASSIGN_OR_RETURN(Fields config,
                          Fields::Of(*service_config, file, "serviceConfig"));
  GPUEST_ASSIGN_OR_RETURN(std::vector<Fields> methods, config.Objects("methodConfig"));
  std::optional<int> max_attempts;
  for (Fields& method : methods) {
    GPUEST_ASSIGN_OR_RETURN(Fields retry, method.Object("retryPolicy"));
    int attempts = 0;
    GPUEST_RETURN_IF_ERROR(retry.Get("maxAttempts", attempts));
    if (attempts < 2 || attempts > kGrpcMaxAttempts) {
      return retry.Error("maxAttempts", "must be 2 to 5 (gRPC's limits)");
    }
    if (max_attempts && attempts != *max_attempts) {
      return retry.Error("maxAttempts",
                         "differs from another method config's: one policy");
    }
    max_attempts = attempts;
  }
  if (!max_attempts) return config.Error("methodConfig", "must have a method config");
  policy.max_attempts = *max_attempts;
  policy.service_config = *service_config;
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return policy;
}

const ClientPolicy& EmbeddedClientPolicy() {
  static const ClientPolicy* policy = common::ParseEmbeddedFileOrDie<ClientPolicy>(
      ClientPolicyJson(), "client_policy.json", ParseClientPolicy);
  return *policy;
}

std::string ServiceConfigJson(const ClientPolicy& policy, int max_attempts) {
  nlohmann::json config = policy.service_config;
  for (nlohmann::json& method : config["methodConfig"]) {
    if (max_attempts <= 1) {
      method.erase("retryPolicy");
      method.erase("waitForReady");
    } else {
      method["retryPolicy"]["maxAttempts"] = std::min(max_attempts, kGrpcMaxAttempts);
    }
  }
  return config.dump();
}

}  // namespace gpuest::client
