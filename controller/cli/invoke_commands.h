// `edge-controller invoke | commands | command get`: running a tool on a node and reading
// commands back. Exit codes of `invoke` (controller/README.md): an ok result exits with the
// tool's exit code (74, kExitOutputIncomplete, when that is 0 but some of the output was
// dropped for this client, or the node's output cap dropped the rest of it); the constants
// below say how else it ended.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

inline constexpr int kExitTimedOut = 124;   // the command timed out on the node (timeout(1))
inline constexpr int kExitCancelled = 130;  // cancelled (like a shell after SIGINT)
// No result arrived and none is coming to this call: the node dropped and did not come back
// within --wait, or said nothing within deadline + 60 s (EX_TEMPFAIL). The command may still
// end on the node; `command get` shows its result once it does.
inline constexpr int kExitResultUnknown = 75;

edge::cli::CommandRunner AddInvokeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
