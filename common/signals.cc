#include "common/signals.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <ctime>

namespace edge {

sigset_t TerminationSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  return set;
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignalSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  IgnoreFatalIoSignals();
}

void IgnoreFatalIoSignals() {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
}

std::optional<int> WaitForTerminationSignal(std::optional<std::chrono::milliseconds> timeout) {
  sigset_t set = TerminationSignalSet();
  while (true) {
    int sig = 0;
    if (!timeout) {
      if (sigwait(&set, &sig) == 0) return sig;
      continue;
    }
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout->count() / 1000);
    ts.tv_nsec = static_cast<long>((timeout->count() % 1000) * 1'000'000);
    int rc = sigtimedwait(&set, nullptr, &ts);
    if (rc > 0) return rc;
    if (errno == EINTR) continue;
    return std::nullopt;
  }
}

SignalWaiter::SignalWaiter() {
  sigset_t set = TerminationSignalSet();
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (signal_fd_ < 0 || event_fd_ < 0) {
    if (signal_fd_ >= 0) ::close(signal_fd_);
    if (event_fd_ >= 0) ::close(event_fd_);
    signal_fd_ = event_fd_ = -1;
  }
}

SignalWaiter::~SignalWaiter() {
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (event_fd_ >= 0) ::close(event_fd_);
}

void SignalWaiter::Wake() {
  if (event_fd_ < 0) return;  // the degraded Wait looks again within 1 s anyway
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(event_fd_, &one, sizeof one);  // full counter: still set
}

std::optional<int> SignalWaiter::Wait(std::optional<std::chrono::milliseconds> timeout) {
  using std::chrono::milliseconds;
  if (signal_fd_ < 0) {
    return WaitForTerminationSignal(
        std::min(timeout.value_or(milliseconds(1000)), milliseconds(1000)));
  }
  pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {event_fd_, POLLIN, 0}};
  const int ms =
      timeout ? static_cast<int>(std::clamp<int64_t>(timeout->count(), 0, INT32_MAX)) : -1;
  int rc = ::poll(fds, 2, ms);
  if (rc <= 0) return std::nullopt;  // timeout, or EINTR: the caller's loop looks again
  if (fds[0].revents & POLLIN) {
    signalfd_siginfo info{};
    if (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      return static_cast<int>(info.ssi_signo);
    }
  }
  if (fds[1].revents & POLLIN) {
    uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(event_fd_, &count, sizeof count);
  }
  return std::nullopt;
}

}  // namespace edge
