// Test doubles of injected time (design.md §9): ManualClock, which moves only when a test
// says so and wakes whatever waits on it (a TimerQueue) when it does, and ManualSleeper, whose
// waits advance that clock at once. Test code only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/stop.h"

namespace edge {

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(WallTime start = WallTime(std::chrono::seconds(1'700'000'000)))
      : wall_(start) {}
  WallTime Now() const override;
  MonoTime Monotonic() const override;
  // Moves both times forward, then calls the jump listeners.
  void Advance(std::chrono::nanoseconds d);
  // Sets the wall time only (a wall-clock jump, either way), then calls the jump listeners.
  void SetWall(WallTime t);

  uint64_t AddJumpListener(std::function<void()> fn) override;
  void RemoveJumpListener(uint64_t id) override;

 private:
  void Jumped();

  mutable std::mutex mu_;
  WallTime wall_;
  MonoTime mono_{};
  // Called under listeners_mu_, so a removed listener is never running afterwards.
  std::mutex listeners_mu_;
  std::map<uint64_t, std::function<void()>> listeners_;
  uint64_t next_listener_ = 1;
};

// For tests: SleepFor advances `clock` by the delay at once and records it; StopAt(n) makes
// the n-th SleepFor (1-based) be interrupted (returns false) as a signal during that wait would.
class ManualSleeper final : public Sleeper {
 public:
  explicit ManualSleeper(ManualClock& clock) : clock_(clock) {}
  bool SleepFor(std::chrono::milliseconds d) override;
  bool Stopped() const override { return stop_.Stopped(); }
  std::string StopReason() const override { return stop_.StopReason(); }
  [[nodiscard]] StopCallback OnStop(std::function<void()> fn) override {
    return stop_.OnStop(std::move(fn));
  }
  void Stop(const std::string& reason) { stop_.Stop(reason); }
  void StopAt(int n, std::string reason = "SIGTERM") {
    stop_at_ = n;
    stop_reason_ = std::move(reason);
  }
  // The delays asked for, interrupted ones included.
  std::vector<std::chrono::milliseconds> slept() const;

 private:
  ManualClock& clock_;
  StopSource stop_;
  mutable std::mutex mu_;
  std::vector<std::chrono::milliseconds> slept_;
  std::optional<int> stop_at_;
  std::string stop_reason_;
};

}  // namespace edge
