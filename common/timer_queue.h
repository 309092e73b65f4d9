// TimerQueue: the one timer facility of both binaries (design.md §9): one thread that runs
// callbacks when the injected Clock's monotonic time reaches their due time, so heartbeats,
// reconnect backoff, token renewal, the outbox settle window, the executor's tick and the
// controller's stale sweep are tested without sleeps. With the SystemClock it waits in real
// time; with a ManualClock the test advances the clock and calls Poke(), and every timer that
// is now due runs at once, in due order. Work that belongs on an io_context is posted there
// from the callback.
//
// Callbacks run on the queue's thread, one at a time; they may schedule and cancel timers.
// Owns its thread; Stop() (or the destructor) ends it without running what is still pending.
// Borrows the clock until Stop(): a stopped queue may outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/clock.h"

namespace edge {

class TimerQueue {
 public:
  using TimerId = uint64_t;
  using Callback = std::function<void()>;

  explicit TimerQueue(Clock& clock);
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Runs `cb` once `delay` has passed on the clock (at once for a delay <= 0). Returns an id
  // for Cancel; 0 when the queue is stopped (the callback is dropped).
  TimerId After(std::chrono::milliseconds delay, Callback cb);
  // Removes a pending timer; false when it already ran, is running or is unknown.
  bool Cancel(TimerId id);
  // Re-reads the clock and runs what is due. A clock that jumps (a ManualClock) calls it by
  // itself through its jump listener; callers need not.
  void Poke();
  // Ends the thread; pending timers are dropped. Idempotent; must not be called from a
  // callback.
  void Stop();

  // For tests and status: how many timers are pending and when the earliest is due.
  size_t Pending() const;
  std::optional<Clock::MonoTime> NextDue() const;
  // True when `id` is still pending.
  bool IsPending(TimerId id) const;
  Clock& clock() const { return clock_; }

 private:
  void Loop();

  Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Ordered by (due, id), so equal due times run in scheduling order.
  std::map<std::pair<Clock::MonoTime, TimerId>, Callback> timers_;
  std::map<TimerId, Clock::MonoTime> due_of_;
  TimerId next_id_ = 1;
  uint64_t pokes_ = 0;
  std::atomic<uint64_t> jump_listener_{0};  // 0 once removed
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace edge
