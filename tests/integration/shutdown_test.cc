// SIGTERM under load: every call gets an answer or UNAVAILABLE, none hangs, exit 0.
#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::WaitFor;

void ShutDownUnderLoad(int signal_number) {
  auto server = testing::ServerProcess::Start({"--grace-period=5s"});
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions options;
  options.targets = {(*server)->target()};
  options.default_deadline = absl::Seconds(3);
  options.max_attempts = 1;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());
  const v1::EstimateRequest request = testing::ExampleRequest("transformer.json");

  // A call that hangs ends as DEADLINE_EXCEEDED after 3 s and counts as other.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        auto r = (*client)->Estimate(request);
        if (r.ok()) {
          ++ok;
        } else if (r.status().code() == absl::StatusCode::kUnavailable) {
          ++unavailable;
        } else {
          ++other;
          ADD_FAILURE() << r.status();
        }
      }
    });
  }
  auto join_callers = [&] {
    stop = true;
    for (auto& t : callers) t.join();
  };

  // Signal once the load is under way, not after a guessed pause.
  const bool loaded = WaitFor([&] { return ok.load() >= 16; }, absl::Seconds(30));
  (*server)->Signal(signal_number);
  auto exit_code = (*server)->WaitForExit(absl::Seconds(15));
  // Calls made after the exit fail fast as UNAVAILABLE: wait for a few of them.
  const int unavailable_at_exit = unavailable.load();
  const bool failed_fast =
      exit_code.ok() &&
      WaitFor([&] { return unavailable.load() >= unavailable_at_exit + 8; },
              absl::Seconds(2));
  join_callers();

  EXPECT_TRUE(loaded) << "no load reached the server before the signal";
  ASSERT_TRUE(exit_code.ok()) << "server did not exit: " << (*server)->Log();
  EXPECT_EQ(*exit_code, 0) << (*server)->Log();
  EXPECT_TRUE(failed_fast) << "calls after the exit did not fail as UNAVAILABLE";
  EXPECT_EQ(other.load(), 0);
  const std::string log = (*server)->Log();
  const size_t not_serving = log.find("health NOT_SERVING");
  const size_t stopped = log.find("stopped");
  ASSERT_NE(not_serving, std::string::npos) << log;
  ASSERT_NE(stopped, std::string::npos) << log;
  EXPECT_LT(not_serving, stopped) << log;
}

TEST(Shutdown, SigtermUnderLoadDrainsAndExitsZero) { ShutDownUnderLoad(SIGTERM); }
TEST(Shutdown, SigintUnderLoadDrainsAndExitsZero) { ShutDownUnderLoad(SIGINT); }

}  // namespace
}  // namespace gpuest
