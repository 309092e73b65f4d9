// WorkPool: a fixed number of threads running posted jobs in order of posting — the fleet
// bench's place for blocking work (enrollments: a join token, ExchangeJoinToken, AttestNode →
// ChallengeNode; re-attestations and token renewals of simulated nodes), so the gRPC
// callback threads and the timer thread never block on a unary call. Owns its threads;
// Stop() (or the destructor) drops what is still queued and joins them. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edge::bench {

class WorkPool {
 public:
  explicit WorkPool(int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] { Run(); });
  }
  ~WorkPool() { Stop(); }
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // False (the job is dropped) once stopped.
  bool Post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }
  // Jobs queued and not yet started.
  size_t queued() const {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_ && threads_.empty()) return;
      stopped_ = true;
      jobs_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_)
      t.join();
    threads_.clear();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !jobs_.empty(); });
        if (stopped_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopped_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace edge::bench
