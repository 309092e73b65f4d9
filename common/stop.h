// Interruptible waits (design.md §9: a stop or a signal ends every sleep at once).
// Code that waits between attempts takes a Sleeper&: production passes a StopSource (stopped
// by TerminationSignalStop on SIGINT/SIGTERM/SIGHUP/SIGQUIT, or by its owner), tests pass a
// ManualSleeper that advances a ManualClock instead of sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace edge {

// Unregisters an OnStop callback when it goes (move-only).
class StopCallback {
 public:
  StopCallback() = default;
  explicit StopCallback(std::function<void()> release) : release_(std::move(release)) {}
  StopCallback(StopCallback&& o) noexcept : release_(std::exchange(o.release_, nullptr)) {}
  StopCallback& operator=(StopCallback&& o) noexcept;
  StopCallback(const StopCallback&) = delete;
  StopCallback& operator=(const StopCallback&) = delete;
  ~StopCallback();

 private:
  std::function<void()> release_;
};

class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // Waits `d`, or less when stopped: true when the whole time passed, false when stopped
  // (at once when stopped before the call).
  virtual bool SleepFor(std::chrono::milliseconds d) = 0;
  virtual bool Stopped() const = 0;
  // Why it stopped ("SIGTERM", "shutdown", ...); empty while running.
  virtual std::string StopReason() const = 0;
  // Runs `fn` once when stopped (at once, in this thread, when already stopped) while the
  // returned handle lives, e.g. to cancel a blocking call in flight. `fn` must not block.
  [[nodiscard]] virtual StopCallback OnStop(std::function<void()> fn) = 0;
};

// The real one. Stop() may come from any thread; it wakes every SleepFor at once. Thread-safe.
class StopSource final : public Sleeper {
 public:
  bool SleepFor(std::chrono::milliseconds d) override;
  bool Stopped() const override;
  std::string StopReason() const override;
  [[nodiscard]] StopCallback OnStop(std::function<void()> fn) override;
  // The first reason is kept; later calls do nothing.
  void Stop(const std::string& reason);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::string reason_;
  // Callbacks run under cb_mu_, so a StopCallback never goes while its callback runs.
  std::mutex cb_mu_;
  std::map<uint64_t, std::function<void()>> callbacks_;
  uint64_t next_id_ = 0;
};

// While it lives, a thread waits for the termination signals and stops `source` with the
// signal's name ("SIGTERM"). The signals must be blocked in every thread first
// (BlockTerminationSignals() before any thread starts); a signal it takes is not seen by a
// later WaitForTerminationSignal, so the owner checks source.Stopped() after it goes.
class TerminationSignalStop {
 public:
  explicit TerminationSignalStop(StopSource& source);
  ~TerminationSignalStop();  // ends the thread within ~100 ms
  TerminationSignalStop(const TerminationSignalStop&) = delete;
  TerminationSignalStop& operator=(const TerminationSignalStop&) = delete;

 private:
  StopSource& source_;
  std::mutex mu_;
  bool done_ = false;
  std::thread thread_;
};

// "SIGTERM", "SIGINT", ...; "signal N" for others.
std::string SignalName(int sig);

}  // namespace edge
