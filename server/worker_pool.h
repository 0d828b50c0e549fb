// File: worker_pool.h
//
// A fixed set of threads that run estimator work, so that no gRPC callback thread
// blocks on it. The queue is bounded: when it is full, Submit refuses and the caller
// answers RESOURCE_EXHAUSTED instead of queueing without limit.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gpuest {

class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queue);
  ~WorkerPool();  // Runs what is queued, then joins.

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False when the queue is full or the pool is stopping; the task is not run.
  bool Submit(std::function<void()> task);

  // Stops taking work, runs what is queued and joins. Idempotent.
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
  std::vector<std::thread> threads_;
};

}  // namespace gpuest
