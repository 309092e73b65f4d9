// `edge-controller token create | list | revoke`: single-use join tokens for enrolling agents.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

edge::cli::CommandRunner AddTokenCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
