// Termination signals for daemons: block them in every thread before any thread starts,
// then wait for one in the main thread (sigwait), so shutdown is orderly and prompt.
#pragma once

#include <chrono>
#include <optional>

namespace edge {

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

}  // namespace edge
