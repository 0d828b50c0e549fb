// SIGTERM under load: every call gets an answer or UNAVAILABLE, none hangs, exit 0.
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

void ShutDownUnderLoad(int signal_number) {
  auto server = testing::ServerProcess::Start({"--grace-period=5s"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Create({.targets = {(*server)->target()},
                                .default_deadline = absl::Seconds(3),
                                .max_attempts = 1});
  ASSERT_TRUE(client.ok());
  const v1::EstimateRequest request = testing::ExampleRequest("transformer.json");

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
  absl::SleepFor(absl::Milliseconds(300));
  const int before = ok.load();
  (*server)->Signal(signal_number);
  auto exit_code = (*server)->WaitForExit(absl::Seconds(15));
  absl::SleepFor(absl::Milliseconds(100));  // Calls after exit must fail fast too.
  stop = true;
  const absl::Time joined_by = absl::Now() + absl::Seconds(10);
  for (auto& t : callers) t.join();
  EXPECT_LT(absl::Now(), joined_by) << "a call hung";

  ASSERT_TRUE(exit_code.ok()) << "server did not exit: " << (*server)->Log();
  EXPECT_EQ(*exit_code, 0) << (*server)->Log();
  EXPECT_GT(before, 0) << "no load reached the server before the signal";
  EXPECT_GT(unavailable.load(), 0);
  EXPECT_EQ(other.load(), 0);
  const std::string log = (*server)->Log();
  const size_t not_serving = log.find("health NOT_SERVING");
  const size_t stopped = log.find("stopped");
  ASSERT_NE(not_serving, std::string::npos) << log;
  EXPECT_LT(not_serving, stopped) << log;
}

TEST(Shutdown, SigtermUnderLoadDrainsAndExitsZero) { ShutDownUnderLoad(SIGTERM); }
TEST(Shutdown, SigintUnderLoadDrainsAndExitsZero) { ShutDownUnderLoad(SIGINT); }

}  // namespace
}  // namespace gpuest
