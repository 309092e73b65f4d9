// Termination signals for daemons: block them in every thread before any thread starts,
// then wait for one in the main thread (sigwait), so shutdown is orderly and prompt.
#pragma once

#include <signal.h>

#include <chrono>
#include <optional>

namespace edge {

// The termination signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT.
sigset_t TerminationSignalSet();

// Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT in the calling thread (and threads it starts
// later inherit the mask), and calls IgnoreFatalIoSignals().
void BlockTerminationSignals();

// SIGPIPE and SIGXFSZ become errors (EPIPE, EFBIG) instead of killing the process: a closed
// peer or a file-size limit is reported, never fatal. Every binary calls this first.
void IgnoreFatalIoSignals();

// Waits up to `timeout` (forever if nullopt) for one of the blocked signals; returns it,
// or nullopt on timeout.
std::optional<int> WaitForTerminationSignal(
    std::optional<std::chrono::milliseconds> timeout = std::nullopt);

// The same wait for a daemon loop that sleeps until there is work: Wait() returns a blocked
// termination signal, or nullopt on timeout or once another thread has called Wake(), so the
// loop never needs to poll for what other threads did (a signalfd and an eventfd, one poll).
// Wake() before Wait() is not lost: the next Wait() returns at once. Should the descriptors
// not be available, Wait() degrades to WaitForTerminationSignal with at most 1 s per call.
class SignalWaiter {
 public:
  SignalWaiter();
  ~SignalWaiter();
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

  // Any thread; never blocks, async-signal-safe.
  void Wake();
  // The signal that arrived; nullopt after a timeout or a Wake (which it consumes). Only the
  // thread that waits for signals calls it.
  std::optional<int> Wait(std::optional<std::chrono::milliseconds> timeout);

 private:
  int signal_fd_ = -1;
  int event_fd_ = -1;
};

}  // namespace edge
