// BatchWorker<T>: a thread of its own that takes everything queued since its last batch and
// hands it to `handle` in one call — for work whose cost is mostly a wait that one call can
// share, such as a synced SQLite transaction (the controller's command inserts and results:
// one sync for every item that arrived while the previous one was on its way to the disk).
//
// Push never waits for the handler, only for room: the queue is bounded by item count and by
// bytes (`bytes_of`), and past that the caller waits, as it would have waited for the disk
// had it done the work itself. The thread starts with the first Push. Nothing pushed is ever
// dropped: after Stop — or when the thread cannot be started — Push runs `handle` for the item
// on the caller's thread; so does a Push from inside `handle` (on the worker's own thread),
// which could otherwise wait for room only it can make. While Stop drains the queue, such an
// inline call can run beside the worker's last batch, so `handle` must be thread-safe.
//
// Owns its thread; the owner of `handle`'s state must call Stop before that state goes (the
// destructor stops too, for owners with nothing to tear down). `handle` runs one batch at a
// time on the worker, in the order pushed; an exception from it is logged and the batch counts
// as handled. Flush and Stop must not be called from inside `handle`.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"

namespace edge {

template <typename T>
class BatchWorker {
 public:
  struct Options {
    std::string name;        // the thread's name, also in log lines (≤ 15 bytes are kept)
    std::string log_module;  // whose log tells of a failed batch or a thread that cannot start
    size_t max_items = 4096;
    size_t max_bytes = size_t{64} << 20;
  };
  using Handler = std::function<void(std::vector<T>&)>;
  using Sizer = std::function<size_t(const T&)>;

  BatchWorker(Options options, Handler handle, Sizer bytes_of = {})
      : options_(std::move(options)), handle_(std::move(handle)), bytes_of_(std::move(bytes_of)) {}
  ~BatchWorker() { Stop(); }
  BatchWorker(const BatchWorker&) = delete;
  BatchWorker& operator=(const BatchWorker&) = delete;

  // Queues `item` for the next batch (waiting for room when the queue is full), or handles
  // it on this thread (stopped, no thread, or called from `handle`).
  void Push(T item) {
    const size_t bytes = bytes_of_ ? bytes_of_(item) : 0;
    {
      std::unique_lock lock(mu_);
      const bool inside = thread_.joinable() && std::this_thread::get_id() == thread_.get_id();
      if (!inside) {
        cv_.wait(lock, [&] {
          return stopping_ || queue_.empty() ||
                 (queue_.size() < options_.max_items &&
                  queued_bytes_ + bytes <= options_.max_bytes);
        });
      }
      if (!stopping_ && !inside && StartLocked()) {
        queue_.push_back(std::move(item));
        queued_bytes_ += bytes;
        ++pushed_;
        cv_.notify_all();
        return;
      }
    }
    std::vector<T> one;
    one.push_back(std::move(item));
    Run(one);
  }

  // Returns once every item pushed before the call is handled.
  void Flush() {
    std::unique_lock lock(mu_);
    const uint64_t target = pushed_;
    // The worker handles everything queued before it ends, so this is reached.
    cv_.wait(lock, [&] { return handled_ >= target; });
  }

  // Handles what is queued, then ends the thread; later Pushes run on their callers' threads.
  void Stop() {
    std::thread thread;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_all();
      thread = std::move(thread_);
    }
    if (thread.joinable()) thread.join();
  }

 private:
  // mu_ held: the worker runs (started now if need be); false when it cannot start.
  bool StartLocked() {
    if (thread_.joinable()) return true;
    try {
      thread_ = std::thread([this] { Loop(); });
      return true;
    } catch (const std::system_error& e) {
      log::Get(options_.log_module)
          ->error("the {} thread cannot start ({}): its work runs on its callers' threads",
                  options_.name, e.what());
      stopping_ = true;
      return false;
    }
  }

  void Loop() {
    NameThisThread(options_.name);
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      std::vector<T> batch;
      batch.swap(queue_);
      queued_bytes_ = 0;
      cv_.notify_all();  // room for the callers that wait
      lock.unlock();
      const size_t n = batch.size();
      Run(batch);
      lock.lock();
      handled_ += n;
      cv_.notify_all();
    }
  }

  void Run(std::vector<T>& batch) {
    try {
      handle_(batch);
    } catch (const std::exception& e) {
      log::Get(options_.log_module)
          ->error("{}: a batch of {} failed inside the process: {}", options_.name, batch.size(),
                  log::Escape(e.what()));
    }
  }

  const Options options_;
  const Handler handle_;
  const Sizer bytes_of_;
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::vector<T> queue_;
  size_t queued_bytes_ = 0;
  uint64_t pushed_ = 0;   // items ever queued
  uint64_t handled_ = 0;  // of those, handled
  bool stopping_ = false;
  std::thread thread_;  // started by the first Push
};

}  // namespace edge
