// `edge-controller nodes | cancel | drain | shutdown | push-config | revoke-node`: the fleet
// list and the one-shot commands sent to a node's stream. A node that is not connected
// exits 69 (kExitNodeUnavailable).
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

edge::cli::CommandRunner AddNodeCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
