// `edge-controller serve | status | config check | version`: running the controller and
// asking it (or its config) how it is.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli.h"

namespace edge::controller::cli {

edge::cli::CommandRunner AddServerCommands(CLI::App& app, const edge::cli::GlobalOptions& opts);

}  // namespace edge::controller::cli
