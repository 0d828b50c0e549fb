// File: cli_fixture.h
//
// A test suite that shares one real gpuest-server and runs the gpuest CLI against it.
#pragma once

#include <string>
#include <vector>

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

}  // namespace gpuest::testing
