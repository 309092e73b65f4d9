#include "common/stop.h"

#include <signal.h>

#include "common/signals.h"
#include "common/thread_name.h"

namespace edge {

StopCallback& StopCallback::operator=(StopCallback&& o) noexcept {
  if (this != &o) {
    if (release_) release_();
    release_ = std::exchange(o.release_, nullptr);
  }
  return *this;
}

StopCallback::~StopCallback() {
  if (release_) release_();
}

bool StopSource::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopped_; });
}

bool StopSource::Stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

std::string StopSource::StopReason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

StopCallback StopSource::OnStop(std::function<void()> fn) {
  std::lock_guard cb_lock(cb_mu_);
  if (Stopped()) {
    fn();
    return StopCallback();
  }
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(fn));
  return StopCallback([this, id] {
    std::lock_guard lock(cb_mu_);
    callbacks_.erase(id);
  });
}

void StopSource::Stop(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    reason_ = reason;
  }
  cv_.notify_all();
  std::lock_guard cb_lock(cb_mu_);
  for (auto& [id, fn] : callbacks_)
    fn();
  callbacks_.clear();
}

TerminationSignalStop::TerminationSignalStop(StopSource& source) : source_(source) {
  thread_ = std::thread([this] {
    NameThisThread("edge-signals");
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (done_) return;
      }
      if (auto sig = WaitForTerminationSignal(std::chrono::milliseconds(100))) {
        source_.Stop(SignalName(*sig));
        return;
      }
    }
  });
}

TerminationSignalStop::~TerminationSignalStop() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  thread_.join();
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal " + std::to_string(sig);
  }
}

}  // namespace edge
