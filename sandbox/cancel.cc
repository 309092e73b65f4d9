#include "sandbox/cancel.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace edge::sandbox {
namespace detail {

struct CancelState {
  std::mutex mu;
  bool cancelled = false;
  std::string reason;
  uint64_t next_id = 1;
  std::map<uint64_t, CancelToken::Callback> callbacks;
};

}  // namespace detail

CancelRegistration::CancelRegistration(CancelRegistration&& o) noexcept
    : state_(std::move(o.state_)), id_(std::exchange(o.id_, 0)) {}

CancelRegistration& CancelRegistration::operator=(CancelRegistration&& o) noexcept {
  if (this != &o) {
    Reset();
    state_ = std::move(o.state_);
    id_ = std::exchange(o.id_, 0);
  }
  return *this;
}

void CancelRegistration::Reset() {
  if (state_ && id_ != 0) {
    std::lock_guard lock(state_->mu);
    state_->callbacks.erase(id_);
  }
  state_.reset();
  id_ = 0;
}

bool CancelToken::cancelled() const {
  if (!state_) return false;
  std::lock_guard lock(state_->mu);
  return state_->cancelled;
}

std::string CancelToken::reason() const {
  if (!state_) return {};
  std::lock_guard lock(state_->mu);
  return state_->reason;
}

CancelRegistration CancelToken::OnCancel(Callback cb) const {
  if (!state_) return {};
  std::unique_lock lock(state_->mu);
  if (state_->cancelled) {
    std::string reason = state_->reason;
    lock.unlock();
    cb(reason);
    return {};
  }
  uint64_t id = state_->next_id++;
  state_->callbacks.emplace(id, std::move(cb));
  return CancelRegistration(state_, id);
}

CancelSource::CancelSource() : state_(std::make_shared<detail::CancelState>()) {}

bool CancelSource::Cancel(std::string reason) {
  std::map<uint64_t, CancelToken::Callback> callbacks;
  std::string copy;
  {
    std::lock_guard lock(state_->mu);
    if (state_->cancelled) return false;
    state_->cancelled = true;
    state_->reason = std::move(reason);
    copy = state_->reason;
    callbacks.swap(state_->callbacks);
  }
  for (auto& [id, cb] : callbacks)
    cb(copy);
  return true;
}

bool CancelSource::cancelled() const {
  std::lock_guard lock(state_->mu);
  return state_->cancelled;
}

}  // namespace edge::sandbox
