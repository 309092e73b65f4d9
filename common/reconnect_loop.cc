#include "common/reconnect_loop.h"

#include <utility>

#include "common/thread_name.h"

namespace edge {

ReconnectLoop::ReconnectLoop(TimerQueue& timers, Backoff& backoff, Hooks hooks)
    : timers_(timers), backoff_(backoff), hooks_(std::move(hooks)) {}

ReconnectLoop::~ReconnectLoop() {
  Stop();
}

bool ReconnectLoop::Start() {
  std::lock_guard lock(thread_mu_);
  if (started_) return false;
  started_ = true;
  thread_ = std::thread([this] {
    NameThisThread("edge-reconnect");
    Run();
  });
  return true;
}

void ReconnectLoop::Stop() {
  bool first = false;
  {
    std::lock_guard lock(wait_->mu);
    first = !wait_->stop;
    wait_->stop = true;
    wait_->cv.notify_all();
  }
  // Once: a second Stop (the destructor's, after the owner's) must not reach an owner that
  // is being destroyed.
  if (first && hooks_.interrupt) hooks_.interrupt();
  std::lock_guard lock(thread_mu_);
  if (thread_.joinable()) thread_.join();
}

void ReconnectLoop::SkipBackoff() {
  std::lock_guard lock(wait_->mu);
  wait_->skip = true;
  wait_->cv.notify_all();
}

void ReconnectLoop::StreamOpened() {
  std::lock_guard lock(wait_->mu);
  wait_->taken = false;
}

void ReconnectLoop::Taken() {
  std::lock_guard lock(wait_->mu);
  if (wait_->taken) return;
  wait_->taken = true;
  backoff_.Reset();
}

void ReconnectLoop::Run() {
  while (true) {
    {
      std::lock_guard lock(wait_->mu);
      if (wait_->stop) break;
    }
    if (hooks_.attempt() == Next::kExit) break;
    WaitBackoff();
  }
  if (hooks_.ended) hooks_.ended();
}

void ReconnectLoop::WaitBackoff() {
  std::unique_lock lock(wait_->mu);
  if (wait_->stop || wait_->skip) return;
  const std::chrono::milliseconds delay = backoff_.Next();
  wait_->woken = false;
  // Armed before the owner shows the wait, so whoever sees it can rely on the timer.
  const TimerQueue::TimerId id = timers_.After(delay, [w = wait_] {
    std::lock_guard l(w->mu);
    w->woken = true;
    w->cv.notify_all();
  });
  if (hooks_.backing_off) {
    lock.unlock();
    hooks_.backing_off(delay);
    lock.lock();
  }
  wait_->cv.wait(lock, [this] { return wait_->stop || wait_->skip || wait_->woken; });
  timers_.Cancel(id);
  wait_->woken = false;
}

}  // namespace edge
