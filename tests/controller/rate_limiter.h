// A sliding-window rate limit: at most `limit` events per `window` for each key (AttestNode:
// 5 per minute per peer address). Time comes from the injected Clock's monotonic reading, so
// tests move it with a ManualClock. Thread-safe; memory is bounded by the keys seen within
// one window.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "common/clock.h"

namespace edge::controller {

class RateLimiter {
 public:
  RateLimiter(Clock& clock, size_t limit, std::chrono::milliseconds window)
      : clock_(clock), limit_(limit), window_(window) {}

  // Records an event for `key` and says whether it is within the limit. Refused events are
  // not recorded (a caller hammering the limit does not extend its own ban).
  bool Allow(const std::string& key) {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    // Forget events (and keys) that left the window.
    for (auto it = events_.begin(); it != events_.end();) {
      auto& q = it->second;
      while (!q.empty() && now - q.front() >= window_)
        q.pop_front();
      it = q.empty() ? events_.erase(it) : std::next(it);
    }
    auto& q = events_[key];
    if (q.size() >= limit_) return false;
    q.push_back(now);
    return true;
  }

 private:
  Clock& clock_;
  const size_t limit_;
  const std::chrono::milliseconds window_;
  std::mutex mu_;
  std::map<std::string, std::deque<Clock::MonoTime>> events_;
};

}  // namespace edge::controller
