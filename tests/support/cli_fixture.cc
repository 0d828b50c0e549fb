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

ServerProcess* ClientAgainstServer::server_ = nullptr;
Client* ClientAgainstServer::client_ = nullptr;

void ClientAgainstServer::SetUpTestSuite() {
  StartServerAndClient({}, absl::Seconds(10));
}

void ClientAgainstServer::StartServerAndClient(
    const std::vector<std::string>& server_flags, absl::Duration deadline) {
  auto server = ServerProcess::Start(server_flags);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = server->release();
  ClientOptions options;
  options.targets = {server_->target()};
  options.default_deadline = deadline;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = client->release();
}

void ClientAgainstServer::TearDownTestSuite() {
  delete client_;
  client_ = nullptr;
  delete server_;
  server_ = nullptr;
}

}  // namespace gpuest::testing
