// File: cli_fixture.h
//
// Test suites that share one real gpuest-server: one runs the gpuest CLI against it,
// the other calls it through the client library.
#pragma once

#include <string>
#include <vector>

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
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  static ServerProcess* server_;  // Owned; one per suite.
  static Client* client_;         // Owned; a deadline of 10 s, for a loaded machine.
};

}  // namespace gpuest::testing
