#include "sandbox/process_control.h"

#include <signal.h>

#include <cerrno>
#include <cstring>

namespace edge::sandbox {

Status ProcessControl::Write(std::string data) {
  std::function<void()> pump;
  {
    std::lock_guard lock(mu_);
    if (closed_) return MakeError(closed_code_, closed_why_);
    if (data.size() > max_queued_ || queued_ > max_queued_ - data.size()) {
      return MakeError(ErrorCode::kResourceExhausted,
                       "stdin queue full: " + std::to_string(queued_) +
                           " bytes not yet read by the process, " + std::to_string(data.size()) +
                           " more would pass the limit of " + std::to_string(max_queued_) +
                           " (nothing was written; try again once it reads)");
    }
    if (data.empty()) return OkStatus();
    queued_ += data.size();
    queue_.push_back(std::move(data));
    pump = pump_;
  }
  if (pump) pump();
  return OkStatus();
}

Status ProcessControl::Signal(int sig) {
  std::lock_guard lock(mu_);
  if (closed_ && closed_code_ == ErrorCode::kNotFound) {
    return MakeError(ErrorCode::kNotFound, closed_why_);
  }
  if (!attached_ || pgid_ <= 0) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "its process has not started yet (try again once it runs)");
  }
  // Under the lock: Ended() waits for it, and the leader is reaped only after Ended().
  if (::kill(-pgid_, sig) != 0) {
    return MakeError(ErrorCode::kNotFound,
                     std::string("its process group is gone: ") + std::strerror(errno));
  }
  return OkStatus();
}

void ProcessControl::Close(const std::string& why) {
  std::lock_guard lock(mu_);
  if (!closed_) {
    closed_ = true;
    closed_code_ = ErrorCode::kNotFound;
    closed_why_ = why;
  }
  pgid_ = 0;
  pump_ = nullptr;
  queue_.clear();
  queued_ = 0;
}

size_t ProcessControl::queued_bytes() const {
  std::lock_guard lock(mu_);
  return queued_;
}

bool ProcessControl::running() const {
  std::lock_guard lock(mu_);
  return attached_ && pgid_ > 0;
}

void ProcessControl::Attach(pid_t pgid, std::function<void()> pump) {
  bool kick = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    attached_ = true;
    pgid_ = pgid;
    pump_ = pump;
    kick = !queue_.empty();
  }
  if (kick && pump) pump();
}

std::string ProcessControl::TakeForWrite() {
  std::lock_guard lock(mu_);
  std::string out;
  if (closed_) return out;
  while (!queue_.empty()) {
    if (out.empty()) {
      out = std::move(queue_.front());
    } else {
      out += queue_.front();
    }
    queue_.pop_front();
  }
  return out;
}

void ProcessControl::Written(size_t n) {
  std::lock_guard lock(mu_);
  queued_ = n > queued_ ? 0 : queued_ - n;
}

void ProcessControl::StdinFailed(const std::string& why) {
  std::lock_guard lock(mu_);
  if (!closed_) {
    closed_ = true;
    closed_code_ = ErrorCode::kFailedPrecondition;
    closed_why_ = why;
  }
  queue_.clear();
  queued_ = 0;
  pump_ = nullptr;
}

void ProcessControl::Ended(const std::string& why) {
  std::lock_guard lock(mu_);
  pgid_ = 0;
  pump_ = nullptr;
  queue_.clear();
  queued_ = 0;
  // An ended process outranks a closed stdin: the session is gone either way.
  closed_ = true;
  closed_code_ = ErrorCode::kNotFound;
  closed_why_ = why;
}

}  // namespace edge::sandbox
