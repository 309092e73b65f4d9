#include "common/signals.h"

#include <signal.h>

#include <cerrno>
#include <ctime>

namespace edge {
namespace {
sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  IgnoreFatalIoSignals();
}

void IgnoreFatalIoSignals() {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
}

std::optional<int> WaitForTerminationSignal(std::optional<std::chrono::milliseconds> timeout) {
  sigset_t set = TerminationSet();
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

}  // namespace edge
