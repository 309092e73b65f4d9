// A sliding-window rate limit: at most `limit` events per `window` for each key (AttestNode:
// 5 per minute per peer address + node id). Time comes from the injected Clock's monotonic
// reading, so tests move it with a ManualClock. Thread-safe; memory is bounded by the keys
// seen within one window.
#pragma once

#include <algorithm>
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
    const auto now = Expire();
    auto& q = events_[key];
    if (q.size() >= limit_) return false;
    q.push_back(now);
    return true;
  }

  // Which of two limits refused an event (AllowBoth).
  enum class Both { kAllowed, kFirstRefused, kSecondRefused };
  // When both limits allow the event it is recorded in both; otherwise in neither (a caller
  // refused by one limit does not use up the other).
  static Both AllowBoth(RateLimiter& a, const std::string& key_a, RateLimiter& b,
                        const std::string& key_b) {
    std::scoped_lock lock(a.mu_, b.mu_);
    const auto now_a = a.Expire(), now_b = b.Expire();
    if (auto it = a.events_.find(key_a); it != a.events_.end() && it->second.size() >= a.limit_)
      return Both::kFirstRefused;
    if (auto it = b.events_.find(key_b); it != b.events_.end() && it->second.size() >= b.limit_)
      return Both::kSecondRefused;
    a.events_[key_a].push_back(now_a);
    b.events_[key_b].push_back(now_b);
    return Both::kAllowed;
  }
  size_t limit() const { return limit_; }

 private:
  Clock& clock_;
  const size_t limit_;
  const std::chrono::milliseconds window_;
  std::mutex mu_;
  std::map<std::string, std::deque<Clock::MonoTime>> events_;

  // Forgets events (and keys) that left the window; returns now. Caller holds mu_.
  Clock::MonoTime Expire() {
    const auto now = clock_.Monotonic();
    for (auto it = events_.begin(); it != events_.end();) {
      auto& q = it->second;
      while (!q.empty() && now - q.front() >= window_)
        q.pop_front();
      it = q.empty() ? events_.erase(it) : std::next(it);
    }
    return now;
  }
};

// A token bucket per key: up to `burst` events at once, refilled at `per_minute` (the
// ExchangeJoinToken limit per peer address). Monotonic time from the injected Clock.
// Thread-safe; buckets that are full again are forgotten, so memory is bounded by the keys
// seen within one refill period.
class TokenBucketLimiter {
 public:
  TokenBucketLimiter(Clock& clock, double per_minute, double burst)
      : clock_(clock), per_ms_(per_minute / 60'000.0), burst_(burst) {}

  // Takes a token for `key`; false (nothing taken) when its bucket is empty.
  bool Allow(const std::string& key) {
    std::lock_guard lock(mu_);
    const auto now = clock_.Monotonic();
    if (buckets_.size() > 64) Forget(now);
    auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now});
    Bucket& b = it->second;
    if (!fresh) {
      const double elapsed_ms = std::chrono::duration<double, std::milli>(now - b.last).count();
      b.tokens = std::min(burst_, b.tokens + elapsed_ms * per_ms_);
      b.last = now;
    }
    if (b.tokens < 1.0 - 1e-9) return false;  // tolerate rounding of the refill
    b.tokens = std::max(0.0, b.tokens - 1.0);
    return true;
  }
  size_t tracked() {
    std::lock_guard lock(mu_);
    return buckets_.size();
  }

 private:
  struct Bucket {
    double tokens;
    Clock::MonoTime last;
  };
  // Drops buckets that have refilled completely (equivalent to never seen).
  void Forget(Clock::MonoTime now) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      const double elapsed_ms =
          std::chrono::duration<double, std::milli>(now - it->second.last).count();
      it = it->second.tokens + elapsed_ms * per_ms_ >= burst_ ? buckets_.erase(it) : std::next(it);
    }
  }

  Clock& clock_;
  const double per_ms_;
  const double burst_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace edge::controller
