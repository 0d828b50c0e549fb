#include "server/worker_pool.h"

namespace gpuest::server {

WorkerPool::WorkerPool(int threads, size_t max_queue) : max_queue_(max_queue) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= max_queue_) return false;
  queue_.push_back(std::move(task));
  return true;
}

bool WorkerPool::RunHereIfRoom(const std::function<void()>& task) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || !queue_.empty() || running_ >= size()) return false;
    ++running_;
  }
  task();
  absl::MutexLock lock(&mu_);
  --running_;
  return true;
}

size_t WorkerPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void WorkerPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Tasks on callers' threads touch the pool when they end: wait for them too.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
}

void WorkerPool::Run() {
  bool ran = false;
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      if (ran) --running_;  // The last task, done: one lock a task.
      mu_.Await(absl::Condition(
          +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // Stopping, and nothing left to run.
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    ran = true;
  }
}

}  // namespace gpuest::server
