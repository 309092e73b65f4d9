#include "tests/support/manual_clock.h"

namespace edge {

Clock::WallTime ManualClock::Now() const {
  std::lock_guard lock(mu_);
  return wall_;
}

Clock::MonoTime ManualClock::Monotonic() const {
  std::lock_guard lock(mu_);
  return mono_;
}

void ManualClock::Advance(std::chrono::nanoseconds d) {
  {
    std::lock_guard lock(mu_);
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    mono_ += d;
  }
  Jumped();
}

void ManualClock::SetWall(WallTime t) {
  {
    std::lock_guard lock(mu_);
    wall_ = t;
  }
  Jumped();
}

uint64_t ManualClock::AddJumpListener(std::function<void()> fn) {
  std::lock_guard lock(listeners_mu_);
  const uint64_t id = next_listener_++;
  listeners_[id] = std::move(fn);
  return id;
}

void ManualClock::RemoveJumpListener(uint64_t id) {
  std::lock_guard lock(listeners_mu_);
  listeners_.erase(id);
}

void ManualClock::Jumped() {
  std::lock_guard lock(listeners_mu_);
  for (auto& [id, fn] : listeners_)
    fn();
}

bool ManualSleeper::SleepFor(std::chrono::milliseconds d) {
  if (stop_.Stopped()) return false;
  bool interrupt = false;
  {
    std::lock_guard lock(mu_);
    slept_.push_back(d);
    interrupt = stop_at_ && static_cast<int>(slept_.size()) == *stop_at_;
  }
  if (interrupt) {
    stop_.Stop(stop_reason_);
    return false;
  }
  clock_.Advance(d);
  return true;
}

std::vector<std::chrono::milliseconds> ManualSleeper::slept() const {
  std::lock_guard lock(mu_);
  return slept_;
}

}  // namespace edge
