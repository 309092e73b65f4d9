// Injected time (design.md §9). Production code takes a Clock&; tests pass a ManualClock
// and advance it, so heartbeats, leases, backoff and token expiry are tested without sleeps.
#pragma once

#include <chrono>
#include <mutex>

namespace edge {

class Clock {
 public:
  using WallTime = std::chrono::system_clock::time_point;
  using MonoTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Wall-clock time, for expiry and timestamps that cross the wire.
  virtual WallTime Now() const = 0;
  // Monotonic time, for intervals and deadlines inside the process.
  virtual MonoTime Monotonic() const = 0;
};

// The real clocks.
class SystemClock final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  MonoTime Monotonic() const override { return std::chrono::steady_clock::now(); }
  // A process-wide instance for production wiring.
  static SystemClock& Instance();
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(WallTime start = WallTime(std::chrono::seconds(1'700'000'000)))
      : wall_(start) {}
  WallTime Now() const override {
    std::lock_guard lock(mu_);
    return wall_;
  }
  MonoTime Monotonic() const override {
    std::lock_guard lock(mu_);
    return mono_;
  }
  void Advance(std::chrono::nanoseconds d) {
    std::lock_guard lock(mu_);
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    mono_ += d;
  }
  void SetWall(WallTime t) {
    std::lock_guard lock(mu_);
    wall_ = t;
  }

 private:
  mutable std::mutex mu_;
  WallTime wall_;
  MonoTime mono_{};
};

// Milliseconds since the Unix epoch.
inline int64_t ToEpochMillis(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline Clock::WallTime FromEpochMillis(int64_t ms) {
  return Clock::WallTime(std::chrono::milliseconds(ms));
}

}  // namespace edge
