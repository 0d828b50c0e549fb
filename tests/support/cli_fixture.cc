#include "tests/support/cli_fixture.h"

namespace gpuest::testing {

ServerProcess* CliAgainstServer::server_ = nullptr;

void CliAgainstServer::SetUpTestSuite() {
  auto server = ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = server->release();
}

void CliAgainstServer::TearDownTestSuite() {
  delete server_;
  server_ = nullptr;
}

CommandResult CliAgainstServer::Cli(std::vector<std::string> args,
                                    const std::string& stdin_text) {
  args.insert(args.begin(), {GPUEST_CLI_PATH, "--target", server_->target()});
  return RunCommand(args, stdin_text);
}

}  // namespace gpuest::testing
