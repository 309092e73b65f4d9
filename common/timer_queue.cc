#include "common/timer_queue.h"

#include <vector>

#include "common/thread_name.h"

namespace edge {

TimerQueue::TimerQueue(Clock& clock) : clock_(clock) {
  // A clock moved by hand (a test's) wakes the queue at once; the real one never jumps.
  jump_listener_ = clock_.AddJumpListener([this] { Poke(); });
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
  // First (its listener locks mu_ through Poke), and only once: after a Stop the queue never
  // touches the clock again, so it may outlive it.
  if (const uint64_t id = jump_listener_.exchange(0); id != 0) {
    clock_.RemoveJumpListener(id);
  }
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
  NameThisThread("edge-timers");
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
    // clock that jumped) or Stop — and with no timer, for nothing else: an idle queue does
    // not wake up.
    const uint64_t pokes = pokes_;
    const size_t size = timers_.size();
    const auto first = timers_.empty() ? Clock::MonoTime::max() : timers_.begin()->first.first;
    auto woken = [&] {
      return stopping_ || pokes_ != pokes || timers_.size() != size ||
             (!timers_.empty() && timers_.begin()->first.first != first);
    };
    if (timers_.empty()) {
      cv_.wait(lock, woken);
    } else {
      cv_.wait_for(lock, std::chrono::nanoseconds(first - now), woken);
    }
  }
}

}  // namespace edge
