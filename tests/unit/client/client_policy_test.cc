// The client policy file (proto/gpuest/v1/client_policy.json) as the C++ client reads
// it: the embedded copy parses and is what ClientOptions starts from; a key the reader
// does not know, or a value that would not do, is refused naming the key; max_attempts
// rewrites the service config. What the policy does on the wire is tested against a
// real server (integration/server_test.cc, python/tests/test_client.py).
#include "client/client_policy.h"

#include <functional>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "client/client_policy_json.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::client {
namespace {

TEST(ClientPolicy, TheEmbeddedPolicyIsWhatClientOptionsStartsFrom) {
  const ClientPolicy& policy = EmbeddedClientPolicy();
  const ClientOptions options;
  EXPECT_EQ(options.default_deadline, policy.default_deadline);
  EXPECT_EQ(options.max_attempts, policy.max_attempts);
  EXPECT_GT(policy.default_deadline, absl::ZeroDuration());
  EXPECT_GE(policy.max_attempts, 2);
}

// A policy document from the embedded one, edited.
std::string Edited(const std::function<void(nlohmann::json&)>& edit) {
  const std::string_view text = ClientPolicyJson();
  nlohmann::json json = nlohmann::json::parse(text.begin(), text.end());
  edit(json);
  return json.dump();
}

TEST(ClientPolicy, RefusesWhatItDoesNotKnowNamingTheKey) {
  auto misspelt = ParseClientPolicy(
      Edited([](nlohmann::json& j) { j["defaultDeadlineSecond"] = 1; }), "policy.json");
  ASSERT_FALSE(misspelt.ok());
  EXPECT_EQ(misspelt.status().message(),
            "policy.json: 'defaultDeadlineSecond' is not a known key");

  auto backoff = ParseClientPolicy(
      Edited([](nlohmann::json& j) { j["reconnectBackoffMs"]["maximum"] = 1000; }),
      "policy.json");
  ASSERT_FALSE(backoff.ok());
  EXPECT_EQ(backoff.status().message(),
            "policy.json: 'reconnectBackoffMs.maximum' is not a known key");

  auto zero = ParseClientPolicy(
      Edited([](nlohmann::json& j) { j["defaultDeadlineSeconds"] = 0; }), "policy.json");
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(absl::StrContains(zero.status().message(), "'defaultDeadlineSeconds'"))
      << zero.status();

  auto one = ParseClientPolicy(
      Edited([](nlohmann::json& j) {
        j["serviceConfig"]["methodConfig"][0]["retryPolicy"]["maxAttempts"] = 1;
      }),
      "policy.json");
  ASSERT_FALSE(one.ok());
  EXPECT_TRUE(absl::StrContains(
      one.status().message(), "'serviceConfig.methodConfig[0].retryPolicy.maxAttempts'"))
      << one.status();
}

TEST(ClientPolicy, MaxAttemptsRewritesTheServiceConfig) {
  const nlohmann::json& policy = EmbeddedClientPolicy().service_config;
  const auto three = nlohmann::json::parse(ServiceConfigJson(EmbeddedClientPolicy(), 3));
  for (const auto& method : three["methodConfig"]) {
    EXPECT_EQ(method["retryPolicy"]["maxAttempts"], 3);
    EXPECT_EQ(method["waitForReady"], true);
  }
  const auto capped = nlohmann::json::parse(ServiceConfigJson(EmbeddedClientPolicy(), 9));
  EXPECT_EQ(capped["methodConfig"][0]["retryPolicy"]["maxAttempts"], 5);
  // One attempt: no retries, and no waiting for a server either.
  const auto once = nlohmann::json::parse(ServiceConfigJson(EmbeddedClientPolicy(), 1));
  EXPECT_FALSE(once["methodConfig"][0].contains("retryPolicy"));
  EXPECT_FALSE(once["methodConfig"][0].contains("waitForReady"));
  // The rest is the file's, as the Python client hands it to gRPC.
  EXPECT_EQ(once["loadBalancingConfig"], policy["loadBalancingConfig"]);
  EXPECT_EQ(once["methodConfig"][0]["name"], policy["methodConfig"][0]["name"]);
}

}  // namespace
}  // namespace gpuest::client
