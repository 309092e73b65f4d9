// TimerQueue: one thread that runs callbacks when the injected Clock's monotonic time reaches
// their due time (design.md §9: timers are injected so heartbeats, reconnect backoff, token
// renewal and the outbox settle window are tested without sleeps). With the SystemClock it
// waits in real time; with a ManualClock the test advances the clock and calls Poke(), and
// every timer that is now due runs at once, in due order.
//
// Callbacks run on the queue's thread, one at a time; they may schedule and cancel timers.
// Owns its thread; Stop() (or the destructor) ends it without running what is still pending.
#pragma once

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

namespace edge::agentedge {

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
  // Re-reads the clock (a ManualClock moved) and runs what is due.
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
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace edge::agentedge
