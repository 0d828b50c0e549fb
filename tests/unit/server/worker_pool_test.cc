// server/worker_pool: what it promises its caller (the gRPC service) about running,
// refusing and draining work. Threads meet on absl::Mutex conditions, never on sleeps.
#include "server/worker_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace gpuest::server {
namespace {

// Tasks that hold until the test opens the gate, counting how many run at once.
class Gate {
 public:
  // A task body: enters, waits for Open(), leaves.
  void Pass() {
    absl::MutexLock lock(&mu_);
    ++inside_;
    most_inside_ = std::max(most_inside_, inside_);
    mu_.Await(absl::Condition(&open_));
    --inside_;
    ++passed_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Blocks until n tasks are waiting at the gate at the same time.
  void AwaitInside(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return inside_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  int most_inside() {
    absl::MutexLock lock(&mu_);
    return most_inside_;
  }
  int passed() {
    absl::MutexLock lock(&mu_);
    return passed_;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int inside_ ABSL_GUARDED_BY(mu_) = 0;
  int most_inside_ ABSL_GUARDED_BY(mu_) = 0;
  int passed_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(WorkerPool, RunsEveryAcceptedTaskOnItsOwnThreads) {
  constexpr int kTasks = 200;
  std::atomic<int> ran{0};
  std::atomic<bool> on_caller_thread{false};
  const std::thread::id caller = std::this_thread::get_id();
  {
    WorkerPool pool(4, kTasks);
    EXPECT_EQ(pool.size(), 4);
    for (int i = 0; i < kTasks; ++i) {
      ASSERT_TRUE(pool.Submit([&] {
        if (std::this_thread::get_id() == caller) on_caller_thread = true;
        ++ran;
      }));
    }
  }  // The destructor drains the queue.
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_FALSE(on_caller_thread.load());
}

TEST(WorkerPool, RunsAtMostSizeTasksAtOnce) {
  constexpr int kThreads = 3, kQueue = 6;
  Gate gate;
  WorkerPool pool(kThreads, kQueue);
  EXPECT_EQ(pool.size(), kThreads);
  for (int i = 0; i < kThreads; ++i) ASSERT_TRUE(pool.Submit([&] { gate.Pass(); }));
  gate.AwaitInside(kThreads);  // Every thread is busy at once.
  for (int i = 0; i < kQueue; ++i) ASSERT_TRUE(pool.Submit([&] { gate.Pass(); }));
  // With every thread held at the gate, no task leaves the queue: it stays full.
  EXPECT_FALSE(pool.Submit([] {}));
  gate.Open();
  pool.Stop();
  EXPECT_EQ(gate.passed(), kThreads + kQueue);
  EXPECT_EQ(gate.most_inside(), kThreads);
}

TEST(WorkerPool, AFullQueueRefusesAndTheRefusedTaskNeverRuns) {
  Gate gate;
  std::atomic<int> queued_ran{0};
  std::atomic<bool> refused_ran{false};
  WorkerPool pool(1, 2);
  ASSERT_TRUE(pool.Submit([&] { gate.Pass(); }));
  gate.AwaitInside(1);  // The only thread is busy; the queue is empty.
  EXPECT_TRUE(pool.Submit([&] { ++queued_ran; }));
  EXPECT_TRUE(pool.Submit([&] { ++queued_ran; }));
  EXPECT_FALSE(pool.Submit([&] { refused_ran = true; }));  // Two queued: full.
  gate.Open();
  pool.Stop();
  EXPECT_EQ(queued_ran.load(), 2);
  EXPECT_FALSE(refused_ran.load());
}

TEST(WorkerPool, StopRunsWhatIsQueuedAndRefusesNewWork) {
  Gate gate;
  std::atomic<int> queued_ran{0};
  WorkerPool pool(1, 1 << 20);
  ASSERT_TRUE(pool.Submit([&] { gate.Pass(); }));
  gate.AwaitInside(1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.Submit([&] { ++queued_ran; }));

  // Stop waits for the busy thread; until it has marked the pool stopping, Submit
  // still accepts (and each accepted task must run before Stop returns).
  std::thread stopper([&] { pool.Stop(); });
  int accepted_meanwhile = 0;
  while (pool.Submit([&] { ++queued_ran; })) {
    ++accepted_meanwhile;
    std::this_thread::yield();
  }
  EXPECT_EQ(queued_ran.load(), 0) << "queued tasks ran while the only thread was busy";
  gate.Open();
  stopper.join();
  EXPECT_EQ(queued_ran.load(), 5 + accepted_meanwhile);

  std::atomic<bool> late_ran{false};
  EXPECT_FALSE(pool.Submit([&] { late_ran = true; }));
  pool.Stop();  // Idempotent: returns at once.
  EXPECT_FALSE(late_ran.load());
}

TEST(WorkerPool, RunHereIfRoomRunsOnTheCallersThreadWhenThePoolHasRoom) {
  WorkerPool pool(2, 4);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  EXPECT_TRUE(pool.RunHereIfRoom([&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, caller);
}

TEST(WorkerPool, RunHereIfRoomRefusesWhileEveryThreadsWorthOfTasksRuns) {
  Gate gate;
  WorkerPool pool(1, 4);
  ASSERT_TRUE(pool.Submit([&] { gate.Pass(); }));
  gate.AwaitInside(1);  // The one worker is busy: no room to run another here.
  bool ran = false;
  EXPECT_FALSE(pool.RunHereIfRoom([&] { ran = true; }));
  EXPECT_FALSE(ran);
  gate.Open();
  pool.Stop();
}

TEST(WorkerPool, AtMostSizeTasksRunOnCallersThreadsAndTheWorkersStillServe) {
  Gate gate;
  WorkerPool pool(2, 4);
  std::vector<std::thread> callers;
  std::atomic<int> ran_here{0};
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&] {
      if (pool.RunHereIfRoom([&] { gate.Pass(); })) ++ran_here;
    });
  }
  gate.AwaitInside(2);  // Two tasks, as many as the pool has threads, run here.
  bool ran = false;
  EXPECT_FALSE(pool.RunHereIfRoom([&] { ran = true; }));
  EXPECT_FALSE(ran);
  // The pool's own threads are free: submitted work runs while those are held.
  absl::Notification done;
  ASSERT_TRUE(pool.Submit([&] { done.Notify(); }));
  done.WaitForNotification();
  gate.Open();
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(ran_here.load(), 2);
}

TEST(WorkerPool, StopWaitsForTasksOnCallersThreadsAndRefusesMore) {
  Gate gate;
  WorkerPool pool(1, 1 << 20);  // Room for every Submit until Stop refuses.
  std::thread caller([&] { EXPECT_TRUE(pool.RunHereIfRoom([&] { gate.Pass(); })); });
  gate.AwaitInside(1);
  absl::Notification stopped;
  std::thread stopper([&] {
    pool.Stop();
    stopped.Notify();
  });
  while (pool.Submit([] {})) std::this_thread::yield();  // Until Stop has begun.
  // The one bounded wait here: it can only miss a Stop that returns late.
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(100)))
      << "Stop returned while a task ran on a caller's thread";
  gate.Open();
  stopper.join();
  caller.join();
  bool ran = false;
  EXPECT_FALSE(pool.RunHereIfRoom([&] { ran = true; }));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace gpuest::server
