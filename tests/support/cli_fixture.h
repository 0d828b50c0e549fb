// File: cli_fixture.h
//
// Test suites that share one real gpuest-server: one runs the gpuest CLI against it,
// the other calls it through the client library.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/server_process.h"

namespace gpuest::testing {

class CliAgainstServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  // `gpuest --target <server> args...`, with stdin_text on its standard input.
  static CommandResult Cli(std::vector<std::string> args,
                           const std::string& stdin_text = "");

  static ServerProcess* server_;  // Owned; one per suite.
};

class ClientAgainstServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite();  // StartServerAndClient({}, 10 s).
  static void TearDownTestSuite();
  // The suite's server, started with server_flags, and a client of it whose calls have
  // deadline: for a suite that needs more than the default (SetUpTestSuite's).
  static void StartServerAndClient(const std::vector<std::string>& server_flags,
                                   absl::Duration deadline);

  static ServerProcess* server_;  // Owned; one per suite.
  static Client* client_;         // Owned; a deadline of 10 s unless a suite says.
};

}  // namespace gpuest::testing
