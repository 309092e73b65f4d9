// Injected time (design.md §9). Production code takes a Clock&; tests pass a ManualClock
// (tests/support/manual_clock.h) and advance it, so heartbeats, leases, backoff and token
// expiry are tested without sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

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

  // `fn` is called after the clock jumps (a test's clock moved by hand; real clocks never
  // do), so whatever waits on it — a TimerQueue — looks again at once. Returns an id for
  // RemoveJumpListener (0 = this clock never jumps). `fn` must not call back into the clock's
  // listener functions.
  virtual uint64_t AddJumpListener(std::function<void()> fn) {
    (void)fn;
    return 0;
  }
  // After it returns, the listener is not running and is never called again.
  virtual void RemoveJumpListener(uint64_t id) { (void)id; }
};

// The real clocks.
class SystemClock final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  MonoTime Monotonic() const override { return std::chrono::steady_clock::now(); }
  // A process-wide instance for production wiring.
  static SystemClock& Instance();
};

// Milliseconds since the Unix epoch.
inline int64_t ToEpochMillis(Clock::WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline Clock::WallTime FromEpochMillis(int64_t ms) {
  return Clock::WallTime(std::chrono::milliseconds(ms));
}

}  // namespace edge
