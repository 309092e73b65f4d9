#include "agent/edge/timer_queue.h"

#include <vector>

namespace edge::agentedge {

TimerQueue::TimerQueue(Clock& clock) : clock_(clock) {
  thread_ = std::thread([this] { Loop(); });
}

TimerQueue::~TimerQueue() {
  Stop();
}

TimerQueue::TimerId TimerQueue::After(std::chrono::milliseconds delay, Callback cb) {
  std::lock_guard lock(mu_);
  if (stopping_) return 0;
  const TimerId id = next_id_++;
  const Clock::MonoTime due =
      clock_.Monotonic() + std::max(delay, std::chrono::milliseconds::zero());
  timers_.emplace(std::make_pair(due, id), std::move(cb));
  due_of_.emplace(id, due);
  cv_.notify_all();
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  std::lock_guard lock(mu_);
  auto it = due_of_.find(id);
  if (it == due_of_.end()) return false;
  timers_.erase({it->second, id});
  due_of_.erase(it);
  return true;
}

void TimerQueue::Poke() {
  std::lock_guard lock(mu_);
  ++pokes_;
  cv_.notify_all();
}

void TimerQueue::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    timers_.clear();
    due_of_.clear();
    cv_.notify_all();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t TimerQueue::Pending() const {
  std::lock_guard lock(mu_);
  return timers_.size();
}

std::optional<Clock::MonoTime> TimerQueue::NextDue() const {
  std::lock_guard lock(mu_);
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first.first;
}

bool TimerQueue::IsPending(TimerId id) const {
  std::lock_guard lock(mu_);
  return due_of_.contains(id);
}

void TimerQueue::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const Clock::MonoTime now = clock_.Monotonic();
    if (!timers_.empty() && timers_.begin()->first.first <= now) {
      auto node = timers_.extract(timers_.begin());
      due_of_.erase(node.key().second);
      Callback cb = std::move(node.mapped());
      lock.unlock();
      if (cb) cb();
      lock.lock();
      continue;
    }
    // Wait for the earliest timer in real time (the SystemClock), a new timer, a Poke (a
    // ManualClock moved) or Stop. A long wait is cut to 1 s so a clock that jumps is seen.
    const uint64_t pokes = pokes_;
    const size_t size = timers_.size();
    const auto first = timers_.empty() ? Clock::MonoTime::max() : timers_.begin()->first.first;
    auto wait = timers_.empty()
                    ? std::chrono::nanoseconds(std::chrono::seconds(1))
                    : std::min<std::chrono::nanoseconds>(first - now, std::chrono::seconds(1));
    cv_.wait_for(lock, wait, [&] {
      return stopping_ || pokes_ != pokes || timers_.size() != size ||
             (!timers_.empty() && timers_.begin()->first.first != first);
    });
  }
}

}  // namespace edge::agentedge
