// CancelSource / CancelToken: cooperative cancellation of one piece of work (a command, an
// exec). The door that owns the work keeps the CancelSource and calls Cancel(reason) (a
// Cancel on the wire, a closed client, a lease that expired, Shutdown); the executor and the
// process runner hold CancelTokens and subscribe a callback that stops the process group.
// Both are cheap copyable handles on one shared state; callbacks run at most once, on the
// thread that calls Cancel (or at once on the subscribing thread when already cancelled).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace edge::sandbox {

namespace detail {
struct CancelState;
}

class CancelToken;

// Removes its callback from the token when destroyed (or on Reset()).
class CancelRegistration {
 public:
  CancelRegistration() = default;
  CancelRegistration(std::shared_ptr<detail::CancelState> state, uint64_t id)
      : state_(std::move(state)), id_(id) {}
  ~CancelRegistration() { Reset(); }
  CancelRegistration(CancelRegistration&& o) noexcept;
  CancelRegistration& operator=(CancelRegistration&& o) noexcept;
  CancelRegistration(const CancelRegistration&) = delete;
  CancelRegistration& operator=(const CancelRegistration&) = delete;
  void Reset();

 private:
  std::shared_ptr<detail::CancelState> state_;
  uint64_t id_ = 0;
};

class CancelToken {
 public:
  using Callback = std::function<void(const std::string& reason)>;

  // A token that is never cancelled.
  CancelToken() = default;

  bool cancelled() const;
  // The reason given to Cancel ("" while not cancelled).
  std::string reason() const;
  // Runs `cb` once when the source is cancelled: at once (on this thread) when it already
  // is. The callback must not call OnCancel/Reset on the same token from inside itself.
  [[nodiscard]] CancelRegistration OnCancel(Callback cb) const;

 private:
  friend class CancelSource;
  explicit CancelToken(std::shared_ptr<detail::CancelState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CancelState> state_;
};

class CancelSource {
 public:
  CancelSource();
  CancelToken token() const { return CancelToken(state_); }
  // The first call wins; later calls (and their reasons) are ignored. Returns whether this
  // call cancelled.
  bool Cancel(std::string reason);
  bool cancelled() const;

 private:
  std::shared_ptr<detail::CancelState> state_;
};

}  // namespace edge::sandbox
