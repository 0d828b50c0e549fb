// File: worker_pool.h
//
// A fixed set of threads that run estimator work, so that no gRPC callback thread
// blocks on long work. The queue is bounded: when it is full, Submit refuses and the
// caller answers RESOURCE_EXHAUSTED instead of queueing without limit. Short work may
// instead run on the caller's thread while the pool has room (RunHereIfRoom).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpuest::server {

class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queue);
  ~WorkerPool();  // Stop().

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when the queue is full or the pool is stopping; the task is not run.
  bool Submit(std::function<void()> task);

  // Runs task on the calling thread, now, when the pool has room for it: nothing is
  // queued, the pool is not stopping, and fewer than size() tasks run, on its threads
  // and callers' together. It saves the hand-off to a worker, a thread wake-up that is
  // most of a short call's latency at low load; under load work still queues where
  // the caller can see and bound it. False: the task did not run (Submit it).
  bool RunHereIfRoom(const std::function<void()>& task);

  // Stops taking work, runs what is queued, waits for tasks on callers' threads and
  // joins. Idempotent.
  void Stop();

  int size() const { return static_cast<int>(threads_.size()); }
  // Tasks waiting for a thread now.
  size_t queued() const;
  size_t max_queued() const { return max_queue_; }

 private:
  void Run();

  const size_t max_queue_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // Tasks running now, here or on callers'.
  std::vector<std::thread> threads_;
};

}  // namespace gpuest::server
